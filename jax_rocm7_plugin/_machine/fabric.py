"""The fabric between hosts as this machine's files show it: RDMA devices and their ports (InfiniBand, RoCE, EFA),
HPE Slingshot's Cassini NICs, and the verbs nodes a process opens to use them.

Read under a sysroot from the kernel's documented files (Documentation/ABI/stable/sysfs-class-infiniband):
`/sys/class/infiniband/<dev>/ports/<n>/state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `rate`
("400 Gb/sec (4X NDR)"), `link_layer` ("InfiniBand", "Ethernet": RoCE), `gid_attrs/types/<i>` ("RoCE v2"),
`gid_attrs/ndevs/<i>` (the Ethernet interface of a RoCE GID); the device's PCI function is where its `device` link
points, with `numa_node` beside it. Slingshot: `/sys/class/cxi/<dev>` and its `hsn*` interfaces. Verbs nodes:
`/dev/infiniband/uverbs*`. Pure functions; a file that is missing or malformed gives fewer facts, never an error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.network import INFINIBAND_CLASS, INFINIBAND_DEVICES
from jax_rocm7_plugin._record import NamedTuple

CXI_CLASS = "/sys/class/cxi"
MAX_DEVICES = 64
MAX_PORTS = 8
MAX_GIDS = 16
_RATE = re.compile(r"\s*([0-9.]+)\s*Gb/sec")
_PCI = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


class RdmaPort(NamedTuple):
    device: str  # mlx5_0, bnxt_re0, ionic_0, efa_0
    port: int
    state: str  # ACTIVE, DOWN, INIT, ARMED ("" unread)
    phys_state: str  # LinkUp, Disabled, Polling ...
    rate_gbps: float | None
    link_layer: str  # InfiniBand, Ethernet ("" unread; EFA reports Unspecified)
    roce_v2: bool  # a RoCE v2 GID is configured (what RCCL's default GID choice needs on Ethernet)
    netdev: str | None  # the Ethernet interface of a RoCE port
    pci: str | None  # the device's PCI function, "0000:c1:00.0"
    numa: int | None

    @property
    def kind(self) -> str:
        """InfiniBand, RoCE (an Ethernet link layer), or the link layer as written (EFA: Unspecified)."""
        if self.link_layer == "Ethernet":
            return "RoCE"
        return self.link_layer or "unknown"

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"


class Fabric(NamedTuple):
    ports: tuple[RdmaPort, ...]
    verbs_nodes: tuple[str, ...]  # /dev/infiniband entries (uverbs0, rdma_cm, ...)
    cxi_devices: tuple[str, ...]  # HPE Slingshot Cassini NICs (/sys/class/cxi)


def _read(path: Path) -> str:
    from jax_rocm7_plugin._safe_io import read_attribute

    try:
        return read_attribute(str(path)) or ""
    except (OSError, ValueError):
        return ""


def _listing(path: Path, limit: int = MAX_DEVICES) -> list[str]:
    try:
        return sorted(os.listdir(path))[:limit]
    except OSError:
        return []


def _enumerated(text: str) -> str:
    """ "4: ACTIVE" -> "ACTIVE" (the kernel writes the number, a colon, then the name)."""
    return text.partition(":")[2].strip() if ":" in text else text.strip()


def _port(device_dir: Path, device: str, number: int, pci: str | None, numa: int | None) -> RdmaPort:
    folder = device_dir / "ports" / str(number)
    rate = _RATE.match(_read(folder / "rate"))
    types = [_read(folder / "gid_attrs" / "types" / str(i)).strip() for i in range(MAX_GIDS)]
    roce_v2 = [i for i, t in enumerate(types) if t == "RoCE v2"]
    ndev = next((n for i in roce_v2 if (n := _read(folder / "gid_attrs" / "ndevs" / str(i)).strip())), None)
    return RdmaPort(
        device=device,
        port=number,
        state=_enumerated(_read(folder / "state")),
        phys_state=_enumerated(_read(folder / "phys_state")),
        rate_gbps=float(rate.group(1)) if rate else None,
        link_layer=_read(folder / "link_layer").strip(),
        roce_v2=bool(roce_v2),
        netdev=ndev,
        pci=pci,
        numa=numa,
    )


def read_fabric(root: Path) -> Fabric:
    """Every RDMA device's ports, the Slingshot NICs and the verbs nodes under the sysroot `root`."""
    ports = []
    base = host_path(root, INFINIBAND_CLASS)
    for device in _listing(base):
        device_dir = base / device
        try:
            target = os.readlink(device_dir / "device")
        except OSError:
            target = ""
        pci = next(iter(_PCI.findall(target)[-1:]), None)
        numa_text = _read(device_dir / "device" / "numa_node").strip()
        numa = int(numa_text) if numa_text.lstrip("-").isdigit() and int(numa_text) >= 0 else None
        numbers = sorted(int(n) for n in _listing(device_dir / "ports", MAX_PORTS) if n.isdigit())
        ports.extend(_port(device_dir, device, n, pci, numa) for n in numbers)
    return Fabric(
        ports=tuple(ports),
        verbs_nodes=tuple(_listing(host_path(root, INFINIBAND_DEVICES))),
        cxi_devices=tuple(_listing(host_path(root, CXI_CLASS))),
    )
