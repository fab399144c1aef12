"""The health of this node's GPUs, and the host settings AMD documents for them, read under a sysroot.

Everything here is world-readable sysfs and procfs (no root), in the formats the amdgpu driver, KFD and the PCI
core document (sources in _policy/node_health.json). Per physical GPU, i.e. per PCI function: a partitioned GPU's
KFD nodes share one function and are read once.

The files, under /sys/bus/pci/devices/<function>/ unless said (the README's table says the same for users):
- RAS counters: `ras/<block>_err_count`, or `ras/aca_<block>` on MI300-class GPUs (`ue:`, `ce:`, `de:` lines);
  retired VRAM pages: `ras/gpu_vram_bad_pages`, against amdgpu's `bad_page_threshold`;
- PCIe: `current_link_speed/width` and `max_link_speed/width` (of the card's upstream port where the card carries
  a switch of its own; the port above bounds what the link can train to), `pcie_replay_count`;
- XGMI: the KFD node's `hive_id` (or `xgmi_hive_info/xgmi_hive_id`), KFD `io_links`/`p2p_links` of type 11;
- partitions: `current_compute_partition`, `current_memory_partition`;
- power: `hwmon/hwmon*/power1_cap(_default)`, `temp*_input` and `temp*_label`,
  `power_dpm_force_performance_level`, `gpu_busy_percent`;
- host: `/proc/cmdline`, `/sys/devices/system/cpu/online`, `/proc/sys/kernel/numa_balancing`,
  `/proc/self/limits`, the RDMA devices.

Pure functions over a sysroot: a missing or malformed file is a fact not known (None), never an error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jax_rocm7_plugin._machine import host_path, machine_path
from jax_rocm7_plugin._machine.topology import (
    TOPOLOGY_DIR,
    KfdNode,
    Topology,
    pci_functions,
    read_properties,
    read_topology,
)
from jax_rocm7_plugin._record import NamedTuple

PCI_DEVICES = "/sys/bus/pci/devices"
BAD_PAGE_PARAMETER = "/sys/module/amdgpu/parameters/bad_page_threshold"
CMDLINE = "/proc/cmdline"
CPUS_ONLINE = "/sys/devices/system/cpu/online"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
LIMITS = "/proc/self/limits"
# The kernel command line can carry credentials (iSCSI, NFS root, disk keys): only the words the rules read are
# kept, so no finding, record or report carries the rest.
CMDLINE_WORDS = frozenset({"iommu", "amd_iommu", "intel_iommu", "numa_balancing", "pci"})
XGMI_LINK_TYPE = 11  # CRAT_IOLINK_TYPE_XGMI (kfd_crat.h); PCIe is 2
AMD_VENDOR = 0x1002
PCI_BRIDGE_CLASS = 0x0604
MAX_ATTRIBUTE_BYTES = 64 * 1024  # sysfs attributes are at most a page; the bad-page list can be longer
MAX_BAD_PAGES_BYTES = 4 * 1024 * 1024
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*GT/s")
_COUNTERS = ("ue", "ce", "de")
_INACCESSIBLE = "Query currently inaccessible"


class RasBlock(NamedTuple):
    """One block's error counters: uncorrectable, correctable, deferred (None: the block does not count it)."""

    name: str
    ue: int
    ce: int
    de: int | None
    path: str  # as the machine names it


class BadPages(NamedTuple):
    retired: int  # R: reserved, no longer used
    pending: int  # P: to be reserved at the next reset
    failed: int  # F: could not be reserved
    path: str


class Link(NamedTuple):
    """A PCIe link as the port at the GPU's end reads it (speed in GT/s, width in lanes)."""

    port: str  # machine path of the port read: the GPU function, or the card switch's upstream port
    speed: float | None
    width: int | None
    max_speed: float | None
    max_width: int | None
    above_max_speed: float | None  # the port above (root port or a platform switch): what the link can train to
    above_max_width: int | None
    through_card_switch: bool

    @property
    def best_speed(self) -> float | None:
        known = [s for s in (self.max_speed, self.above_max_speed) if s is not None]
        return min(known) if known else None

    @property
    def best_width(self) -> int | None:
        known = [w for w in (self.max_width, self.above_max_width) if w is not None]
        return min(known) if known else None


class GpuHealth(NamedTuple):
    """What one physical GPU's files said."""

    ordinal: int  # its place among the physical GPUs, in KFD order (HIP's device index when nothing is hidden)
    pci: str | None  # its PCI function (None: KFD gives no location)
    nodes: tuple[int, ...]  # its KFD nodes: one, or one per partition
    target: str | None
    device_id: int | None
    vram_bytes: int | None
    ras: tuple[RasBlock, ...] = ()
    ras_inaccessible: tuple[str, ...] = ()  # counter files that said the query is not possible now (a reset)
    bad_pages: BadPages | None = None
    link: Link | None = None
    replays: int | None = None
    hive: int | None = None  # XGMI hive id (0: in no hive; None: not known)
    xgmi_peers: tuple[int, ...] = ()  # ordinals of the GPUs KFD gives it XGMI links to
    compute_partition: str | None = None
    memory_partition: str | None = None
    power_cap_watts: float | None = None
    power_cap_default_watts: float | None = None
    performance_level: str | None = None
    busy_percent: int | None = None
    temperatures: tuple[tuple[str, float], ...] = ()  # (label, degrees C)
    numa_node: int | None = None  # the NUMA node its PCI function is attached to (None: not said, or -1)

    @property
    def uncorrectable(self) -> int:
        return sum(block.ue for block in self.ras)

    @property
    def correctable(self) -> int:
        return sum(block.ce for block in self.ras)

    def where(self) -> str:
        """`GPU 3 (gfx942 at 0000:5c:00.0)`: what the doctor and cluster name it by."""
        at = f" at {self.pci}" if self.pci else ""
        return f"GPU {self.ordinal} ({self.target or 'unknown target'}{at})"

    def device_path(self, name: str = "") -> str:
        """A file of this GPU's PCI function, as the machine names it (whatever root it was read under)."""
        return f"{PCI_DEVICES}/{self.pci}/{name}".rstrip("/")


class HostSettings(NamedTuple):
    cmdline: str | None  # of /proc/cmdline, only the words named in CMDLINE_WORDS
    logical_cpus: int | None
    numa_balancing: int | None
    memlock_bytes: int | None  # the soft locked-memory limit; -1: unlimited; None: not read
    rdma_devices: tuple[str, ...]


class NodeHealth(NamedTuple):
    gpus: tuple[GpuHealth, ...]
    host: HostSettings
    bad_page_parameter: int | None


def _text(path: str | Path, limit: int = MAX_ATTRIBUTE_BYTES) -> str | None:
    from jax_rocm7_plugin._safe_io import read_text

    try:
        return read_text(path, limit).strip()
    except (OSError, ValueError):
        return None


def _attribute(path: str) -> str | None:
    """A small sysfs attribute, read cheaply (_safe_io.read_attribute): the counters of the cheap read."""
    from jax_rocm7_plugin._safe_io import read_attribute

    try:
        return read_attribute(path).strip()
    except OSError:
        return None


def _integer(path: str | Path, base: int = 10) -> int | None:
    text = _text(path)
    try:
        return int(text, base) if text else None
    except ValueError:
        return None


def parse_speed(text: str | None) -> float | None:
    """GT/s of a PCI `*_link_speed`: "32.0 GT/s PCIe" (or "8 GT/s" before Linux 5.x); None for "Unknown"."""
    match = _SPEED.search(text or "")
    return float(match.group(1)) if match else None


def parse_counts(text: str) -> dict[str, int] | None:
    """{'ue': N, 'ce': M(, 'de': K)} of a RAS counter file; None when it holds no count (inaccessible, garbage)."""
    counts = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if colon and key in _COUNTERS and value.isdigit():
            counts[key] = int(value)
    return counts if "ue" in counts and "ce" in counts else None


def parse_bad_pages(text: str) -> tuple[int, int, int]:
    """(retired, pending, failed) pages of `gpu_vram_bad_pages`: lines `0x%08x : 0x%08x : R|P|F`."""
    flags = [line.split(":")[2].strip() for line in text.splitlines() if line.count(":") == 2]
    return flags.count("R"), flags.count("P"), flags.count("F")


def parse_cpu_list(text: str | None) -> int | None:
    """How many CPUs a kernel CPU list names ("0-127,256-383")."""
    if not text:
        return None
    count = 0
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            count += (int(high) if high else int(low)) - int(low) + 1
    except ValueError:
        return None
    return count


def parse_memlock(text: str | None) -> int | None:
    """The soft "Max locked memory" of /proc/<pid>/limits in bytes; -1 for unlimited (the one reading of that file:
    _machine/process_limits.parse_limits)."""
    from jax_rocm7_plugin._machine.process_limits import parse_limits

    limit = (parse_limits(text) or {}).get("Max locked memory")
    if limit is None:
        return None
    return -1 if limit.soft is None else limit.soft


def _ras(device: str, shown: str) -> tuple[tuple[RasBlock, ...], tuple[str, ...]]:
    """The counters under `device`/ras (`shown`: the device folder as the machine names it). Plain strings: this
    is the job check's read at backend start, where pathlib's cost would be most of it."""
    folder = f"{device}/ras"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return (), ()
    blocks: list[RasBlock] = []
    inaccessible: list[str] = []
    for name in names:
        if name.endswith("_err_count"):
            block = name[: -len("_err_count")]
        elif name.startswith("aca_"):
            block = name[len("aca_") :]
        else:
            continue
        text = _attribute(f"{folder}/{name}")
        if text is None:
            continue
        counts = parse_counts(text)
        where = f"{shown}/ras/{name}"
        if counts is None:
            if _INACCESSIBLE in text:
                inaccessible.append(where)
            continue
        blocks.append(RasBlock(block, counts["ue"], counts["ce"], counts.get("de"), where))
    return tuple(blocks), tuple(inaccessible)


def _bad_pages(device: str, shown: str) -> BadPages | None:
    text = _text(f"{device}/ras/gpu_vram_bad_pages", MAX_BAD_PAGES_BYTES)
    if text is None:
        return None
    return BadPages(*parse_bad_pages(text), f"{shown}/ras/gpu_vram_bad_pages")


def _pci_id(folder: Path, name: str) -> int | None:
    return _integer(folder / name, 16)


def _is_amd_bridge(folder: Path) -> bool:
    klass = _pci_id(folder, "class")
    return _pci_id(folder, "vendor") == AMD_VENDOR and klass is not None and klass >> 8 == PCI_BRIDGE_CLASS


def _link(device: Path, root: Path) -> Link | None:
    """The GPU's link to its host. A Radeon card is a PCIe switch of its own (an AMD upstream and downstream port
    above the GPU function): the function's link ends on the card, the link to the host is the upstream port's."""
    real = Path(os.path.realpath(device))
    parent, grandparent = real.parent, real.parent.parent
    card_switch = (
        _BDF.fullmatch(parent.name) is not None
        and _BDF.fullmatch(grandparent.name) is not None
        and _is_amd_bridge(parent)
        and _is_amd_bridge(grandparent)
    )
    port = grandparent if card_switch else real
    speed = parse_speed(_text(port / "current_link_speed"))
    width = _integer(port / "current_link_width")
    if speed is None and width is None:
        return None
    above = port.parent if _BDF.fullmatch(port.parent.name) else None
    return Link(
        machine_path(port, root),
        speed,
        width,
        parse_speed(_text(port / "max_link_speed")),
        _integer(port / "max_link_width"),
        parse_speed(_text(above / "max_link_speed")) if above is not None else None,
        _integer(above / "max_link_width") if above is not None else None,
        card_switch,
    )


def _hwmon(device: Path) -> tuple[float | None, float | None, tuple[tuple[str, float], ...]]:
    """(power cap W, default cap W, temperatures) of the GPU's hwmon folder."""
    try:
        folders = sorted(n for n in os.listdir(device / "hwmon") if n.startswith("hwmon"))
    except OSError:
        return None, None, ()
    if not folders:
        return None, None, ()
    hwmon = device / "hwmon" / folders[0]
    cap, default = _integer(hwmon / "power1_cap"), _integer(hwmon / "power1_cap_default")
    temperatures = []
    for index in range(1, 9):
        value = _integer(hwmon / f"temp{index}_input")
        if value is not None:
            label = _text(hwmon / f"temp{index}_label") or f"temp{index}"
            temperatures.append((label, value / 1000))
    return (
        cap / 1e6 if cap is not None else None,
        default / 1e6 if default is not None else None,
        tuple(temperatures),
    )


def _xgmi_links(node: KfdNode, root: Path) -> set[int]:
    """KFD node indices this node has XGMI links to (its io_links and p2p_links of type 11)."""
    peers: set[int] = set()
    for kind in ("io_links", "p2p_links"):
        folder = host_path(root, f"{TOPOLOGY_DIR}/{node.index}/{kind}")
        try:
            links = os.listdir(folder)
        except OSError:
            continue
        for link in links:
            properties, _ = read_properties(folder / link / "properties")
            if properties and properties.get("type") == XGMI_LINK_TYPE and "node_to" in properties:
                peers.add(properties["node_to"])
    return peers


def _vram_bytes(device: Path, root: Path, node: KfdNode) -> int | None:
    total = _integer(device / "mem_info_vram_total")
    if total is not None:
        return total
    bank, _ = read_properties(host_path(root, f"{TOPOLOGY_DIR}/{node.index}/mem_banks/0/properties"))
    return bank.get("size_in_bytes") if bank and bank.get("heap_type") == 1 else None


def read_gpus(root: Path, topology: Topology, *, full: bool = True) -> tuple[GpuHealth, ...]:
    """Every physical GPU of the topology, its files read once. Not `full` (a job's backend start, the hang
    watcher): only what is cheap and decisive, the error counters, PCIe replays and the partition modes."""
    nodes = topology.gpus
    functions = pci_functions(nodes)
    physical: dict[str, list[KfdNode]] = {}
    unlocated: list[KfdNode] = []
    for node in nodes:
        if node.index in functions:
            physical.setdefault(functions[node.index][0], []).append(node)
        else:
            unlocated.append(node)
    ordinal_of_node: dict[int, int] = {}
    groups: list[tuple[str | None, list[KfdNode]]] = [*physical.items(), *((None, [n]) for n in unlocated)]
    groups.sort(key=lambda group: group[1][0].index)
    for ordinal, (_, members) in enumerate(groups):
        for node in members:
            ordinal_of_node[node.index] = ordinal
    found = []
    for ordinal, (pci, members) in enumerate(groups):
        first = members[0]
        base = GpuHealth(
            ordinal, pci, tuple(n.index for n in members), first.gfx_target, first.properties.get("device_id"), None
        )
        hive = first.properties.get("hive_id")
        if pci is None:
            found.append(base._replace(hive=hive))
            continue
        shown = f"{PCI_DEVICES}/{pci}"
        folder = str(host_path(root, shown))
        ras, inaccessible = _ras(folder, shown)
        modes = _attribute(f"{folder}/current_compute_partition"), _attribute(f"{folder}/current_memory_partition")
        replays = _attribute(f"{folder}/pcie_replay_count")
        base = base._replace(
            ras=ras,
            ras_inaccessible=inaccessible,
            replays=int(replays) if replays and replays.isdigit() else None,
            compute_partition=modes[0],
            memory_partition=modes[1],
        )
        if not full:
            found.append(base._replace(hive=hive))
            continue
        device = Path(folder)
        # Partitions of one GPU share its links: the first node's say where the GPU reaches.
        linked = {ordinal_of_node[p] for p in _xgmi_links(first, root) if p in ordinal_of_node}
        peers = sorted(linked - {ordinal})
        cap, default, temperatures = _hwmon(device)
        if hive is None:
            hive = _integer(device / "xgmi_hive_info" / "xgmi_hive_id")
        found.append(
            base._replace(
                vram_bytes=_vram_bytes(device, root, first),
                bad_pages=_bad_pages(folder, shown),
                link=_link(device, root),
                hive=hive,
                xgmi_peers=tuple(peers),
                power_cap_watts=cap,
                power_cap_default_watts=default,
                performance_level=_text(device / "power_dpm_force_performance_level"),
                busy_percent=_integer(device / "gpu_busy_percent"),
                temperatures=temperatures,
                numa_node=numa if (numa := _integer(device / "numa_node")) is not None and numa >= 0 else None,
            )
        )
    return tuple(found)


def decisive_files(node: NodeHealth) -> list[str]:
    """The files (as the machine names them) whose contents decide what a cheap read (`full=False`) states of the
    node: each GPU's error counters, partition modes and PCIe replays. A warm start in a job watches them."""
    paths: list[str] = []
    for gpu in node.gpus:
        if gpu.pci is None:
            continue
        shown = f"{PCI_DEVICES}/{gpu.pci}"
        paths += [block.path for block in gpu.ras] + list(gpu.ras_inaccessible)
        paths += [f"{shown}/{name}" for name in ("current_compute_partition", "current_memory_partition",
                                                 "pcie_replay_count")]  # fmt: skip
    return paths


def read_host(root: Path) -> HostSettings:
    from jax_rocm7_plugin._machine.network import rdma_devices

    numa = _integer(host_path(root, NUMA_BALANCING))
    cmdline = _text(host_path(root, CMDLINE))
    return HostSettings(
        None if cmdline is None else " ".join(w for w in cmdline.split() if w.partition("=")[0] in CMDLINE_WORDS),
        parse_cpu_list(_text(host_path(root, CPUS_ONLINE))),
        numa,
        parse_memlock(_text(host_path(root, LIMITS))),
        rdma_devices(root).devices,
    )


def read_node(root: Path, topology: Topology, *, full: bool = True) -> NodeHealth:
    """The node's GPUs and host settings (not `full`: see read_gpus; no host settings)."""
    if not full:
        return NodeHealth(read_gpus(root, topology, full=False), HostSettings(None, None, None, None, ()), None)
    return NodeHealth(read_gpus(root, topology), read_host(root), _integer(host_path(root, BAD_PAGE_PARAMETER)))


def read_in_time(root: Path, topology: Topology | None = None, *, full: bool = True) -> NodeHealth:
    """read_node (and the topology's read where none is given) under _safe_io's deadline: a hung driver raises
    Deadline naming the file it was reading. Every reader of the node's health goes through it."""
    from jax_rocm7_plugin._safe_io import with_deadline

    return with_deadline(lambda: read_node(root, topology if topology is not None else read_topology(root), full=full))


def as_json(value: object) -> object:
    """A health record (NamedTuples, tuples, scalars) as JSON values, fields by name: the report bundle's."""
    if hasattr(value, "_asdict"):
        return {key: as_json(item) for key, item in value._asdict().items()}
    if isinstance(value, tuple | list):
        return [as_json(item) for item in value]
    return value
