"""Test fixture, never shipped: a node's GPU health files, written in the formats the amdgpu driver, KFD and the PCI
core document (sources in jax_rocm7_plugin/_policy/node_health.json), under a sysroot made by `make_sysroot`.

A `Board` is one physical GPU (a PCI function): its KFD node(s) (one per compute partition, the partition index
OR-ed into `location_id` as KFD does), its PCI device folder under /sys/devices/pci<domain>:00/ reached through
/sys/bus/pci/devices/<function> (with a Radeon card's own upstream and downstream switch ports, or a platform
switch, above it), RAS counters, retired pages, partition modes, hwmon, and KFD io_links/p2p_links (type 11 XGMI
within a hive, type 2 PCIe otherwise). A `Node` adds the host's files: /proc/cmdline, the CPUs online,
numa_balancing, /proc/self/limits, RDMA devices and amdgpu's bad_page_threshold.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tests.support.sysroots import TOPOLOGY, Gpu, make_sysroot

GIB = 1024**3
GEN5, GEN4, GEN3, GEN1 = "32.0 GT/s PCIe", "16.0 GT/s PCIe", "8.0 GT/s PCIe", "2.5 GT/s PCIe"
HEALTHY_TEMPERATURES = (("edge", 38.0), ("junction", 45.0), ("mem", 41.0))
INSTINCT_BLOCKS = ("umc", "sdma", "gfx", "mmhub", "pcie_bif", "hdp", "xgmi_wafl")
RADEON_BLOCKS = ("umc", "sdma", "gfx", "mmhub")


@dataclass(frozen=True)
class Board:
    gpu: Gpu
    pci: str  # "0000:05:00.0"
    partitions: int = 1
    compute: str | None = "SPX"  # None: the GPU has no partition files
    memory: str | None = "NPS1"
    link: tuple[str, int] = (GEN5, 16)  # (current speed, width) at the port that reaches the host
    max_link: tuple[str, int] = (GEN5, 16)
    above_max: tuple[str, int] = (GEN5, 16)  # the port above (root port or platform switch)
    card_switch: bool = False  # a Radeon card: AMD upstream and downstream ports between the slot and the GPU
    function_link: tuple[str, int] = (GEN4, 16)  # with card_switch: the link the GPU function reports (on the card)
    platform_switch: bool = False  # a non-AMD PCIe switch (Broadcom) above the GPU, as on PCIe-bridged servers
    blocks: tuple[str, ...] = INSTINCT_BLOCKS
    ras: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # block -> (ue, ce); the rest 0
    aca: bool = False  # MI300-class files: ras/aca_<block> with ue, ce and de lines
    inaccessible: bool = False
    bad_pages: str = ""  # one flag letter per page: R, P, F (None of the file: ras_bad_pages=False)
    replays: int = 0
    hive: int = 0
    xgmi: bool = True  # KFD gives it XGMI links to the other members of its hive
    cap_watts: float | None = 750
    default_watts: float | None = 750
    level: str | None = "auto"
    busy: int | None = 0
    temperatures: tuple[tuple[str, float], ...] = HEALTHY_TEMPERATURES
    numa_node: int = 0  # the PCI core's numa_node (-1: the platform does not say)

    def but(self, **changes: object) -> Board:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Node:
    boards: tuple[Board, ...]
    cmdline: str = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=UUID=0a1b ro iommu=pt"
    cpus: int = 192
    numa_balancing: int = 0
    memlock: str = "unlimited"
    rdma: tuple[str, ...] = ()
    bad_page_threshold: int = -1

    def but(self, **changes: object) -> Node:
        return replace(self, **changes)  # type: ignore[arg-type]

    def with_board(self, index: int, **changes: object) -> Node:
        boards = list(self.boards)
        boards[index] = boards[index].but(**changes)
        return self.but(boards=tuple(boards))


def _split(pci: str) -> tuple[int, int, int, int]:
    domain, bus, rest = pci.split(":")
    device, function = rest.split(".")
    return int(domain, 16), int(bus, 16), int(device, 16), int(function)


def _location(pci: str) -> tuple[int, int]:
    domain, bus, device, function = _split(pci)
    return domain, bus << 8 | device << 3 | function


def kfd_gpus(node: Node) -> list[Gpu]:
    """The node's KFD GPU nodes: one per partition of each board, located (domain, location_id) and in its hive."""
    gpus = []
    minor = 128
    for board in node.boards:
        domain, location = _location(board.pci)
        for partition in range(board.partitions):
            extra = [("domain", domain), ("location_id", location | partition if board.partitions > 1 else location)]
            extra.append(("hive_id", board.hive))
            gpus.append(replace(board.gpu, drm_render_minor=minor, extra=tuple(extra)))
            minor += 1
    return gpus


def _write(folder: Path, files: Mapping[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def _port(folder: Path, vendor: int, link: tuple[str, int], max_link: tuple[str, int]) -> None:
    """A PCI bridge port (class 0x060400) with its link files."""
    _write(
        folder,
        {
            "vendor": f"0x{vendor:04x}\n",
            "class": "0x060400\n",
            "current_link_speed": f"{link[0]}\n",
            "current_link_width": f"{link[1]}\n",
            "max_link_speed": f"{max_link[0]}\n",
            "max_link_width": f"{max_link[1]}\n",
        },
    )


def _ras_files(board: Board) -> dict[str, str]:
    files = {}
    for block in board.blocks:
        ue, ce = board.ras.get(block, (0, 0))
        if board.inaccessible:
            text = "Query currently inaccessible\n"
        elif board.aca or block == "umc":
            text = f"ue: {ue}\nce: {ce}\nde: 0\n"
        else:
            text = f"ue: {ue}\nce: {ce}\n"
        files[f"ras/aca_{block}" if board.aca else f"ras/{block}_err_count"] = text
    files["ras/features"] = "feature mask: 0x3fff\n"
    files["ras/gpu_vram_bad_pages"] = "".join(
        f"0x{0x1000 + i:08x} : 0x00001000 : {flag}\n" for i, flag in enumerate(board.bad_pages)
    )
    return files


def _device_files(board: Board, index: int) -> dict[str, str]:
    files = {
        "vendor": "0x1002\n",
        "device": f"0x{board.gpu.device_id:04x}\n",
        "class": "0x030000\n" if board.card_switch else "0x038000\n",
        "pcie_replay_count": f"{board.replays}\n",
        "mem_info_vram_total": f"{board.gpu.vram_bytes}\n",
        "numa_node": f"{board.numa_node}\n",
        **_ras_files(board),
    }
    link, top = (board.function_link, board.function_link) if board.card_switch else (board.link, board.max_link)
    files |= {
        "current_link_speed": f"{link[0]}\n",
        "current_link_width": f"{link[1]}\n",
        "max_link_speed": f"{top[0]}\n",
        "max_link_width": f"{top[1]}\n",
    }
    if board.compute is not None:
        files["current_compute_partition"] = f"{board.compute}\n"
        files["available_compute_partition"] = "SPX, DPX, QPX, CPX\n"
    if board.memory is not None:
        files["current_memory_partition"] = f"{board.memory}\n"
        files["available_memory_partition"] = "NPS1, NPS4\n"
    if board.hive:
        files["xgmi_hive_info/xgmi_hive_id"] = f"{board.hive}\n"
        files["xgmi_device_id"] = f"{1000 + index}\n"
    hwmon = f"hwmon/hwmon{3 + index}"
    if board.cap_watts is not None:
        files[f"{hwmon}/power1_cap"] = f"{int(board.cap_watts * 1e6)}\n"
    if board.default_watts is not None:
        files[f"{hwmon}/power1_cap_default"] = f"{int(board.default_watts * 1e6)}\n"
    for number, (label, celsius) in enumerate(board.temperatures, start=1):
        files[f"{hwmon}/temp{number}_input"] = f"{int(celsius * 1000)}\n"
        files[f"{hwmon}/temp{number}_label"] = f"{label}\n"
    if board.level is not None:
        files["power_dpm_force_performance_level"] = f"{board.level}\n"
    if board.busy is not None:
        files["gpu_busy_percent"] = f"{board.busy}\n"
    return files


def _pci_tree(root: Path, board: Board, index: int) -> None:
    """/sys/devices/pci<domain>:00/<root port>/[switch ports/]<function>, and its /sys/bus/pci/devices link."""
    domain, bus, _, _ = _split(board.pci)
    top = root / "sys" / "devices" / f"pci{domain:04x}:00"
    root_port = top / f"{domain:04x}:00:{1 + index % 0x1F:02x}.1"
    _port(root_port, 0x1022, board.above_max, board.above_max)  # the CPU's root port (AMD's host bridge vendor)
    parent = root_port
    if board.platform_switch:  # a Broadcom PEX switch: its upstream port, then a downstream port per GPU
        upstream = parent / f"{domain:04x}:{bus - 2:02x}:00.0"
        _port(upstream, 0x1000, board.above_max, board.above_max)
        downstream = upstream / f"{domain:04x}:{bus - 1:02x}:00.0"
        _port(downstream, 0x1000, board.above_max, board.above_max)
        parent = downstream
    if board.card_switch:  # the card's own switch: the upstream port carries the link to the host
        upstream = parent / f"{domain:04x}:{bus - 2:02x}:00.0"
        _port(upstream, 0x1002, board.link, board.max_link)
        downstream = upstream / f"{domain:04x}:{bus - 1:02x}:00.0"
        _port(downstream, 0x1002, board.function_link, board.function_link)
        parent = downstream
    function = parent / board.pci
    _write(function, _device_files(board, index))
    link = root / "sys" / "bus" / "pci" / "devices" / board.pci
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(function, link.parent))


def _links(root: Path, node: Node) -> None:
    """Each GPU node's KFD links: a PCIe io_link to its CPU node, XGMI io_links to the nodes of its hive's other
    boards, and PCIe p2p_links to the GPUs outside its hive ."""
    nodes: list[tuple[int, Board]] = []
    index = 1
    for board in node.boards:
        for _ in range(board.partitions):
            nodes.append((index, board))
            index += 1
    for number, board in nodes:
        base = root / TOPOLOGY / str(number)
        io = [(2, 0, 20)]
        p2p = []
        for other, peer in nodes:
            if peer is board:
                continue
            if board.hive and peer.hive == board.hive and board.xgmi and peer.xgmi:
                io.append((11, other, 15))
            else:
                p2p.append((2, other, 40))
        for kind, links in (("io_links", io), ("p2p_links", p2p)):
            for position, (link_type, to, weight) in enumerate(links):
                _write(
                    base / kind / str(position),
                    {
                        "properties": f"type {link_type}\nversion_major 0\nversion_minor 0\nnode_from {number}\n"
                        f"node_to {to}\nweight {weight}\nmin_latency 0\nmax_latency 0\nmin_bandwidth 0\n"
                        "max_bandwidth 0\nrecommended_transfer_size 0\nflags 1\n"
                    },
                )


def make_node(root: Path, node: Node, **sysroot: object) -> Path:
    """The sysroot of `node`: KFD topology and /dev nodes (make_sysroot), then every health file."""
    make_sysroot(root, kfd_gpus(node), **sysroot)  # type: ignore[arg-type]
    write_health(root, node)
    return root


def write_health(root: Path, node: Node) -> None:
    """The health files of `node` under a sysroot whose KFD GPU nodes are `kfd_gpus(node)`."""
    for index, board in enumerate(node.boards):
        _pci_tree(root, board, index)
    _links(root, node)
    host = {
        "proc/cmdline": node.cmdline + "\n",
        "sys/devices/system/cpu/online": f"0-{node.cpus - 1}\n",
        "proc/sys/kernel/numa_balancing": f"{node.numa_balancing}\n",
        "proc/self/limits": "Limit                     Soft Limit           Hard Limit           Units     \n"
        f"Max locked memory         {node.memlock:<20} {node.memlock:<20} bytes     \n",
        "sys/module/amdgpu/parameters/bad_page_threshold": f"{node.bad_page_threshold}\n",
    }
    for device in node.rdma:
        host[f"sys/class/infiniband/{device}/node_type"] = "1: CA\n"
    _write(root, host)


# Healthy nodes, as their vendors ship them (fixture data: PCI addresses in the shapes those platforms use).
def _boards(gpu: Gpu, count: int, buses: tuple[int, ...], **options: object) -> tuple[Board, ...]:
    return tuple(Board(gpu, f"0000:{bus:02x}:00.0", **options) for bus in buses[:count])  # type: ignore[arg-type]


_OAM_BUSES = (0x05, 0x25, 0x45, 0x65, 0x85, 0xA5, 0xC5, 0xE5)
MI300X = Gpu(90402, device_id=0x74A1, vram_bytes=192 * GIB)
MI325X = Gpu(90402, device_id=0x74A5, vram_bytes=256 * GIB)
MI355X = Gpu(90500, device_id=0x75A3, vram_bytes=288 * GIB)
MI250X = Gpu(90010, device_id=0x740C, vram_bytes=64 * GIB)
MI210 = Gpu(90010, device_id=0x740F, vram_bytes=64 * GIB)
RX7900XTX = Gpu(110000, device_id=0x744C, vram_bytes=24 * GIB, simd_count=192)
STRIX_HALO = Gpu(110501, device_id=0x1586, vram_bytes=96 * GIB, simd_count=80)


def _gen4_cards(gpu: Gpu, buses: tuple[int, ...], watts: float, **options: object) -> tuple[Board, ...]:
    """MI200-generation GPUs: PCIe 4.0 x16 links, no partition modes, their default power cap."""
    gen4 = {"link": (GEN4, 16), "max_link": (GEN4, 16), "above_max": (GEN4, 16)}
    return _boards(
        gpu, len(buses), buses, compute=None, memory=None, cap_watts=watts, default_watts=watts, **gen4, **options
    )


def _desktop(board: Board, *boot: str) -> Node:
    """A desktop or workstation: one GPU, 32 CPUs, NUMA balancing on and the locked-memory limit its distribution
    sets (8 MiB), none of which matters without Instinct GPUs and RDMA devices."""
    cmdline = " ".join(("BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro quiet splash", *boot))
    return Node((board,), cmdline=cmdline, cpus=32, numa_balancing=1, memlock="8388608")


_NO_MODES = {"compute": None, "memory": None}
HEALTHY_NODES: dict[str, Node] = {
    "8x MI300X (XGMI, SPX/NPS1)": Node(_boards(MI300X, 8, _OAM_BUSES, aca=True, hive=0x5A1E0001)),
    "8x MI325X (XGMI, SPX/NPS1)": Node(
        _boards(MI325X, 8, _OAM_BUSES, aca=True, hive=0x5A1E0002, cap_watts=1000, default_watts=1000)
    ),
    "8x MI355X (XGMI, SPX/NPS1)": Node(
        _boards(MI355X, 8, _OAM_BUSES, aca=True, hive=0x5A1E0003, cap_watts=1400, default_watts=1400)
    ),
    "MI250X: 8 GCDs on 4 OAM modules (XGMI)": Node(
        _gen4_cards(MI250X, (0xC1, 0xC6, 0xC9, 0xCE, 0xD1, 0xD6, 0xD9, 0xDE), 560, hive=0x5A1E0004), cpus=128
    ),
    "2x MI210 behind PCIe switches, no XGMI bridge": Node(
        _gen4_cards(MI210, (0x23, 0x43), 300, platform_switch=True),
        cmdline="BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro quiet",
        cpus=64,
        numa_balancing=1,
    ),
    "RX 7900 XTX: the card's own switch, link slowed at rest": _desktop(
        Board(
            RX7900XTX, "0000:03:00.0", card_switch=True, link=(GEN1, 16), max_link=(GEN4, 16), above_max=(GEN4, 16),
            function_link=(GEN4, 16), blocks=RADEON_BLOCKS, cap_watts=327, default_watts=327,
            temperatures=(("edge", 40.0), ("junction", 48.0), ("mem", 52.0)), **_NO_MODES,  # type: ignore[arg-type]
        )
    ),
    "Strix Halo APU": _desktop(
        Board(
            STRIX_HALO, "0000:c5:00.0", link=(GEN1, 1), max_link=(GEN4, 16), blocks=(), cap_watts=None,
            default_watts=None, **_NO_MODES,  # type: ignore[arg-type]
        ),
        "amd_iommu=off",
    ),
    "8x MI300X in CPX/NPS4 on purpose": Node(
        _boards(MI300X, 8, _OAM_BUSES, aca=True, hive=0x5A1E0005, partitions=8, compute="CPX", memory="NPS4")
    ),
}  # fmt: skip
