"""Each GPU's memory from the KFD topology, and the APUs whose VRAM carve-out starves jax.

Format: `/sys/class/kfd/kfd/topology/nodes/<N>/mem_banks/<M>/properties`, `key value` lines like the
node's own; `heap_type` 0 is system memory (a CPU node's), 1 and 2 are the GPU's frame buffer (public,
private), `size_in_bytes` its size. An APU is told by its processor (gfx1151, gfx1103 ... are made only as
APUs), by its PCI device id where the processor is also a discrete GPU (MI300A), or, on older APUs, by CPU
cores on the GPU's node (_policy/gfx_targets.apu_kind); a consumer APU's frame buffer is the VRAM carve-out
the firmware sets aside from system memory (MI300A has none: its HBM is the system memory).

The rule behind the warning (doctor only; the loader never reads this): XLA's GPU allocator takes
device memory with hipMalloc and sizes its pool from what the runtime reports, which on an APU is
the carve-out (ROCm/jax#547: gfx1151 with 120 GB of GTT configured, JAX used VRAM only and ran out),
and jax preallocates 75% of it at the first operation (docs.jax.dev, "GPU memory allocation").
A carve-out under a quarter of system memory leaves jax less than 3/16 of the machine: warned.
"""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.topology import TOPOLOGY_DIR, KfdNode, Topology, read_properties
from jax_rocm7_plugin._policy.gfx_targets import apu_kind
from jax_rocm7_plugin._record import NamedTuple

HEAP_SYSTEM = 0
FRAME_BUFFER_HEAPS = (1, 2)  # HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC, _PRIVATE
SMALL_CARVE_OUT_SHARE = 0.25  # of system memory
PREALLOCATED_SHARE = 0.75  # jax's XLA_PYTHON_CLIENT_MEM_FRACTION default
MAX_BANKS = 64


class GpuMemory(NamedTuple):
    node_index: int
    vram_bytes: int | None  # its frame buffer banks; None when KFD lists none
    apu: bool  # the GPU shares the CPU's memory
    system_bytes: int | None  # the machine's system memory (CPU nodes' banks, else /proc/meminfo)
    carve_out: bool = False  # an APU whose vram_bytes is the firmware's carve-out


def _banks(root: Path, node: KfdNode) -> list[dict[str, int]]:
    directory = host_path(root, TOPOLOGY_DIR) / str(node.index) / "mem_banks"
    banks = []
    for index in range(min(node.properties.get("mem_banks_count", MAX_BANKS), MAX_BANKS)):
        properties, _ = read_properties(directory / str(index) / "properties")
        if properties is None:
            break
        banks.append(properties)
    return banks


def _meminfo_total(root: Path) -> int | None:
    from jax_rocm7_plugin._safe_io import read_text

    try:
        text = read_text(host_path(root, "/proc/meminfo"), 64 * 1024)
    except (OSError, ValueError):
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else None
    return None


def gpu_memory(root: Path, topology: Topology) -> list[GpuMemory]:
    """Every GPU node's frame buffer, whether it is an APU, and the system memory beside it."""
    cpu_banks = [
        b for n in topology.nodes if not n.is_gpu for b in _banks(root, n) if b.get("heap_type") == HEAP_SYSTEM
    ]
    system = sum(b.get("size_in_bytes", 0) for b in cpu_banks) or _meminfo_total(root)
    found = []
    for node in topology.gpus:
        frame_buffer = [b for b in _banks(root, node) if b.get("heap_type") in FRAME_BUFFER_HEAPS]
        vram = sum(b.get("size_in_bytes", 0) for b in frame_buffer) if frame_buffer else None
        apu, carve_out = apu_kind(
            node.gfx_target, node.properties.get("device_id"), node.properties.get("cpu_cores_count", 0)
        )
        found.append(GpuMemory(node.index, vram, apu, system, carve_out))
    return found


def memory_findings(memories: list[GpuMemory]) -> list[Finding]:
    """apu-vram-carveout-small for each APU whose carve-out is under SMALL_CARVE_OUT_SHARE of system memory."""
    small = [
        m
        for m in memories
        if m.carve_out and m.vram_bytes and m.system_bytes and m.vram_bytes < SMALL_CARVE_OUT_SHARE * m.system_bytes
    ]
    if not small:
        return []
    first = small[0]
    assert first.vram_bytes is not None and first.system_bytes is not None
    usable = PREALLOCATED_SHARE * first.vram_bytes
    return [
        catalog.apu_vram_carveout_small(
            f"this APU's GPU has a VRAM carve-out of {gib(first.vram_bytes)} of {gib(first.system_bytes)} system "
            f"memory, and jax preallocates {PREALLOCATED_SHARE:.0%} of the carve-out ({gib(usable)}): larger "
            "programs run out of memory",
            tuple(
                f"KFD node {m.node_index}: frame buffer {gib(m.vram_bytes or 0)}, system memory "
                f"{gib(m.system_bytes or 0)} (APU)"
                for m in small
            ),
        )
    ]


def gib(size: float) -> str:
    return f"{size / 1024**3:.1f} GiB" if size >= 1024**3 else f"{size / 1024**2:.0f} MiB"
