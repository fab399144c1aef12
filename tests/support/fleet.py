"""Test fixture, never shipped: machines users run, rebuilt as sysroots, for the doctor's precision and recall.

`HEALTHY`: configurations that work (at least 12: MI300X/MI325X/MI355X/MI250X/MI210/MI100, RX 7900 XTX,
RX 9070 XT, Radeon PRO W7900, a Strix Halo APU, one in a container, one with TheRock's pip ROCm, one under
WSL), each on the ROCm a released pair serves, in AMD's and TheRock's layouts. The doctor may warn there only
of a known issue its sources confirm for that configuration.

`FAILURES`: public failure reports, each with its thread, rebuilt as the machine it describes, and the words
the doctor's summary or fix must contain to count as naming the cause (`benchmarks/diagnosis.py` reports
recall; tests/integration/test_diagnosis_corpus.py checks the cases marked `named`).

What a machine carries is what the documented formats say: KFD topology (sysroots.py), /opt/rocm-<version>
with .info/version, ld.so.conf.d, the math libraries' kernel files named as the libraries name them, /proc/mounts.
The libraries are link stubs or the fake HIP 7 build; the kernel files are empty stand-ins.
"""

from __future__ import annotations

import shutil
import sysconfig
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._policy import releases as release_table
from tests.support.inprocess import doctor
from tests.support.node_health import HEALTHY_NODES, Node, kfd_gpus, write_health
from tests.support.sysroots import (
    PUBLISHED_TARGETS,
    Gpu,
    add_math_libraries,
    add_rocm,
    bundle_for,
    make_sysroot,
)

GIB = 1024**3
# The processors whose rocBLAS/hipBLASLt/MIOpen kernel files each ROCm line ships (AMD's supported-GPU lists of
# the ROCm 7 system requirements, Instinct and Radeon/Ryzen; TheRock's families for 7.1x). Fixture data.
_ROCM_7_2_KERNELS = (
    "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
    "gfx1200", "gfx1201",
)  # fmt: skip
ROCM_KERNELS = {"7.2": _ROCM_7_2_KERNELS, "7.14": (*_ROCM_7_2_KERNELS, "gfx1152")}
# The ROCm each released pair serves (releases.json; 0.11.0 and 0.11.1 do not say: the 7.14 of 0.11.2).
DEFAULT_ROCM = "7.14.0"


def released_pairs() -> list[tuple[str, str]]:
    """(jax release, the ROCm it serves) for every row of the release table."""
    return [(row.release, row.rocm_version or DEFAULT_ROCM) for row in release_table.table()]


@dataclass(frozen=True)
class Host:
    """A machine as a report describes it."""

    name: str
    gpus: tuple[Gpu, ...]
    layout: str = "amd"  # "amd" (AMD's packages), "therock" (TheRock's tarball), "pip" (TheRock's wheels)
    wsl: bool = False
    container: bool = False
    system_bytes: int = 512 * GIB
    environ: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)  # machine path -> content
    kernels: tuple[str, ...] | None = None  # processors the math libraries carry (None: the ROCm line's)
    pip_family: str = "gfx94X_dcgpu"  # TheRock's pip libraries wheel
    rocdxg: str | None = "/opt/rocm/lib/librocdxg.so"  # under WSL: where librocdxg is (None: nowhere)
    ld_conf: bool = True  # /opt/rocm/lib in /etc/ld.so.conf.d, as AMD's packages and librocdxg register it
    hipblaslt_per_processor: bool = False  # hipBLASLt's files in library/<gfx>/ (TheRock#7976)
    without_files: tuple[str, ...] = ()  # globs under the sysroot removed after building (a library lacking a GPU)
    # Who runs the job, by number (None: this test process, root). Then /proc/self/status says so, /etc/group holds
    # `group_names`, and the device nodes are owned by `node_gid` with `node_mode` (0660: what AMD's udev rules give).
    uid: int | None = None
    groups: tuple[int, ...] = ()
    node_gid: int = 0
    node_mode: int = 0o660
    node_uid: int = 0
    group_names: Mapping[str, int] = field(default_factory=dict)
    proc_version: str | None = None  # the running kernel's /proc/version line (None: not written)
    node: Node | None = None  # its GPUs' health files (tests/support/node_health.py), which then give its GPUs
    rocm_at: str | None = None  # where its ROCm tree was moved (a tarball unpacked elsewhere): no /opt/rocm link then
    rocm_link: bool = True  # /opt/rocm -> /opt/rocm-<version>, as AMD's packages make it
    # Shared objects built at these machine paths (a stand-in's: an empty library), each NEEDing these sonames.
    binaries: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def but(self, **changes: object) -> Host:
        return replace(self, **changes)  # type: ignore[arg-type]


def _gpu(target: int, count: int, **options: object) -> tuple[Gpu, ...]:
    return tuple(Gpu(gfx_target_version=target, drm_render_minor=128 + i, **options) for i in range(count))  # type: ignore[arg-type]


# /proc/version of Ubuntu 24.04's OEM kernel with the fixes Strix Halo needs (the shape of a public uname -a).
_UBUNTU_OEM_KERNEL = (
    "Linux version 6.14.0-1018-oem (buildd@lcy02-amd64-080) (x86_64-linux-gnu-gcc-13 (Ubuntu 13.3.0-6ubuntu2~24.04) "
    "13.3.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #18-Ubuntu SMP PREEMPT_DYNAMIC Wed Dec 10 09:33:29 UTC 2025"
)
_UBUNTU_GA_KERNEL = (
    "Linux version 6.11.0-29-generic (buildd@lcy02-amd64-075) (x86_64-linux-gnu-gcc-13 (Ubuntu 13.3.0-6ubuntu2~24.04) "
    "13.3.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #29~24.04.1-Ubuntu SMP PREEMPT_DYNAMIC Thu Jun 26 14:16:59 UTC 2025"
)

HEALTHY: tuple[Host, ...] = (
    Host("MI300X x8", _gpu(90402, 8)),
    Host("MI325X x8", _gpu(90402, 8, device_id=0x74A5, vram_bytes=256 * GIB)),
    Host("MI355X x8", _gpu(90500, 8, device_id=0x75A3, vram_bytes=288 * GIB)),
    Host("MI250X x8 (4 cards)", _gpu(90010, 8, device_id=0x740C, vram_bytes=64 * GIB)),
    Host("MI210 x1", _gpu(90010, 1, device_id=0x740F, vram_bytes=64 * GIB)),
    Host("MI100 x4", _gpu(90008, 4, device_id=0x738C, vram_bytes=32 * GIB)),
    Host("RX 7900 XTX", _gpu(110000, 1, device_id=0x744C, vram_bytes=24 * GIB), system_bytes=64 * GIB),
    Host("RX 9070 XT", _gpu(120001, 1, device_id=0x7550, vram_bytes=16 * GIB), system_bytes=32 * GIB),
    Host("Radeon PRO W7900 x2", _gpu(110000, 2, device_id=0x7448, vram_bytes=48 * GIB), system_bytes=128 * GIB),
    Host(
        "Strix Halo APU (96 GiB carve-out)",
        _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
        system_bytes=128 * GIB,
        proc_version=_UBUNTU_OEM_KERNEL,
    ),
    Host("MI300X x8 in a container (--shm-size 16g)", _gpu(90402, 8), container=True),
    Host("MI300X x8, TheRock's tarball", _gpu(90402, 8), layout="therock"),
    Host("MI300X x1, TheRock's pip ROCm", _gpu(90402, 1), layout="pip"),
    Host("RX 7900 XTX under WSL", (), wsl=True, system_bytes=64 * GIB),
    Host(
        "MI300X x8 with its health files: XGMI hive, SPX/NPS1, RAS counters at zero, links at 32 GT/s x16",
        (),
        node=HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"],
    ),
    Host(
        "MI300X x8 in a container, user 1000 given the nodes' group by number (--group-add 110)",
        _gpu(90402, 8),
        container=True,
        uid=1000,
        groups=(1000, 44, 110),
        node_gid=110,
        group_names={"video": 44, "render": 109, "user": 1000},
    ),
)


@dataclass(frozen=True)
class Case:
    """A public failure: its thread, the machine it describes, and what naming its cause means."""

    thread: str
    host: Host
    rocm: str
    cause: tuple[str, ...]  # every one of these in the summary or fix of one error or warning
    named: bool = True  # False: a known gap (the benchmark counts it; `gap` says why)
    gap: str = ""
    release: str | None = None  # the pair's jax release, where it matters
    # The fix the thread confirms repaired the machine: every one of these words in the fix of the finding that
    # names the cause. () where the thread confirms none (`fix_note` says what was proposed, if anything).
    fix: tuple[str, ...] = ()
    fix_note: str = ""
    batch: str = ""  # the held-out set it was added with ("2026-11-27": after the doctor it measures was built)

    @property
    def trained(self) -> bool:
        """Whether the doctor was built from this thread: it is a source of the doctor's own data (then its case
        measures what the doctor was taught, not what it learned)."""
        return thread_is_a_source(self.thread)


MI300X = HEALTHY[0]
# The Python environment's folder as the machine holds it: this interpreter's, under the sysroot.
SITE = sysconfig.get_paths()["purelib"]
_DEBIAN_13_KERNEL = "6.12.48+deb13-amd64"
_HALO = _gpu(110501, 1, device_id=0x1586, vram_bytes=512 * 1024**2)
_MODULES = "amdgpu 19542016 0 - Live 0x0000000000000000\nttm 110592 1 amdgpu, Live 0x0000000000000000\n"


def _dist(name: str, version: str, files: tuple[str, ...], requires: tuple[str, ...] = ()) -> dict[str, str]:
    """A distribution as pip installs it into SITE: METADATA and a RECORD listing its files (PEP 627)."""
    info = f"{SITE}/{name.replace('-', '_')}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    record = "".join(f"{p},sha256=x,1\n" for p in files) + f"{info.rsplit('/', 1)[1]}/RECORD,,\n"
    return {
        f"{info}/METADATA": metadata,
        f"{info}/RECORD": record,
        **{f"{SITE}/{p}": "" for p in files if p.endswith(".py")},
    }


def _limits(**soft: str) -> str:
    """/proc/self/limits as fs/proc/base.c prints it, with these soft (and hard) values."""
    rows = [("Limit", "Soft Limit", "Hard Limit", "Units"), ("Max cpu time", "unlimited", "unlimited", "seconds"),
            ("Max stack size", soft.get("stack", "8388608"), "unlimited", "bytes"),
            ("Max processes", "127447", "127447", "processes"), ("Max open files", "1048576", "1048576", "files"),
            ("Max locked memory", "unlimited", "unlimited", "bytes")]  # fmt: skip
    return "".join(f"{n:<25} {s:<20} {h:<20} {u:<10}\n" for n, s, h, u in rows)


HELD_OUT_2026_11_28: tuple[Case, ...] = (
    Case(
        "https://github.com/ROCm/legacy-rocm-build/issues/5562",
        Host(
            "Strix Halo, Debian 13's kernel: the GTT size set for amdttm, which is not loaded (ttm is)",
            _HALO,
            files={
                "/proc/sys/kernel/osrelease": _DEBIAN_13_KERNEL + "\n",
                "/proc/cmdline": f"BOOT_IMAGE=/vmlinuz-{_DEBIAN_13_KERNEL} root=UUID=1 ro quiet "
                "amdttm.pages_limit=32768000 amdttm.page_pool_size=32768000\n",
                "/proc/modules": _MODULES,
                "/sys/module/ttm/parameters/pages_limit": "16376986\n",
                "/sys/module/ttm/parameters/page_pool_size": "16376986\n",
            },
        ),
        "7.14.0",
        ("amdttm", "not loaded"),
        fix=("ttm.pages_limit=32768000",),
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/ROCm/rccl/issues/1800",
        Host(
            "MI300X node, Azure Linux 3: the kernel's configuration only in /usr/lib/modules, /boot unreadable",
            _gpu(90402, 8),
            files={
                "/proc/sys/kernel/osrelease": "6.6.64.2-9.azl3\n",
                "/usr/lib/modules/6.6.64.2-9.azl3/config": "CONFIG_HSA_AMD=y\nCONFIG_DMABUF_MOVE_NOTIFY=y\n"
                "CONFIG_PCI_P2PDMA=y\nCONFIG_HSA_AMD_P2P=y\n",
            },
            environ={"NCCL_DMABUF_ENABLE": "1"},
        ),
        "7.14.0",
        ("/boot/config", "RCCL"),
        fix=("RCCL_FORCE_ENABLE_DMABUF=1",),
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/siderolabs/pkgs/pull/1488",
        Host(
            "8 x MI300X, Talos Linux: a kernel built without PCI P2P DMA, dma-buf move notify and HSA_AMD_P2P",
            _gpu(90402, 8),
            files={
                "/proc/sys/kernel/osrelease": "6.12.18-talos\n",
                "/boot/config-6.12.18-talos": "CONFIG_HSA_AMD=y\nCONFIG_HSA_AMD_SVM=y\n"
                "# CONFIG_PCI_P2PDMA is not set\n# CONFIG_DMABUF_MOVE_NOTIFY is not set\n"
                "# CONFIG_HSA_AMD_P2P is not set\n",
            },
        ),
        "7.14.0",
        ("CONFIG_HSA_AMD_P2P",),
        fix=("CONFIG_HSA_AMD_P2P=y", "CONFIG_PCI_P2PDMA=y", "CONFIG_DMABUF_MOVE_NOTIFY=y"),
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/amd/playbooks/pull/627",
        Host(
            "Strix Halo in a podman container of a two-node RCCL job: the container's pids limit of 2048",
            _HALO,
            container=True,
            environ={"SLURM_JOB_NUM_NODES": "2"},
            files={
                "/proc/self/cgroup": "0::/\n",
                "/sys/fs/cgroup/pids.max": "2048\n",
                "/sys/fs/cgroup/memory.max": "max\n",
            },
        ),
        "7.14.0",
        ("pids.max", "2048"),
        fix=("--pids-limit=-1",),
        gap="the threads a job's processes start are not derived from the stack's sources: no pids need is judged",
        named=False,
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/ROCm/rocm-libraries/issues/1182",
        Host(
            "MI300A, RHEL 9.4, an unlimited stack limit (hipstdpar's pre-touch walks it)",
            _gpu(90402, 1, device_id=0x74A0),
            files={"/proc/self/limits": _limits(stack="unlimited")},
        ),
        "7.14.0",
        ("stack", "unlimited"),
        fix=("ulimit -s 8192",),
        gap="hipstdpar's own need (a finite stack) is no need of jax's: the doctor does not judge the stack limit",
        named=False,
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/Genesis-Embodied-AI/genesis-world/issues/3199",
        Host(
            "Rembrandt APU: CoACD's vendored libgomp beside torch's system libgomp, two OpenMP runtimes",
            _gpu(90012, 1, device_id=0x1681, vram_bytes=2 * GIB),
            files={
                **_dist("torch", "2.12.0+rocm7.15", ("torch/__init__.py", "torch/lib/libtorch_cpu.so")),
                **_dist(
                    "coacd", "1.0.11", ("coacd/__init__.py", "coacd.libs/libgomp-a34b3233.so.1", "coacd/lib_coacd.so")
                ),
            },
            binaries={
                f"{SITE}/torch/lib/libtorch_cpu.so": ("libgomp.so.1",),
                f"{SITE}/coacd/lib_coacd.so": ("libgomp-a34b3233.so.1",),
                f"{SITE}/coacd.libs/libgomp-a34b3233.so.1": (),
                "/usr/lib/x86_64-linux-gnu/libgomp.so.1": (),
            },
        ),
        "7.14.0",
        ("OpenMP", "libgomp-a34b3233.so.1"),
        fix=(),
        fix_note="confirmed: CoACD run in a subprocess, or built without OpenMP (SarahWeiii/CoACD#109)",
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/vllm-project/vllm/pull/16664",
        Host(
            "MI300X: triton from PyPI (pulled by xgrammar) over torch's pytorch-triton-rocm, one module twice",
            _gpu(90402, 1),
            files={
                **_dist("torch", "2.7.0+rocm6.4.1", ("torch/__init__.py",), ("pytorch-triton-rocm==3.2.0+rocm6.4.1",)),
                **_dist("pytorch-triton-rocm", "3.2.0+rocm6.4.1", ("triton/__init__.py", "triton/language.py")),
                **_dist("triton", "3.3.0", ("triton/__init__.py", "triton/compiler.py")),
                **_dist("xgrammar", "0.1.18", ("xgrammar/__init__.py",), ("triton",)),
            },
        ),
        "7.14.0",
        ("triton", "pytorch-triton-rocm"),
        fix=("pip uninstall", "triton"),
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/Lumi-supercomputer/LUMI-AI-Guide/issues/81",
        Host(
            "LUMI node (MI250X): $HOME on Lustre, so MIOpen writes under /tmp, where another user's folder is",
            _gpu(90010, 2, device_id=0x7408),
            uid=1000,
            groups=(1000, 44, 110),  # the nodes' group: the GPUs are this user's, as Slurm gives them on LUMI
            node_gid=110,
            environ={"HOME": "/users/someone"},
            files={
                "/proc/self/mountinfo": "24 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n"
                "88 24 0:45 / /users rw,relatime - lustre 10.0.0.1@o2ib:/users rw\n",
                "/users/someone/.bashrc": "",
            },
        ),
        "7.14.0",
        ("MIOpen", "/tmp"),
        fix=("MIOPEN_USER_DB_PATH", "MIOPEN_CUSTOM_CACHE_DIR"),
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/ROCm/mori/pull/679",
        Host(
            "MI355X with a 1.5 TB host-memory tier: transparent hugepages on madvise only, no hugetlb pool",
            _gpu(90500, 8),
            files={"/sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n"},
        ),
        "7.14.0",
        ("transparent_hugepage", "madvise"),
        fix=("always",),
        gap="a registration cost of mori's host-memory tier: no need of jax's the doctor judges",
        named=False,
        batch="2026-11-28",
    ),
    Case(
        "https://github.com/ROCm/omnistat/pull/313",
        Host(
            "Instinct node monitored by omnistat: perf_event_paranoid 4 without CAP_PERFMON",
            _gpu(90402, 8),
            files={"/proc/sys/kernel/perf_event_paranoid": "4\n"},
        ),
        "7.14.0",
        ("perf_event_paranoid",),
        fix_note="no fix confirmed by a user: maintainers document sysctl kernel.perf_event_paranoid=2",
        gap="a profiler's counters, no need of jax's: the doctor does not read perf_event_paranoid",
        named=False,
        batch="2026-11-28",
    ),
)
_MES = "/sys/class/drm/renderD128/device/fw_version/mes_fw_version"
FAILURES: tuple[Case, ...] = (
    Case(
        "https://github.com/ROCm/AMDMIGraphX/pull/3517",
        Host(
            "RX 9070 XT, rocBLAS without gfx1201",
            _gpu(120001, 1),
            kernels=("gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1102"),
        ),
        "7.2.0",
        ("rocBLAS", "gfx1201"),
        fix_note="no fix confirmed on a card: the change routes MIGraphX's gfx12 work away from rocBLAS (ROCm 6.3)",
    ),
    Case(
        "https://github.com/ROCm/rocBLAS/issues/1331",
        Host(
            "gfx1011 (Radeon Pro 5600M) on a rocBLAS of gfx90x, gfx1030 and gfx110x only",
            _gpu(100101, 1, device_id=0x7360, vram_bytes=8 * GIB),
            kernels=("gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100", "gfx1101", "gfx1102"),
        ),
        "7.14.0",
        ("rocBLAS", "gfx1011"),
        fix_note="proposed only: HSA_OVERRIDE_GFX_VERSION=10.1.0, or rocBLAS rebuilt for gfx1011",
    ),
    Case(
        "https://github.com/ollama/ollama/issues/11652",
        Host(
            "RX 9060 XT (gfx1200), hipBLASLt without gfx1200",
            _gpu(120000, 1),
            without_files=("opt/rocm-7.14.0/lib/hipblaslt/library/*gfx1200*",),
        ),
        "7.14.0",
        ("hipBLASLt", "gfx1200"),
        fix_note="open; proposed only: a link to another processor's TensileLibrary file",
    ),
    Case(
        "https://github.com/ROCm/TheRock/issues/7976",
        Host(
            "MI355X, TheRock pip wheels with hipBLASLt in library/<gfx>/",
            _gpu(90500, 1),
            layout="pip",
            pip_family="gfx950_dcgpu",
            hipblaslt_per_processor=True,
        ),
        "7.14.0",
        ("hipBLASLt", "gfx950"),
        fix_note="open; proposed only: hipBLASLt reading library/<gfx>/ as rocBLAS does",
    ),
    Case(
        "https://github.com/ROCm/TheRock/issues/4578",
        Host(
            "Strix Halo with TheRock's gfx94X wheel",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
            layout="pip",
            pip_family="gfx94X_dcgpu",
            kernels=("gfx942",),
            system_bytes=128 * GIB,
        ),
        "7.14.0",
        ("rocBLAS", "gfx1151", "gfx94X_dcgpu", "rocm[libraries,device-gfx1151]==7.14.0"),
        fix_note="proposed only: TheRock's gfx1151 wheels in the plugin's environment; the reporter did not confirm",
    ),
    Case(
        "https://github.com/ROCm/librocdxg/issues/35",
        Host("RX 9070 XT under WSL, librocdxg not registered", (), wsl=True, rocdxg="/usr/local/lib/librocdxg.so"),
        "7.2.3",
        ("librocdxg.so", "/usr/local/lib"),
        fix_note="no fix visible in the thread (the maintainer asked for ldconfig -p; librocdxg#47 registers "
        "/opt/rocm/lib)",
    ),
    Case(
        "https://github.com/ROCm/librocdxg/issues/46",
        Host("WSL, ROCm 7.13, no librocdxg", (), wsl=True, rocdxg=None),
        "7.13.0",
        ("librocdxg",),
        fix_note="confirmed for a librocdxg the loader did not find (LD_LIBRARY_PATH=/opt/rocm/lib, or librocdxg#47); "
        "this machine has none at all, so that fix does not apply",
    ),
    Case(
        "https://github.com/ROCm/legacy-rocm-build/issues/5724",
        Host(
            "Strix Point (gfx1150) with MES 0x83",
            _gpu(110500, 1, device_id=0x150E, vram_bytes=16 * GIB),
            files={_MES: "0x00000083\n"},
            system_bytes=32 * GIB,
        ),
        "7.14.0",
        ("MES firmware 0x83",),
        fix=("0x80",),
        fix_note="confirmed by Strix Point users: MES firmware rolled back from 0x83 to 0x80",
    ),
    Case(
        "https://github.com/ROCm/rocm-jax/issues/360",
        Host(
            "Radeon VII + MI100",
            (Gpu(90006, drm_render_minor=128), Gpu(90008, drm_render_minor=129)),
            kernels=("gfx906", "gfx908", "gfx90a", "gfx942"),
        ),
        "7.2.0",
        ("--xla_gpu_autotune_level=0",),
        release="0.10.2",
        fix=("XLA_FLAGS=--xla_gpu_autotune_level=0",),
        fix_note="confirmed by the reporter (a workaround)",
    ),
    Case(
        "https://github.com/ROCm/jax/issues/800",
        Host("MI350X", _gpu(90500, 8, vram_bytes=288 * GIB)),
        "7.2.1",
        ("AMD_COMGR_NAMESPACE=1",),
        release="0.10.2",
        fix=("AMD_COMGR_NAMESPACE=1",),
        fix_note="confirmed by the reporter",
    ),
    Case(
        "https://github.com/ROCm/jax/issues/547",
        Host(
            "Strix Halo, 512 MiB carve-out",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=GIB // 2),
            system_bytes=128 * GIB,
        ),
        "7.14.0",
        ("carve-out",),
        fix_note="an open request for unified memory; no fix in the thread",
    ),
    Case(
        "https://github.com/ROCm/librocdxg/issues/34",
        Host(
            "RX 7800 XT under WSL, ROCm 7.2.1 without HSA_ENABLE_DXG_DETECTION",
            (),
            wsl=True,
            environ={"JAX_ROCM_WORKAROUNDS": "0"},
        ),
        "7.2.1",
        ("HSA_ENABLE_DXG_DETECTION=1",),
        fix_note="HSA_ENABLE_DXG_DETECTION=1 confirmed by another user on his own machine only, not the reporter",
    ),
    Case(
        "https://github.com/ROCm/legacy-rocm-build/issues/5844",
        Host(
            "Krackan Point (gfx1152), MES 0x82",
            _gpu(110502, 1, vram_bytes=16 * GIB),
            files={_MES: "0x00000082\n"},
            system_bytes=32 * GIB,
        ),
        "7.14.0",
        ("MES",),
        named=False,
        gap="an open report without a cause or fix confirmed by AMD: no known-issue entry to match",
        fix_note="proposed only: a kernel with the MES fix; the reporter did not confirm",
    ),
    # Held out: threads of broken invariants the doctor was not built from (2026-11-26), each with its confirmed fix.
    Case(
        "https://github.com/ggml-org/llama.cpp/issues/8618",
        Host(
            "RX 7700S (gfx1102) and the Radeon 780M iGPU (gfx1103)",
            (
                Gpu(110002, drm_render_minor=128, device_id=0x7480, vram_bytes=8 * GIB),
                Gpu(110003, drm_render_minor=129, device_id=0x15BF, vram_bytes=GIB // 2, simd_count=24),
            ),
            system_bytes=32 * GIB,
        ),
        "7.14.0",
        ("gfx1103",),
        fix=("HIP_VISIBLE_DEVICES=0",),
        fix_note="confirmed by the reporter: every build failed only with the 780M visible",
    ),
    Case(
        "https://github.com/ROCm/ROCR-Runtime/issues/354",
        Host(
            "2x RX 9070 XT, HSA_OVERRIDE_GFX_VERSION exported empty",
            _gpu(120001, 2, device_id=0x7550, vram_bytes=16 * GIB),
            environ={"HSA_OVERRIDE_GFX_VERSION": ""},
        ),
        "7.14.0",
        ("HSA_OVERRIDE_GFX_VERSION", "empty"),
        fix=("unset HSA_OVERRIDE_GFX_VERSION",),
        fix_note="confirmed by the reporter: rocm_agent_enumerator then lists gfx1201 twice",
    ),
    Case(
        "https://github.com/jax-ml/jax/issues/13148",
        MI300X.but(
            name="MI300X x8, XLA_FLAGS typed with an en dash",
            environ={"XLA_FLAGS": "-\u2013xla_force_host_platform_device_count=4"},
        ),
        "7.14.0",
        ("XLA_FLAGS",),
        fix=("XLA_FLAGS=--xla_force_host_platform_device_count=4",),
        fix_note="confirmed by the reporter and a maintainer: two ASCII hyphens",
    ),
    Case(
        "https://github.com/ROCm/legacy-rocm-build/issues/5696",
        Host(
            "Strix Halo (gfx1151) and an R9700 (gfx1201), HSA_OVERRIDE_GFX_VERSION=12.0.1 left in ~/.bashrc",
            (
                Gpu(110501, drm_render_minor=128, device_id=0x1586, vram_bytes=64 * GIB),
                Gpu(120001, drm_render_minor=129, device_id=0x7551, vram_bytes=32 * GIB),
            ),
            system_bytes=128 * GIB,
            environ={"HSA_OVERRIDE_GFX_VERSION": "12.0.1"},
            proc_version=_UBUNTU_OEM_KERNEL,
        ),
        "7.14.0",
        ("HSA_OVERRIDE_GFX_VERSION=12.0.1", "gfx1201"),
        fix=("unset HSA_OVERRIDE_GFX_VERSION",),
        fix_note="confirmed by the reporter: rocminfo then lists gfx1201 and gfx1151",
    ),
    Case(
        "https://github.com/ollama/ollama/issues/6685",
        Host(
            "RX 7900 XTX in a rootless container: the nodes show as nobody:bin, root in the container",
            _gpu(110000, 1, device_id=0x744C, vram_bytes=24 * GIB),
            container=True,
            uid=0,
            groups=(0,),
            node_uid=65534,
            node_gid=2,
            group_names={"root": 0, "daemon": 1, "bin": 2, "video": 44, "render": 109, "nogroup": 65534},
            system_bytes=64 * GIB,
        ),
        "7.14.0",
        ("/dev/kfd",),
        fix=("--group-add 2",),
        fix_note="confirmed by the reporter and others: --group-add the group the node shows inside (bin, daemon)",
    ),
    Case(
        "https://github.com/ROCm/legacy-rocm-build/issues/1549",
        Host(
            "rootless Docker: the host's render and video groups not mapped (the nodes show as nogroup)",
            _gpu(90402, 1),
            container=True,
            uid=0,
            groups=(0,),
            node_uid=65534,
            node_gid=65534,
            group_names={"root": 0, "video": 44, "render": 109, "nogroup": 65534},
        ),
        "7.14.0",
        ("/dev/kfd",),
        fix=("/etc/subgid",),
        fix_note="confirmed by a commenter and an AMD engineer: the host's gids mapped through /etc/subgid",
    ),
    Case(
        "https://github.com/ROCm/legacy-rocm-build/issues/5444",
        Host(
            "Strix Halo (96 GiB carve-out) on Ubuntu 24.04's 6.11 kernel",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
            system_bytes=128 * GIB,
            proc_version=_UBUNTU_GA_KERNEL,
        ),
        "7.14.0",
        ("kernel", "gfx1151"),
        fix=("upgrade the Linux kernel",),
        fix_note="confirmed by the reporter: a 6.16.9 kernel (AMD's page names 6.18.4 and Ubuntu's fixed builds)",
    ),
    # Held out (added 2026-11-27, after the doctor's variable table, ROCm-elsewhere search and access policy were
    # built; none is cited in its data): public failures of other projects on the ROCm stack, each rebuilt as the
    # machine its thread describes.
    Case(
        "https://github.com/jamiepine/voicebox/pull/864",
        Host(
            "RX 9070 (gfx1201) in Docker, HSA_OVERRIDE_GFX_VERSION exported empty by a compose default",
            _gpu(120001, 1, device_id=0x7550, vram_bytes=16 * GIB),
            container=True,
            environ={"HSA_OVERRIDE_GFX_VERSION": ""},
        ),
        "7.2.0",
        ("HSA_OVERRIDE_GFX_VERSION", "empty"),
        fix=("unset HSA_OVERRIDE_GFX_VERSION",),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/Osmantic/ODS/pull/1779",
        Host(
            "2 x RX 9070 XT (gfx1201) in containers, HSA_OVERRIDE_GFX_VERSION empty",
            _gpu(120001, 2, device_id=0x7550, vram_bytes=16 * GIB),
            container=True,
            environ={"HSA_OVERRIDE_GFX_VERSION": ""},
        ),
        "7.14.0",
        ("HSA_OVERRIDE_GFX_VERSION", "empty"),
        fix=("unset HSA_OVERRIDE_GFX_VERSION",),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/ROCm/legacy-rocm-build/issues/5773",
        Host(
            "TheRock's 7.9.0 tarball unpacked in a home folder, nothing pointing at it",
            _gpu(110000, 1, device_id=0x744C, vram_bytes=24 * GIB),
            layout="therock",
            rocm_at="/home/user/therock-tarball/install",
            ld_conf=False,
        ),
        "7.9.0",
        ("installed at /home/user/therock-tarball/install", "not where"),
        fix=("ROCM_PATH=/home/user/therock-tarball/install", "LD_LIBRARY_PATH=/home/user/therock-tarball/install/lib"),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/ggml-org/llama.cpp/issues/25807",
        Host(
            "Strix Halo (gfx1151), ROCm 7.14's libraries in /opt/rocm/core-7.14/lib, which the loader does not search",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
            rocm_at="/opt/rocm/core-7.14",
            ld_conf=False,
            system_bytes=128 * GIB,
            proc_version=_UBUNTU_OEM_KERNEL,
        ),
        "7.14.0",
        ("/opt/rocm/core-7.14", "not where"),
        fix=("LD_LIBRARY_PATH=/opt/rocm/core-7.14/lib",),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/PrismML-Eng/Bonsai-demo/issues/87",
        Host(
            "Strix Halo (gfx1151), ROCm in /opt/rocm-7.14.0 without the /opt/rocm link or an ld.so.conf.d entry",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
            rocm_link=False,
            ld_conf=False,
            system_bytes=128 * GIB,
            proc_version=_UBUNTU_OEM_KERNEL,
        ),
        "7.14.0",
        ("/opt/rocm-7.14.0", "does not look there"),
        fix=("/etc/ld.so.conf.d/rocm.conf", "ldconfig"),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/ROCm/Megatron-LM/pull/132",
        Host(
            "MI355X x8 with Broadcom bnxt_re NICs, NCCL_IB_HCA naming rdma0-7 (a 2-node Slurm job)",
            _gpu(90500, 8, device_id=0x75A3, vram_bytes=288 * GIB),
            environ={"NCCL_IB_HCA": ",".join(f"rdma{i}" for i in range(8)), "SLURM_JOB_NUM_NODES": "2"},
            files={f"/sys/class/infiniband/bnxt_re{i}/ports/1/state": "4: ACTIVE\n" for i in range(8)},
        ),
        "7.14.0",
        ("NCCL_IB_HCA", "no RDMA device"),
        fix=("NCCL_IB_HCA=bnxt_re0",),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/ROCm/rocm-systems/pull/9083",
        Host(
            "8 GPUs per node with AI NICs named roce*, NCCL_IB_HCA=rdma (a 2-node job)",
            _gpu(90402, 8),
            environ={"NCCL_IB_HCA": "rdma", "SLURM_JOB_NUM_NODES": "2"},
            files={f"/sys/class/infiniband/roce{i}/ports/1/state": "4: ACTIVE\n" for i in range(8)},
        ),
        "7.14.0",
        ("NCCL_IB_HCA", "rdma"),
        fix=("roce",),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/Hal0ai/hal0/pull/423",
        Host(
            "Strix Halo (gfx1151) in an LXC guest, /dev/kfd back as root:root 0660 after a reboot",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
            uid=1000,
            groups=(1000, 44, 110),
            node_gid=0,
            group_names={"root": 0, "video": 44, "render": 110, "user": 1000},
            system_bytes=128 * GIB,
            proc_version=_UBUNTU_OEM_KERNEL,
        ),
        "7.14.0",
        ("/dev/kfd", "root"),
        fix=("chgrp render",),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/Hal0ai/hal0/pull/2213",
        Host(
            "Strix Halo (gfx1151) in a privileged Proxmox LXC guest: the nodes carry the host's render gid 993, the "
            "guest's render group is 991",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
            uid=1000,
            groups=(1000, 44, 991),
            node_gid=993,
            group_names={"video": 44, "render": 991, "user": 1000},
            system_bytes=128 * GIB,
            proc_version=_UBUNTU_OEM_KERNEL,
        ),
        "7.14.0",
        ("993", "render group"),
        fix=("gid=991",),
        batch="2026-11-27",
    ),
    Case(
        "https://github.com/kyuz0/amd-strix-halo-vllm-toolboxes/issues/6",
        Host(
            "Strix Halo (gfx1151) in a toolbox container whose user lacks the host's render gid",
            _gpu(110501, 1, device_id=0x1586, vram_bytes=96 * GIB),
            container=True,
            uid=1000,
            groups=(1000,),
            node_gid=110,
            group_names={"user": 1000},
            system_bytes=128 * GIB,
            proc_version=_UBUNTU_OEM_KERNEL,
        ),
        "7.14.0",
        ("/dev/kfd", "cannot open"),
        fix_note="confirmed by another user: the host's render gid made a group in the container and the user added "
        "to it (or the nodes made world-writable, which our access policy refuses); ours adds that gid (--group-add)",
        batch="2026-11-27",
    ),
    # Held out (2026-11-28): ten public threads a helper chose before any rule of the sources they need was written
    # (the kernel's build and module parameters, the process's limits and cgroup, the libraries mapped, the Python
    # environment, the folders written, kernel settings), each cause's class named nowhere in this repository then.
    *HELD_OUT_2026_11_28,
)


@contextmanager
def released_pair(release: str, patch: pytest.MonkeyPatch) -> Iterator[None]:
    """The doctor as the pair of `release` runs it: its release, and jaxlib of that release beside it."""
    with patch.context() as inner:
        inner.setattr("jax_rocm7_plugin.version.JAX_RELEASE", release)
        inner.setattr("jax_rocm7_plugin.version.__version__", release)
        inner.setattr("jax_rocm7_plugin._machine.jaxlib_version.jaxlib_version", lambda: release)
        yield


def build_host(
    host: Host, rocm: str, where: Path, build: Path, patch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, str], Path]:
    """The sysroot, the variables and the PJRT library of `host` on ROCm `rocm` (`patch` puts a pip ROCm on
    sys.path)."""
    line = "7.14" if rocm.startswith("7.1") and rocm != "7.1.0" and rocm != "7.1.1" else rocm.rsplit(".", 1)[0]
    kernels = host.kernels if host.kernels is not None else ROCM_KERNELS.get(line, ROCM_KERNELS["7.14"])
    root = make_sysroot(
        where / "root",
        list(host.gpus) if host.node is None else kfd_gpus(host.node),
        topology=not host.wsl,
        amdgpu_module=not host.wsl,
        kfd=not host.wsl,
        dxg=host.wsl,
        system_bytes=host.system_bytes,
    )
    if host.node is not None:
        write_health(root, host.node)
    environ = dict(host.environ)
    library = build / "fleet-lib" / "libpjrt_gpu.so"
    home = add_rocm(root, build, rocm, toolchain=host.layout == "amd")
    if host.layout == "therock":
        (home / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
        (home / "lib" / "llvm" / "amdgcn" / "bitcode" / "ocml.bc").write_bytes(b"BC\xc0\xde")
        (home / "lib" / "llvm" / "bin").mkdir(parents=True)
        (home / "lib" / "llvm" / "bin" / "ld.lld").write_text("#!/bin/sh\nexit 1\n")
    if host.layout == "pip":
        library = _pip_rocm(host, where / "site", build, kernels, patch)
    else:
        add_math_libraries(home / "lib", build, kernels)
        if host.hipblaslt_per_processor:
            _hipblaslt_per_processor(home / "lib", kernels)
    if host.rocm_at is not None or not host.rocm_link:
        tree = (root / "opt" / "rocm").resolve()
        (root / "opt" / "rocm").unlink()
        if host.rocm_at is not None:
            target = root / host.rocm_at.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(tree), target)
            home = target
    if host.ld_conf:
        (root / "etc" / "ld.so.conf.d").mkdir(parents=True, exist_ok=True)
        (root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
        (root / "etc" / "ld.so.conf.d" / "10-rocm.conf").write_text("/opt/rocm/lib\n")
    if host.wsl:
        shutil.copy(build / "rocm-libs" / "libhsa-runtime64.so.1", home / "lib")
        if host.rocdxg is not None:
            target = root / host.rocdxg.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(build / "rocm-libs" / "librocdxg.so.1", target)
    if host.container:
        (root / ".dockerenv").write_text("")
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc" / "mounts").write_text("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=16777216k 0 0\n")
    if host.uid is not None:
        _identity(root, host)
    if host.proc_version is not None:
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc" / "version").write_text(host.proc_version + "\n")
    for pattern in host.without_files:
        for path in root.glob(pattern):
            path.unlink()
    for path, content in host.files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    home = host.environ.get("HOME", "")
    if host.uid is not None and home.startswith("/") and (root / home.lstrip("/")).is_dir():
        import os

        primary = host.groups[0] if host.groups else host.uid
        for folder, _, names in os.walk(root / home.lstrip("/")):  # the user's home and what is in it are theirs
            for path in (folder, *(os.path.join(folder, n) for n in names)):
                os.chown(path, host.uid, primary)
    for path, needed in host.binaries.items():
        from tests.support.native import library_needing

        library_needing(root / path.lstrip("/"), needed, where / "needed-stubs")
    return root, environ, library


def _identity(root: Path, host: Host) -> None:
    """The process's numbers in /proc/self/status (proc(5)), the group database, the nodes' owner and mode."""
    import os

    primary = host.groups[0] if host.groups else host.uid
    status = root / "proc" / "self" / "status"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(
        f"Name:\tpython3\nUid:\t{host.uid}\t{host.uid}\t{host.uid}\t{host.uid}\n"
        f"Gid:\t{primary}\t{primary}\t{primary}\t{primary}\nGroups:\t{' '.join(map(str, host.groups))}\n"
    )
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "group").write_text("".join(f"{name}:x:{gid}:\n" for name, gid in host.group_names.items()))
    for node in [root / "dev" / "kfd", *(root / "dev" / "dri").glob("renderD*")]:
        os.chown(node, host.node_uid, host.node_gid)
        node.chmod(host.node_mode)


def _hipblaslt_per_processor(lib_dir: Path, kernels: tuple[str, ...]) -> None:
    """hipBLASLt's files moved into library/<gfx>/ (as TheRock's wheels lay them out, ROCm/TheRock#7976)."""
    folder = lib_dir / "hipblaslt" / "library"
    for gfx in kernels:
        (folder / gfx).mkdir(exist_ok=True)
        for name in (f"TensileLibrary_lazy_{gfx}.dat", f"extop_{gfx}.co"):
            if (folder / name).exists():
                (folder / name).rename(folder / gfx / (name + ".zlib" if name.endswith(".dat") else name))


def _pip_rocm(host: Host, site: Path, build: Path, kernels: tuple[str, ...], patch: pytest.MonkeyPatch) -> Path:
    """TheRock's wheels in a site-packages: _rocm_sdk_core (HIP, bitcode, ld.lld) and the libraries wheel of one
    GPU family (rocBLAS's files in library/<gfx>/), and the PJRT library in jax_plugins/ with the RUNPATH of the
    published one ($ORIGIN/../../_rocm_sdk_core/lib, then each family's wheel)."""
    from tests.support.native import pjrt_library_with_code_for

    core = site / "_rocm_sdk_core"
    (core / "lib").mkdir(parents=True)
    (core / "__init__.py").write_text("")
    shutil.copy(build / "hip" / "libamdhip64.so.7", core / "lib")
    (core / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
    (core / "lib" / "llvm" / "amdgcn" / "bitcode" / "ocml.bc").write_bytes(b"BC\xc0\xde")
    (core / "lib" / "llvm" / "bin").mkdir(parents=True)
    (core / "lib" / "llvm" / "bin" / "ld.lld").write_text("#!/bin/sh\nexit 1\n")
    family = site / f"_rocm_sdk_libraries_{host.pip_family}" / "lib"
    add_math_libraries(family, build, kernels, per_processor=True)
    if host.hipblaslt_per_processor:
        _hipblaslt_per_processor(family, kernels)
    info = site / "rocm_sdk_core-7.14.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rocm-sdk-core\nVersion: 7.14.0\n")
    (info / "RECORD").write_text("")
    patch.syspath_prepend(str(site))
    runpath = ("$ORIGIN/../../_rocm_sdk_core/lib", f"$ORIGIN/../../_rocm_sdk_libraries_{host.pip_family}/lib")
    return pjrt_library_with_code_for(
        site / "jax_plugins" / "xla_rocm7",
        bundle_for(list(PUBLISHED_TARGETS)),
        hip_dir=build / "hip",
        runpath=runpath,
    )


def diagnose_host(host: Host, rocm: str, release: str, where: Path, build: Path, patch: pytest.MonkeyPatch) -> Report:
    with patch.context() as inner:
        root, environ, library = build_host(host, rocm, where, build, inner)
        with released_pair(release, inner):
            return doctor(environ, root, library)


# The warnings a healthy machine may get: known issues of the ROCm its release serves that the sources confirm for
# that configuration (read from each entry's threads). ROCm 7.2.0 (the 0.10.2 pair's): three bugs of that release
# everywhere, and on gfx950 the init hang seen on ROCm 7.2. ROCm 7.14 (the later pairs'): none.
CONFIRMED_WARNINGS = {
    "7.2.0": {
        "rocm-7.2.0-command-buffer-segfault",  # openxla/xla#40405: XLA moved its CI to 7.2.1 for it
        "miopen-7.2-conv-segfault",  # AMD rebuilds MIOpen in every rocm/jax image it ships on 7.2.x
        "rccl-7.2.0-single-gpu-alltoall-hang",  # one-GPU machines (RCCL's changelog)
    },
}
CONFIRMED_ON = {("7.2.0", "gfx950"): {"gfx950-init-hang-comgr-namespace"}}  # ROCm/jax#800: MI350X, ROCm 7.2


def false_alarms(report: Report, rocm: str) -> list[Finding]:
    """Errors, and warnings other than the known issues confirmed for this configuration."""
    gfx = {g.gfx_target for g in report.gpus}
    allowed = set(CONFIRMED_WARNINGS.get(rocm, set()))
    allowed |= {e for (r, g), entries in CONFIRMED_ON.items() if r == rocm and g in gfx for e in entries}
    return [
        f
        for f in report.findings
        if f.severity == "error"
        or (f.severity == "warning" and (f.id != "known-issue" or f.known_issue not in allowed))
    ]


def thread_is_a_source(thread: str) -> bool:
    """The thread is cited in the doctor's data (_policy/*.json), by address or as owner/name#number."""
    import re

    match = re.match(r"https://github.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)", thread)
    forms = [thread] + ([f"{match.group(1)}#{match.group(2)}"] if match else [])
    return any(form in text for form in forms for text in _policy_texts())


def _policy_texts() -> list[str]:
    from jax_rocm7_plugin import _policy

    folder = Path(_policy.__file__).parent
    return [path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.json"))]


def remedy_outcome(report: Report, case: Case) -> str:
    """How the doctor's fix meets the thread's confirmed one: "checked" (a finding names the cause, its fix holds
    the confirmed fix's words, and the doctor's rerun with that fix made found no error), "named" (the same, but
    not a change the doctor can make and check), "missed" (no such finding), "none" (the thread confirms no fix)."""
    if not case.fix:
        return "none"
    best = "missed"
    for f in report.findings:
        if f.severity not in ("error", "warning"):
            continue
        text = f"{f.summary} {f.fix}"  # (getattr: --source measures older doctors, whose findings have no remedy)
        if all(word in text for word in case.cause) and all(word in f.fix for word in case.fix):
            remedy = getattr(f, "remedy", None)
            if remedy is not None and remedy.checked:
                return "checked"
            best = "named"
    return best


def names_cause(report: Report, cause: tuple[str, ...]) -> bool:
    """One error or warning whose summary or fix holds every word of `cause`."""
    return any(
        all(word in f"{f.summary} {f.fix}" for word in cause)
        for f in report.findings
        if f.severity in ("error", "warning")
    )
