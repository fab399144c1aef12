"""Each GPU's memory from the KFD topology's memory banks, and the warning for an APU whose VRAM
carve-out is small against system memory (synthetic machines: sysroots)."""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin._machine.memory import gpu_memory
from jax_rocm7_plugin._machine.topology import read_topology
from tests.support.inprocess import doctor
from tests.support.sysroots import Gpu, make_sysroot

GIB = 1024**3
GFX1151 = 110501


def test_a_discrete_gpu_reports_its_vram_and_no_warning(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, [Gpu(vram_bytes=192 * GIB)])
    (memory,) = gpu_memory(root, read_topology(root))
    assert (memory.vram_bytes, memory.apu, memory.system_bytes) == (192 * GIB, False, 512 * GIB)
    report = doctor({}, root)
    assert report.gpus[0].memory_bytes == 192 * GIB and not report.gpus[0].apu
    assert "apu-vram-carveout-small" not in [f.id for f in report.findings]


def test_an_apu_with_a_small_carve_out_is_warned_with_the_numbers(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, [Gpu(GFX1151, apu=True, vram_bytes=512 * 1024**2)], system_bytes=64 * GIB)
    report = doctor({}, root)
    (finding,) = [f for f in report.findings if f.id == "apu-vram-carveout-small"]
    assert finding.severity == "warning"
    assert finding.summary.startswith("this APU's GPU has a VRAM carve-out of 512 MiB of 64.0 GiB system memory")
    assert "384 MiB" in finding.summary and "UMA frame buffer" in finding.fix
    assert finding.evidence == ("KFD node 1: frame buffer 512 MiB, system memory 64.0 GiB (APU)",)
    assert report.gpus[0].apu and report.gpus[0].memory_bytes == 512 * 1024**2
    from jax_rocm7_plugin._doctor.render import render_text

    assert "  gpu: KFD node 1 gfx1151" in render_text(report) and "APU, VRAM carve-out 512 MiB" in render_text(report)


def test_an_apu_with_a_large_carve_out_is_fine(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, [Gpu(GFX1151, apu=True, vram_bytes=96 * GIB)], system_bytes=128 * GIB)
    assert "apu-vram-carveout-small" not in [f.id for f in doctor({}, root).findings]


def test_without_cpu_memory_banks_system_memory_comes_from_meminfo(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, [Gpu(GFX1151, apu=True, vram_bytes=GIB)])
    for bank in (root / "sys/class/kfd/kfd/topology/nodes/0/mem_banks").rglob("properties"):
        bank.unlink()
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/meminfo").write_text("MemTotal:       32768000 kB\nMemFree:        1000 kB\n")
    (memory,) = gpu_memory(root, read_topology(root))
    assert memory.system_bytes == 32768000 * 1024 and memory.apu


def test_strix_halo_as_kfd_lists_it_is_an_apu(tmp_path: Path) -> None:
    """A Strix Halo's GPU is a KFD node of its own with no CPU cores (rocminfo in ROCm/TheRock#4578): it is an APU by
    its processor, and a 512 MiB carve-out of 64 GiB is warned."""
    root = make_sysroot(tmp_path, [Gpu(GFX1151, apu=False, vram_bytes=512 * 1024**2)], system_bytes=64 * GIB)
    report = doctor({}, root)
    assert report.gpus[0].apu and "apu-vram-carveout-small" in [f.id for f in report.findings]


def test_mi300a_is_an_apu_without_a_carve_out(tmp_path: Path) -> None:
    """MI300A (gfx942, PCI device 0x74a0) shares its HBM with the CPUs: an APU, but there is no carve-out to warn of."""
    mi300a = Gpu(apu=False, device_id=0x74A0, vram_bytes=512 * 1024**2)
    report = doctor({}, make_sysroot(tmp_path, [mi300a], system_bytes=128 * GIB))
    assert report.gpus[0].apu and "apu-vram-carveout-small" not in [f.id for f in report.findings]
    discrete = doctor({}, make_sysroot(tmp_path / "x", [Gpu(vram_bytes=192 * GIB)]))
    assert not discrete.gpus[0].apu
