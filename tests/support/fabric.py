"""Test fixtures, never shipped: the files a host's fabric shows, in the kernel's documented formats
(Documentation/ABI/stable/sysfs-class-infiniband): RDMA devices with their ports' state, physical state, rate, link
layer and GIDs, the PCI function their `device` link points at, the verbs nodes in /dev/infiniband; HPE Slingshot's
Cassini NICs under /sys/class/cxi with their hsn interfaces; network interfaces under /sys/class/net."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

STATES = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}
PHYS = {"Disabled": 3, "Polling": 2, "LinkUp": 5}
RATE_NAMES = {400.0: "4X NDR", 200.0: "4X HDR", 100.0: "4X EDR", 50.0: "2X HDR", 25.0: "1X EDR"}


@dataclass(frozen=True)
class Port:
    number: int = 1
    state: str = "ACTIVE"
    rate_gbps: float = 400.0
    link_layer: str = "InfiniBand"  # "Ethernet" for RoCE
    roce_v2: bool = False  # a RoCE v2 GID at index 3, as a RoCE NIC's netdev address gives one
    netdev: str | None = None


@dataclass(frozen=True)
class Device:
    name: str
    ports: tuple[Port, ...] = (Port(),)
    pci: str = "0000:0c:00.0"
    numa: int = 0


def write_fabric(root: Path, devices: tuple[Device, ...], *, verbs: bool = True, verbs_mode: int = 0o666) -> None:
    for index, device in enumerate(devices):
        pci_dir = root / "sys" / "devices" / "pci0000:00" / device.pci
        pci_dir.mkdir(parents=True, exist_ok=True)
        (pci_dir / "numa_node").write_text(f"{device.numa}\n")
        folder = root / "sys" / "class" / "infiniband" / device.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "device").symlink_to(os.path.relpath(pci_dir, folder))
        for port in device.ports:
            base = folder / "ports" / str(port.number)
            (base / "gid_attrs" / "types").mkdir(parents=True, exist_ok=True)
            (base / "gid_attrs" / "ndevs").mkdir(parents=True, exist_ok=True)
            (base / "state").write_text(f"{STATES[port.state]}: {port.state}\n")
            (base / "phys_state").write_text("5: LinkUp\n" if port.state == "ACTIVE" else "3: Disabled\n")
            (base / "rate").write_text(f"{port.rate_gbps:g} Gb/sec ({RATE_NAMES.get(port.rate_gbps, '4X')})\n")
            (base / "link_layer").write_text(f"{port.link_layer}\n")
            if port.link_layer == "Ethernet":
                (base / "gid_attrs" / "types" / "0").write_text("IB/RoCE v1\n")
                (base / "gid_attrs" / "types" / "1").write_text("RoCE v2\n" if port.roce_v2 else "IB/RoCE v1\n")
                for i in (0, 1):
                    (base / "gid_attrs" / "ndevs" / str(i)).write_text(f"{port.netdev or 'eth0'}\n")
        if verbs:
            nodes = root / "dev" / "infiniband"
            nodes.mkdir(parents=True, exist_ok=True)
            node = nodes / f"uverbs{index}"
            node.write_text("")
            node.chmod(verbs_mode)
    if verbs and devices:
        (root / "dev" / "infiniband" / "rdma_cm").write_text("")


def write_interfaces(root: Path, names: tuple[str, ...]) -> None:
    """Interfaces up (IFF_UP in flags, operstate up), as /sys/class/net shows them."""
    for name in names:
        folder = root / "sys" / "class" / "net" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "flags").write_text("0x1003\n")
        (folder / "operstate").write_text("up\n" if name != "lo" else "unknown\n")


def write_slingshot(root: Path, nics: int = 4) -> None:
    """HPE Slingshot: Cassini NICs under /sys/class/cxi (cxi0 ...) and their Ethernet interfaces hsn0 ..."""
    for index in range(nics):
        (root / "sys" / "class" / "cxi" / f"cxi{index}").mkdir(parents=True, exist_ok=True)
    write_interfaces(root, ("lo", *(f"hsn{i}" for i in range(nics)), "nmn0"))
