"""Hostile inputs: whatever the machine, the library or the environment holds, `import jax` neither
hangs nor dies because of us, and says at most one line; the doctor still answers in valid JSON.

Every case is a real `import jax; jax.devices()` in the 0.10.2/CPython 3.11 venv of the end-to-end
tests (our wheels from the stand-in library), with a time limit, then `jax-rocm-doctor --json`.
Files that stand in for broken hardware or libraries are test fixtures, built per case in its own
folder; HOME, XDG_CACHE_HOME and TMPDIR point into it, so nothing is written elsewhere, and a
marker in each child's environment shows that no process outlives its case.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.environment import Combo
from tests.support.native import compile_shared, fake_pjrt_library, pjrt_library_whose
from tests.support.snippets import clean_env
from tests.support.sysroots import TOPOLOGY, Gpu, make_sysroot, properties_text

COMBO = Combo("0.10.2", "3.11", "0.10.2")
CASE_SECONDS = 60  # a case that takes longer has hung
CODE = "import jax; print('PLATFORMS', sorted({d.platform for d in jax.devices()}))"


class Case(NamedTuple):
    name: str
    # (case folder, stand-in library) -> environment for the child; may build files in the folder.
    setup: Callable[[Path, Path], dict[str, str]]
    expect: str | None = None  # the finding id of the one warning line (None: any one line, or none)
    required: bool = False  # JAX_PLATFORMS=rocm: a failure is jax's error, not a warning
    waits: bool = False  # a load that never answers: one notice line on stderr says what is waited for


def gpu_root(folder: Path, gpus: int = 1) -> Path:
    return make_sysroot(folder / "root", [Gpu(drm_render_minor=128 + i) for i in range(gpus)])


def properties(root: Path, node: int = 1) -> Path:
    return root / TOPOLOGY / str(node) / "properties"


def replace_with(path: Path, kind: str) -> None:
    """Put a FIFO, socket, directory, symlink loop, dangling link or junk where a file belongs."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":  # bound by a relative name: sysroot paths exceed AF_UNIX's 108 bytes
        server, here = socket.socket(socket.AF_UNIX), os.getcwd()
        try:
            os.chdir(path.parent)
            server.bind(path.name)
        finally:
            os.chdir(here)
            server.close()  # the socket file stays
    elif kind == "directory":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere")
    elif kind == "junk":
        path.write_bytes(os.urandom(4096))
    elif kind == "huge":
        with open(path, "wb") as handle:
            handle.truncate(50 * 1024 * 1024)
    else:
        raise ValueError(kind)


def on_properties(kind: str) -> Callable[[Path, Path], dict[str, str]]:
    def setup(folder: Path, _library: Path) -> dict[str, str]:
        root = gpu_root(folder)
        replace_with(properties(root), kind)
        return {"JAX_ROCM_SYSROOT": str(root)}

    return setup


def with_properties(text: str) -> Callable[[Path, Path], dict[str, str]]:
    def setup(folder: Path, _library: Path) -> dict[str, str]:
        root = gpu_root(folder)
        properties(root).write_bytes(text.encode("utf-8", "surrogateescape"))
        return {"JAX_ROCM_SYSROOT": str(root)}

    return setup


def on_machine_path(relative: str, kind: str, gpus: int = 1, **extra: str) -> Callable[[Path, Path], dict[str, str]]:
    def setup(folder: Path, _library: Path) -> dict[str, str]:
        root = gpu_root(folder, gpus)
        replace_with(root / relative, kind)
        return {"JAX_ROCM_SYSROOT": str(root), **extra}

    return setup


def thousand_gpus(folder: Path, _library: Path) -> dict[str, str]:
    root = gpu_root(folder)
    for index in range(2, 1002):
        node = root / TOPOLOGY / str(index)
        node.mkdir(parents=True)
        (node / "properties").write_text(properties_text(Gpu(drm_render_minor=128 + index)))
    return {"JAX_ROCM_SYSROOT": str(root)}


def library_case(make: Callable[[Path, Path], Path], **extra: str) -> Callable[[Path, Path], dict[str, str]]:
    def setup(folder: Path, standin: Path) -> dict[str, str]:
        return {"JAX_ROCM_SYSROOT": str(gpu_root(folder)), "JAX_ROCM_PJRT_LIBRARY": str(make(folder, standin)), **extra}

    return setup


def elf_variant(offset: int, value: bytes) -> Callable[[Path, Path], Path]:
    """A copy of a small real PJRT-shaped library with header bytes changed (32-bit class, ARM machine)."""

    def make(folder: Path, _standin: Path) -> Path:
        library = fake_pjrt_library(folder / "lib", 0, 81)
        data = bytearray(library.read_bytes())
        data[offset : offset + len(value)] = value
        target = folder / "variant.so"
        target.write_bytes(bytes(data))
        return target

    return make


def truncated(folder: Path, standin: Path) -> Path:
    target = folder / "truncated.so"
    with open(standin, "rb") as source:
        target.write_bytes(source.read(4096))
    return target


def file_of(kind: str) -> Callable[[Path, Path], Path]:
    def make(folder: Path, _standin: Path) -> Path:
        target = folder / "lib" / "xla_rocm_plugin.so"
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_with(target, kind)
        return target

    return make


def compiled(body: str, name: str) -> Callable[[Path, Path], Path]:
    """A library whose constructor or GetPjrtApi misbehaves (test fixture)."""

    def make(folder: Path, _standin: Path) -> Path:
        return compile_shared(folder / "lib", name, "#include <stdlib.h>\n#include <signal.h>\n" + body)

    return make


def env_case(**values: str) -> Callable[[Path, Path], dict[str, str]]:
    def setup(folder: Path, _library: Path) -> dict[str, str]:
        return {"JAX_ROCM_SYSROOT": str(gpu_root(folder)), **values}

    return setup


def sysroot_is(kind: str) -> Callable[[Path, Path], dict[str, str]]:
    def setup(folder: Path, _library: Path) -> dict[str, str]:
        target = folder / "sysroot"
        if kind == "relative":
            return {"JAX_ROCM_SYSROOT": "some/relative/root"}
        replace_with(target, kind)
        return {"JAX_ROCM_SYSROOT": str(target)}

    return setup


def rocm_path_is(kind: str) -> Callable[[Path, Path], dict[str, str]]:
    def setup(folder: Path, _library: Path) -> dict[str, str]:
        root = gpu_root(folder)
        replace_with(root / "opt" / "weird-rocm", kind)
        return {"JAX_ROCM_SYSROOT": str(root), "ROCM_PATH": "/opt/weird-rocm"}

    return setup


def unwritable_cache(folder: Path, _library: Path) -> dict[str, str]:
    (folder / "cache-file").write_text("not a directory")
    return {"JAX_ROCM_SYSROOT": str(gpu_root(folder)), "XDG_CACHE_HOME": str(folder / "cache-file")}


def looping_ld_conf(folder: Path, standin: Path) -> dict[str, str]:
    """A library that cannot load (a dependency missing) makes the loader resolve it through ld.so.conf."""
    from tests.support.native import library_needing_missing_dependency

    root = gpu_root(folder)
    conf = root / "etc" / "ld.so.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text("include /etc/ld.so.conf\ninclude /etc/ld.so.conf.d/*.conf\n/opt/x\n")
    (root / "etc" / "ld.so.conf.d").mkdir()
    os.mkfifo(root / "etc" / "ld.so.conf.d" / "fifo.conf")
    library = library_needing_missing_dependency(folder / "lib")
    return {"JAX_ROCM_SYSROOT": str(root), "JAX_ROCM_PJRT_LIBRARY": str(library)}


def fanning_out_ld_conf(
    files: int, include: str = "/etc/ld.so.conf.d/*.conf"
) -> Callable[[Path, Path], dict[str, str]]:
    """Each ld.so.conf.d file includes `include` again; the library misses a dependency, so the loader reads them."""

    def setup(folder: Path, _standin: Path) -> dict[str, str]:
        from tests.support.native import library_needing_missing_dependency

        root = gpu_root(folder)
        conf_d = root / "etc" / "ld.so.conf.d"
        conf_d.mkdir(parents=True)
        (root / "etc" / "ld.so.conf").write_text(f"include {include}\n")
        for index in range(files):
            (conf_d / f"{index:03}.conf").write_text(f"include {include}\n/opt/lib{index}\n")
        library = library_needing_missing_dependency(folder / "lib")
        return {"JAX_ROCM_SYSROOT": str(root), "JAX_ROCM_PJRT_LIBRARY": str(library)}

    return setup


def table(functions: str) -> Callable[[Path, Path], Path]:
    """A PJRT_Api whose function slots all hold `functions` (NULL, a wild address, data, libc's code)."""

    def make(folder: Path, _standin: Path) -> Path:
        return fake_pjrt_library(folder / "lib", 0, 81, functions=functions, name="table")

    return make


def whose(function: str, variant: str) -> Callable[[Path, Path], Path]:
    def make(folder: Path, _standin: Path) -> Path:
        return pjrt_library_whose(folder / "lib", function, variant)

    return make


BIG = "1" + "0" * 30
LOAD_LIMIT = "5"  # seconds: the notice comes after 3
NULL_API = "void* GetPjrtApi(void) { return 0; }\n"


def dies_loading(statement: str) -> str:
    return f"__attribute__((constructor)) static void boom(void) {{ {statement} }}\n" + NULL_API


CASES = [
    # The KFD topology: FIFOs, sockets, directories, links and junk where a properties file belongs.
    Case("properties-fifo", on_properties("fifo"), "no-gpu-nodes"),
    Case("properties-socket", on_properties("socket"), "no-gpu-nodes"),
    Case("properties-directory", on_properties("directory"), "no-gpu-nodes"),
    Case("properties-symlink-loop", on_properties("loop"), "no-gpu-nodes"),
    Case("properties-dangling-link", on_properties("dangling"), "no-gpu-nodes"),
    Case("properties-binary-junk", on_properties("junk"), "no-gpu-nodes"),
    Case("properties-50-mb", on_properties("huge"), "no-gpu-nodes"),
    Case(
        "properties-not-utf8",
        with_properties("simd_count 8\ngfx_target_version 90402\x80\udcff\ndrm_render_minor 128\n"),
    ),
    Case("properties-negative", with_properties("simd_count -8\ngfx_target_version -90402\ndrm_render_minor -1\n")),
    Case("properties-10e30", with_properties(f"simd_count {BIG}\ngfx_target_version {BIG}\ndrm_render_minor {BIG}\n")),
    Case("properties-duplicate-keys", with_properties(properties_text(Gpu()) * 3 + "simd_count 0\nsimd_count 4\n")),
    Case("properties-missing-keys", with_properties("simd_count 8\n")),
    Case("properties-empty", with_properties("")),
    Case("thousand-gpu-nodes", thousand_gpus),
    Case("nodes-directory-is-a-fifo", on_machine_path(TOPOLOGY, "fifo")),
    # Device nodes and /proc.
    Case("kfd-is-a-fifo", on_machine_path("dev/kfd", "fifo"), "kfd-device-missing"),
    Case("kfd-is-a-directory", on_machine_path("dev/kfd", "directory"), "kfd-device-missing"),
    Case("render-node-is-a-socket", on_machine_path("dev/dri/renderD128", "socket"), "render-node-missing"),
    Case("proc-mounts-fifo", on_machine_path("proc/mounts", "fifo", gpus=2)),
    Case("proc-mounts-50-mb", on_machine_path("proc/mounts", "huge", gpus=2)),
    Case("proc-meminfo-fifo", on_machine_path("proc/meminfo", "fifo", gpus=2)),
    Case("ld-so-conf-includes-itself-and-a-fifo", looping_ld_conf, "library-dependency-missing"),
    # Libraries that are not, or not quite, PJRT plugins, and ones that die while loading.
    Case("library-truncated-elf", library_case(truncated), "pjrt-library-invalid"),
    Case("library-random-bytes", library_case(file_of("junk")), "pjrt-library-invalid"),
    Case("library-32-bit-elf", library_case(elf_variant(4, b"\x01")), "pjrt-library-invalid"),
    Case("library-arm-elf", library_case(elf_variant(18, (183).to_bytes(2, "little"))), "pjrt-library-invalid"),
    Case("library-dev-zero", library_case(lambda folder, standin: Path("/dev/zero")), "pjrt-library-invalid"),
    Case("library-directory", library_case(file_of("directory")), "pjrt-library-invalid"),
    Case("library-fifo", library_case(file_of("fifo")), "pjrt-library-invalid"),
    Case("library-dangling-link", library_case(file_of("dangling")), "pjrt-library-invalid"),
    Case("library-50-mb-of-zeros", library_case(file_of("huge")), "pjrt-library-invalid"),
    Case(
        "get-pjrt-api-returns-null",
        library_case(compiled("void* GetPjrtApi(void) { return 0; }\n", "null")),
        "pjrt-library-invalid",
    ),
    Case(
        "get-pjrt-api-returns-garbage",
        library_case(compiled("void* GetPjrtApi(void) { return (void*)8; }\n", "garbage")),
        "pjrt-library-crashed",
    ),
    Case(
        "library-without-get-pjrt-api",
        library_case(compiled("int other(void) { return 0; }\n", "plain")),
        "pjrt-library-invalid",
    ),
    Case(
        "constructor-aborts",
        library_case(
            compiled(
                dies_loading("abort();"),
                "abort",
            )
        ),
        "pjrt-library-crashed",
    ),
    Case(
        "constructor-segfaults",
        library_case(
            compiled(
                dies_loading("raise(SIGSEGV);"),
                "segv",
            )
        ),
        "pjrt-library-crashed",
    ),
    Case(
        "constructor-illegal-instruction",
        library_case(
            compiled(
                dies_loading("__builtin_trap();"),
                "sigill",
            )
        ),
        "pjrt-library-crashed",
    ),
    Case(
        "library-aborts-with-rocm-required",
        library_case(
            compiled(
                dies_loading("abort();"),
                "abort2",
            ),
            JAX_PLATFORMS="rocm",
        ),
        required=True,
    ),
    # PJRT_Api tables jaxlib would crash on (before: SIGSEGV inside `import jax`), plugin functions that die.
    Case("function-pointers-null", library_case(table("0")), "pjrt-library-invalid"),
    Case("function-pointers-wild", library_case(table("0x1000")), "pjrt-library-invalid"),
    Case("function-pointers-into-data", library_case(table("&the_api")), "pjrt-library-invalid"),
    Case("function-pointers-into-libc", library_case(table("&abort")), "pjrt-library-invalid"),
    Case("plugin-initialize-fails", library_case(whose("initialize", "failing")), "pjrt-library-invalid"),
    Case("plugin-initialize-aborts", library_case(whose("initialize", "aborting")), "pjrt-library-crashed"),
    Case("plugin-attributes-segfaults", library_case(whose("attributes", "segfaulting")), "pjrt-library-crashed"),
    # Loads that never answer (before: 120 s of silence): bounded, and said once on stderr.
    Case(
        "constructor-never-returns",
        library_case(
            compiled("#include <unistd.h>\n" + dies_loading("for (;;) pause();"), "hang"),
            JAX_ROCM_LOAD_TIMEOUT=LOAD_LIMIT,
        ),
        "pjrt-library-crashed",
        waits=True,
    ),
    Case(
        "get-pjrt-api-never-returns",
        library_case(
            compiled("#include <unistd.h>\nvoid* GetPjrtApi(void) { for (;;) pause(); }\n", "apihang"),
            JAX_ROCM_LOAD_TIMEOUT=LOAD_LIMIT,
        ),
        "pjrt-library-crashed",
        waits=True,
    ),
    Case(
        "plugin-initialize-never-returns",
        library_case(whose("initialize", "hanging"), JAX_ROCM_LOAD_TIMEOUT=LOAD_LIMIT),
        "pjrt-library-crashed",
        waits=True,
    ),
    Case("load-timeout-garbage", env_case(JAX_ROCM_LOAD_TIMEOUT="soon")),
    Case("load-timeout-negative-huge", env_case(JAX_ROCM_LOAD_TIMEOUT=f"-{BIG}")),
    # ld.so.conf includes that fan out (before: the doctor and `import jax` hung on 12**8 reads).
    Case("ld-so-conf-includes-fan-out", fanning_out_ld_conf(12), "library-dependency-missing"),
    Case("ld-so-conf-three-hundred-files", fanning_out_ld_conf(300), "library-dependency-missing"),
    Case("ld-so-conf-include-every-path", fanning_out_ld_conf(3, "/*/*/*/*/*"), "library-dependency-missing"),
    # Every variable the loader reads, with garbage in it.
    Case(
        "pjrt-library-relative",
        env_case(JAX_ROCM_PJRT_LIBRARY="lib/xla_rocm_plugin.so"),
        "environment-variable-invalid",
    ),
    Case("sysroot-relative", sysroot_is("relative"), "environment-variable-invalid"),
    Case("sysroot-is-a-file", sysroot_is("junk"), "environment-variable-invalid"),
    Case("sysroot-is-a-fifo", sysroot_is("fifo"), "environment-variable-invalid"),
    Case("sysroot-dangling-link", sysroot_is("dangling"), "environment-variable-invalid"),
    Case("rocm-path-is-a-fifo", rocm_path_is("fifo")),
    Case("rocm-path-is-a-file", rocm_path_is("junk")),
    Case("hip-visible-devices-garbage", env_case(HIP_VISIBLE_DEVICES="\x7f,,-1,GPU-?,0x10")),
    Case("rocr-visible-devices-huge", env_case(ROCR_VISIBLE_DEVICES=f"-1,{BIG}")),
    Case("cuda-visible-devices-junk", env_case(CUDA_VISIBLE_DEVICES="all;rm -rf /")),
    Case("gpu-device-ordinal-junk", env_case(GPU_DEVICE_ORDINAL="NaN")),
    Case("hsa-override-garbage", env_case(HSA_OVERRIDE_GFX_VERSION="x.y.z")),
    Case("hsa-override-huge", env_case(HSA_OVERRIDE_GFX_VERSION=f"{BIG}.{BIG}.{BIG}")),
    Case("mem-fraction-negative-huge", env_case(XLA_PYTHON_CLIENT_MEM_FRACTION=f"-{BIG}"), "xla-client-env-invalid"),
    Case("preallocate-maybe", env_case(XLA_PYTHON_CLIENT_PREALLOCATE="maybe"), "xla-client-env-invalid"),
    Case("allocator-junk", env_case(XLA_PYTHON_CLIENT_ALLOCATOR="junk\u00e9"), "xla-client-env-invalid"),
    # Bytes that are not UTF-8 (surrogate escapes become raw bytes in the child's environment).
    Case("visible-devices-not-utf8", env_case(HIP_VISIBLE_DEVICES="0,\udcff\udcfe")),
    Case("rocm-path-not-utf8", env_case(ROCM_PATH="/opt/\udcffrocm"), "environment-variable-invalid"),
    Case("pjrt-library-not-utf8", env_case(JAX_ROCM_PJRT_LIBRARY="/opt/\udcff/lib.so"), "pjrt-library-invalid"),
    Case("collective-mem-junk", env_case(XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB=BIG)),
    Case("ld-library-path-junk", env_case(LD_LIBRARY_PATH=":relative:/nonexistent::/dev/null")),
    Case("cache-home-is-a-file", unwritable_cache),
    Case(
        "no-driver-rocm-required",
        lambda folder, _lib: {"JAX_ROCM_SYSROOT": str(folder), "JAX_PLATFORMS": "rocm"},
        required=True,
    ),
]


def live_marked(marker: str) -> list[int]:
    """Processes whose environment carries this case's marker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if f"JAX_ROCM_CORPUS_MARK={marker}".encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def case_env(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    marker = uuid.uuid4().hex
    folder = tmp_path / "case"
    folder.mkdir()
    for name in ("home", "cache", "tmp"):
        (tmp_path / name).mkdir()
    base = {
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TMPDIR": str(tmp_path / "tmp"),
        "JAX_ROCM_CORPUS_MARK": marker,
    }
    yield folder, base
    assert live_marked(marker) == [], "a process of this case outlived it"
    assert list((tmp_path / "tmp").iterdir()) == [], "temporary files were left behind"
    # Stand-in files for hardware are removed with the case (chmod back what a test made unreadable).
    for path in folder.rglob("*"):
        if not path.is_symlink() and stat.S_ISDIR(path.lstat().st_mode):
            path.chmod(0o755)


def run_limited(command: list[str], env: dict[str, str], folder: Path, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command, capture_output=True, text=True, env=env, cwd=folder, timeout=CASE_SECONDS, errors="replace"
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} hung for {CASE_SECONDS} s")


# The suite runs one case of each class (the same reader meeting the same kind of input) and every case that once
# failed; these others of a class run with --sweeps (benchmarks/README.md, "Sweeps").
SWEPT = {
    # Not a regular file where the KFD properties file belongs: the FIFO stays in the suite.
    "properties-socket",
    "properties-directory",
    "properties-symlink-loop",
    "properties-dangling-link",
    # Numbers out of range (10e30 stays) and keys missing (the empty file stays).
    "properties-negative",
    "properties-missing-keys",
    # A device node or /proc file of the wrong kind: a FIFO each stays.
    "kfd-is-a-directory",
    "proc-meminfo-fifo",
    # Not an x86-64 ELF library (truncated, 32-bit, /dev/zero, a FIFO and 50 MB of zeros stay).
    "library-random-bytes",
    "library-arm-elf",
    "library-directory",
    "library-dangling-link",
    # A constructor killed by a signal (abort stays).
    "constructor-segfaults",
    "constructor-illegal-instruction",
    # A load that never answers, in GetPjrtApi or in PJRT_Plugin_Initialize: the same child deadline as the
    # constructor's, which stays.
    "get-pjrt-api-never-returns",
    "plugin-initialize-never-returns",
    # A variable's garbage of a kind already in the suite.
    "load-timeout-negative-huge",
    "sysroot-is-a-file",
    "sysroot-dangling-link",
    "rocm-path-is-a-file",
    "hsa-override-huge",
    # ld.so.conf that fans out: 12 includes of 12 (once hung) and every path stay.
    "ld-so-conf-three-hundred-files",
}
CASE_PARAMS = [pytest.param(c, id=c.name, marks=[pytest.mark.sweep] if c.name in SWEPT else []) for c in CASES]


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_import_jax_survives(
    case: Case,
    case_env: tuple[Path, dict[str, str]],
    e2e_venv: Callable[[Combo], Path],
    standin_library: Path,
) -> None:
    python = e2e_venv(COMBO)
    folder, base = case_env
    env = clean_env(**{**base, **case.setup(folder, standin_library)})
    if not case.required:
        env.pop("JAX_PLATFORMS", None)
    done = run_limited([str(python), "-c", CODE], env, folder, "`import jax`")
    assert "Traceback" not in done.stderr or case.required, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("ROCm backend")]
    notices = [line for line in done.stderr.splitlines() if "still loading" in line]
    assert len(notices) == (1 if case.waits else 0), done.stderr
    if case.required:
        assert done.returncode != 0 and "Unable to initialize backend 'rocm'" in done.stderr, done.stderr
        assert "[" in done.stderr.strip().splitlines()[-1]  # the cause with its finding id
    else:
        assert done.returncode == 0, done.stderr
        assert "PLATFORMS" in done.stdout
        assert len(warnings) <= 1, warnings
        assert all(line.rstrip().endswith("]") for line in warnings), warnings
    if case.expect is not None:
        text = warnings[0] if warnings else done.stderr
        assert f"[{case.expect}]" in text, done.stderr

    doctor = python.parent / "jax-rocm-doctor"
    report = run_limited([str(doctor), "--json"], env, folder, "the doctor")
    assert report.returncode in (0, 1, 2) and "Traceback" not in report.stderr, report.stderr
    if report.returncode != 2:
        parsed = json.loads(report.stdout)
        assert {"ok", "findings"} <= set(parsed)
        if case.expect is not None and not case.required:
            assert case.expect in {f["id"] for f in parsed["findings"]}, parsed["findings"]


def test_there_are_at_least_forty_cases() -> None:
    assert len(CASES) >= 40 and len({c.name for c in CASES}) == len(CASES)
    assert {c.name for c in CASES} >= SWEPT and len(CASES) - len(SWEPT) >= 40  # the suite's share too


# A damaged install: files of our package corrupt or missing (a half-written pip install, a full disk).
# Before: `import jax` itself died with a traceback (jaxlib imports our package and catches only ImportError).
DAMAGES: dict[str, tuple[str, bytes | str | None]] = {
    "version-syntax-error": ("version.py", b"JAX_RELEASE = '0.10.2\n"),
    "version-empty": ("version.py", b""),
    "version-binary-junk": ("version.py", bytes(range(256)) * 4),
    "version-half-written": ("version.py", "half"),
    "version-missing": ("version.py", None),
    "version-is-a-directory": ("version.py", "directory"),
    "catalog-syntax-error": ("_findings.py", b"def broken(:\n"),
    "loader-raises-at-import": ("_loader/register.py", b"raise RuntimeError('disk full while installing')\n"),
    "settings-not-utf8": ("_settings.py", b"# \xff\xfe\nimport os\n"),
}


def damaged_copy(folder: Path, python: Path, file: str, damage: bytes | str | None) -> Path:
    """Our installed packages copied beside the venv (first on PYTHONPATH), with one file damaged, plus an
    extension stub (as build.py writes it) so jaxlib's import of our modules runs too."""
    from jax_rocm7_build.extension_modules import public_stub_source

    where = subprocess.run(
        [
            str(python),
            "-c",
            "import jax_rocm7_plugin, jax_plugins.rocm7 as e; print(jax_rocm7_plugin.__path__[0]); "
            "print(e.__path__[0])",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
    ).stdout.split()
    site = folder / "site"
    package = site / "jax_rocm7_plugin"
    shutil.copytree(where[0], package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(where[1], site / "jax_plugins" / "rocm7", ignore=shutil.ignore_patterns("__pycache__"))
    (package / "_solver.py").write_text(public_stub_source("_solver"))
    target = package / file
    if damage is None:
        target.unlink()
    elif damage == "directory":
        target.unlink()
        target.mkdir()
    elif damage == "half":
        text = target.read_bytes()
        target.write_bytes(text[: text.index(b"__version__") + 16])  # cut inside the last assignment
    else:
        assert isinstance(damage, bytes)
        target.write_bytes(damage)
    return site


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_install_is_one_line_naming_the_file(
    damage: str, case_env: tuple[Path, dict[str, str]], e2e_venv: Callable[[Combo], Path]
) -> None:
    python = e2e_venv(COMBO)
    folder, base = case_env
    file, how = DAMAGES[damage]
    site = damaged_copy(folder, python, file, how)
    # A machine with a GPU, so the extension stub goes as far as it can before it meets the damage.
    env = clean_env(**base, PYTHONPATH=str(site), JAX_ROCM_SYSROOT=str(gpu_root(folder)))
    done = run_limited([str(python), "-c", CODE], env, folder, "`import jax`")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "PLATFORMS ['cpu']" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if line.startswith("ROCm backend")]
    assert len(warnings) == 1 and warnings[0].endswith("[plugin-install-damaged]"), done.stderr
    assert (file.removesuffix(".py") in warnings[0]) and "pip install --force-reinstall" in warnings[0]

    report = run_limited([str(python.parent / "jax-rocm-doctor"), "--json"], env, folder, "the doctor")
    assert "Traceback" not in report.stderr, report.stderr
    if file in ("_loader/register.py",):  # the doctor does not import the loader: it reports as usual
        assert report.returncode in (0, 1)
        return
    assert report.returncode == 1, report.stdout
    (finding,) = json.loads(report.stdout)["findings"]
    assert finding["id"] == "plugin-install-damaged" and file.removesuffix(".py") in finding["summary"]
