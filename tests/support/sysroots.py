"""Synthetic machine trees in the documented formats (KFD sysfs topology, /dev nodes).

A GPU node's properties follow the amdgpu driver's `key value` lines; CPU nodes
have simd_count 0. Device nodes are plain files: the probes only stat and
access() them.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.bundles import compressed_bundle, plain_bundle
from tests.support.native import HIP_RUNTIME

TOPOLOGY = "sys/class/kfd/kfd/topology/nodes"
LIB_DIR = "lib/x86_64-linux-gnu"
# The base system a C++ shared object links against; a sysroot without them is not a usable machine.
BASE_LIBRARIES = (
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "ld-linux-x86-64.so.2",
)


def add_base_system(root: Path) -> None:
    """Link this host's glibc and C++ runtime into the sysroot's library directory; the temporary folder every
    system has (/tmp, mode 1777)."""
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    target = root / LIB_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in BASE_LIBRARIES:
        host = Path("/") / LIB_DIR / name
        if host.exists() and not (target / name).exists():
            (target / name).symlink_to(host.resolve())


@dataclass(frozen=True)
class Gpu:
    gfx_target_version: int = 90402  # gfx942 (MI300X)
    simd_count: int = 1216
    drm_render_minor: int | None = 128
    capability: int = 0  # KFD capability bits (0x80000: SRAM ECC supported and on)
    vram_bytes: int = 192 * 1024**3  # its frame buffer bank (an APU's: the VRAM carve-out)
    apu: bool = False  # a GPU node with CPU cores, as KFD lists older APUs (current ones: a node of its own)
    device_id: int = 0x74A1  # PCI device id (MI300X; MI300A is 0x74A0)
    extra: tuple[tuple[str, int], ...] = ()  # more `key value` lines (domain, location_id, hive_id)


def properties_text(gpu: Gpu | None) -> str:
    if gpu is None:
        return "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\ndrm_render_minor 0\n"
    lines = [
        f"cpu_cores_count {16 if gpu.apu else 0}",
        f"simd_count {gpu.simd_count}",
        "mem_banks_count 1",
        f"gfx_target_version {gpu.gfx_target_version}",
        "vendor_id 4098",
        f"device_id {gpu.device_id}",
        "local_mem_size 205822885888",
        f"capability {gpu.capability}",
    ]
    if gpu.drm_render_minor is not None:
        lines.append(f"drm_render_minor {gpu.drm_render_minor}")
    lines.extend(f"{key} {value}" for key, value in gpu.extra)
    return "\n".join(lines) + "\n"


def make_sysroot(
    root: Path,
    gpus: list[Gpu] | None = None,
    *,
    topology: bool = True,
    amdgpu_module: bool = True,
    kfd: bool = True,
    render_nodes: bool = True,
    dxg: bool = False,
    base_system: bool = True,
    system_bytes: int = 512 * 1024**3,
) -> Path:
    """A machine with one CPU node (`system_bytes` of memory) and the given GPUs (default: one gfx942), each
    node with its memory bank as KFD lists it (heap_type 0: system memory; 1: a GPU's frame buffer)."""
    gpus = [Gpu()] if gpus is None else gpus
    root.mkdir(parents=True, exist_ok=True)
    (root / "dev" / "dri").mkdir(parents=True, exist_ok=True)
    (root / "dev" / "shm").mkdir(exist_ok=True)
    if amdgpu_module:
        (root / "sys" / "module" / "amdgpu").mkdir(parents=True, exist_ok=True)
    if topology:
        nodes = root / TOPOLOGY
        for index, gpu in enumerate([None, *gpus]):
            (nodes / str(index)).mkdir(parents=True, exist_ok=True)
            (nodes / str(index) / "properties").write_text(properties_text(gpu))
            bank = nodes / str(index) / "mem_banks" / "0"
            bank.mkdir(parents=True, exist_ok=True)
            heap, size = (0, system_bytes) if gpu is None else (1, gpu.vram_bytes)
            (bank / "properties").write_text(f"heap_type {heap}\nsize_in_bytes {size}\nwidth 64\n")
    if kfd:
        (root / "dev" / "kfd").write_text("")
    if render_nodes:
        for gpu in gpus:
            if gpu.drm_render_minor is not None:
                (root / "dev" / "dri" / f"renderD{gpu.drm_render_minor}").write_text("")
    if dxg:
        (root / "dev" / "dxg").write_text("")
    if base_system:
        add_base_system(root)
    return root


# A GPU build tree (see the `build` fixture): fake HIP 7 runtime + PJRT-shaped library.
LIBRARY_TARGETS = ["gfx90a", "gfx9-4-generic", "gfx1030", "gfx11-generic"]
# The processors the published jax-rocm7-pjrt 0.12.0 library carries code objects for (read from its offload
# bundles with _binary/code_objects.read_binary).
PUBLISHED_TARGETS = (
    "gfx900",
    "gfx906",
    "gfx908",
    "gfx90a",
    "gfx942",
    "gfx950",
    "gfx1010",
    "gfx1011",
    "gfx1012",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1033",
    "gfx1034",
    "gfx1035",
    "gfx1036",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1152",
    "gfx1153",
    "gfx1200",
    "gfx1201",
    "gfx1250",
)


def bundle_for(targets: list[str]) -> bytes:
    ids = ["host-x86_64-unknown-linux-gnu-", *(f"hipv4-amdgcn-amd-amdhsa--{t}" for t in targets)]
    return compressed_bundle(plain_bundle(ids), 3)


def library_of(build: Path) -> Path:
    return build / "lib" / "libpjrt_gpu.so"


def add_rocm(
    root: Path,
    build: Path,
    version: str = "7.2.0",
    *,
    link: bool = True,
    soname: str = HIP_RUNTIME,
    sysdeps: Sequence[Path] = (),
    toolchain: bool = True,
) -> Path:
    """/opt/rocm-<version> as AMD's packages lay it out, /opt/rocm pointing at it.

    `toolchain`: with amdgcn/bitcode/ocml.bc and llvm/bin/ld.lld (empty stand-ins, for the doctor's look).

    `sysdeps`: libraries put where ROCm >= 7.14 (TheRock) keeps its private system libraries
    (librocm_sysdeps_*), lib/rocm_sysdeps/lib.
    """
    home = root / "opt" / f"rocm-{version}"
    (home / ".info").mkdir(parents=True)
    (home / ".info" / "version").write_text(f"{version}-56\n")
    (home / "lib").mkdir()
    shutil.copy(build / "hip" / HIP_RUNTIME, home / "lib" / soname)
    if sysdeps:
        (home / "lib" / "rocm_sysdeps" / "lib").mkdir(parents=True)
        for library in sysdeps:
            shutil.copy(library, home / "lib" / "rocm_sysdeps" / "lib" / library.name)
    if toolchain:  # what the 0.10.x library's first compile looks for (empty stand-in files)
        (home / "amdgcn" / "bitcode").mkdir(parents=True)
        (home / "amdgcn" / "bitcode" / "ocml.bc").write_bytes(b"BC\xc0\xde")
        (home / "llvm" / "bin").mkdir(parents=True)
        (home / "llvm" / "bin" / "ld.lld").write_text("#!/bin/sh\nexit 1\n")
    if link:
        (root / "opt" / "rocm").symlink_to(f"rocm-{version}")
    return home


# Test fixture, never shipped: the ROCm math libraries the PJRT library loads, as link stubs (tiny real shared
# objects with the sonames) beside their per-processor kernel files in the layouts the doctor reads
# (_policy/math_libraries.json): the files are empty stand-ins, named as the libraries name them.
MATH_SONAMES = {"rocBLAS": "librocblas.so.5", "hipBLASLt": "libhipblaslt.so.1", "MIOpen": "libMIOpen.so.1"}
CU_HEX = {"gfx908": "78", "gfx90a": "68", "gfx942": "130", "gfx950": "100"}  # MIOpen names its databases so


OPENED_SONAMES = ("libhsa-runtime64.so.1", "librocdxg.so.1")  # ROCr (RUNPATH $ORIGIN, as AMD builds it), librocdxg


def math_library_stubs(directory: Path) -> Path:
    """The math libraries' sonames, ROCr and librocdxg, compiled once (the `build` fixture keeps them under
    rocm-libs/)."""
    from tests.support.native import compile_shared

    compile_shared(
        directory,
        "hsa_runtime64",
        "int hsa_init(void) { return 0; }\n",
        flags=["-Wl,-soname,libhsa-runtime64.so.1", "-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags"],
        output_name="libhsa-runtime64.so.1",
    )
    compile_shared(
        directory,
        "rocdxg",
        "int rocdxg_stub(void) { return 0; }\n",
        flags=["-Wl,-soname,librocdxg.so.1"],
        output_name="librocdxg.so.1",
    )
    for soname in MATH_SONAMES.values():
        stem = soname.split(".so")[0].removeprefix("lib")
        compile_shared(
            directory,
            stem,
            f"int {stem}_stub(void) {{ return 0; }}\n",
            flags=[f"-Wl,-soname,{soname}"],
            output_name=soname,
        )
    return directory


def add_math_libraries(
    lib_dir: Path,
    build: Path,
    gfx: Sequence[str],
    *,
    per_processor: bool = False,
    libraries: Sequence[str] = ("rocBLAS", "hipBLASLt", "MIOpen"),
) -> Path:
    """rocBLAS, hipBLASLt and MIOpen in `lib_dir` with kernel files for `gfx`. `per_processor`: rocBLAS's files in
    library/<gfx>/ as .dat.zlib (TheRock's pip wheels since April 2026); else flat (AMD's packages, TheRock's
    tarball). hipBLASLt reads library/ only, so a working install keeps its files there in both."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    for name in libraries:
        shutil.copy(build / "rocm-libs" / MATH_SONAMES[name], lib_dir / MATH_SONAMES[name])
    for g in gfx:
        if "rocBLAS" in libraries:
            folder = lib_dir / "rocblas" / "library" / (g if per_processor else "")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"TensileLibrary_lazy_{g}.dat{'.zlib' if per_processor else ''}").write_bytes(b"")
            (folder / f"Kernels.so-000-{g}.hsaco").write_bytes(b"")
        if "hipBLASLt" in libraries:
            folder = lib_dir / "hipblaslt" / "library"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"TensileLibrary_lazy_{g}.dat").write_bytes(b"")
            (folder / f"extop_{g}.co").write_bytes(b"")
        if "MIOpen" in libraries:
            folder = lib_dir.parent / "share" / "miopen" / "db"
            folder.mkdir(parents=True, exist_ok=True)
            cu = CU_HEX.get(g)
            (folder / (f"{g}{cu}.kdb" if cu else f"{g}_48.kdb")).write_bytes(b"")
    return lib_dir
