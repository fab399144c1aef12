"""The real upstream extension modules through our wheels, on a machine without ROCm.

For 0.10.2/CPython 3.11 and 0.12.0/3.12: the modules of the published jax-rocm7-plugin wheel are
re-packaged by build.py (`--extension-modules released`) beside our stand-in library, installed
with that release's jax/jaxlib, and loaded with link stubs for the ROCm sonames they NEED
(tests/support/stubs.py: generated here, never shipped). Then the real published PJRT library of the
release, with stubs for its sonames too, goes through our loader.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from jax_rocm7_plugin._policy import releases
from tests.support.environment import Combo, combo_venv, interpreter_for
from tests.support.snippets import DEVICES, JIT_ON_ROCM, clean_env, our_warnings, run_python
from tests.support.stubs import make_link_stubs
from tests.support.sysroots import Gpu, make_sysroot
from tests.support.wheels import build

COMBOS = [Combo("0.10.2", "3.11", "0.10.2"), Combo("0.12.0", "3.12", "0.12.0")]


class ModulesEnv(NamedTuple):
    python: Path
    stubs: Path  # link stubs for the modules' ROCm sonames
    native: Path  # the installed _native/ folder
    combo: Combo


@pytest.fixture(scope="session")
def modules_envs(
    tmp_path_factory: pytest.TempPathFactory, standin_wheels: Callable[[str, str], dict[str, Path]]
) -> Callable[[Combo], ModulesEnv]:
    """A venv with the published extension modules in our plugin wheel, and link stubs for their ROCm sonames, once
    per session for every worker (tests/support/shared.py; only read)."""
    from tests.support.shared import once, shared_root

    root = shared_root(tmp_path_factory)

    def make(combo: Combo, out: Path) -> None:
        common = ("--release", combo.release, "--python-version", combo.python)
        (plugin,) = build(out / "dist", None, *common, "--only", "plugin", "--extension-modules", "released")
        python = combo_venv(combo, out / "env", plugin, standin_wheels(combo.release, combo.python)["pjrt"])
        where = run_python(python, "import jax_rocm7_plugin._machine.native_modules as m; print(m.native_dir())")
        native = Path(where.stdout.strip())
        make_link_stubs(sorted(native.glob("*.so")), out / "stubs", interpreter=interpreter_for(combo))
        (out / "native").write_text(str(native))

    def env_for(combo: Combo) -> ModulesEnv:
        out = once(root, f"modules-{combo.id}", lambda folder: make(combo, folder))
        return ModulesEnv(out / "env" / "bin" / "python", out / "stubs", Path((out / "native").read_text()), combo)

    return env_for


@pytest.fixture(params=[pytest.param(c, id=c.id) for c in COMBOS])
def env(request: pytest.FixtureRequest, modules_envs: Callable[[Combo], ModulesEnv]) -> ModulesEnv:
    return modules_envs(request.param)


REGISTRATIONS = """
import json, jax
import jaxlib.gpu_solver as solver, jaxlib.gpu_sparse as sparse, jaxlib.gpu_prng as prng, jaxlib.gpu_linalg as linalg
counts = {m.__name__.split(".")[-1]: len(m.registrations().get("ROCM", [])) for m in (solver, sparse, prng, linalg)}
print(json.dumps(counts))
"""

AFTER_THE_LOADER = (
    JIT_ON_ROCM
    + """
from jaxlib import xla_client
import jax.experimental.sparse
print("QUEUED", len(getattr(xla_client, "_custom_callback", {}).get("ROCM", [])), "SPARSE OK")
"""
)


def test_every_module_loads_and_jaxlib_registers_its_targets(env: ModulesEnv, tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "machine")
    done = run_python(env.python, REGISTRATIONS, JAX_ROCM_SYSROOT=str(root), LD_LIBRARY_PATH=str(env.stubs))
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout.splitlines()[-1])
    assert all(counts[name] > 0 for name in ("gpu_solver", "gpu_sparse", "gpu_prng", "gpu_linalg")), counts
    names = sorted(p.stem for p in env.native.glob("*.so"))
    modules = ", ".join(f"'{n}'" for n in names)
    code = f"import importlib; [importlib.import_module('jax_rocm7_plugin.' + n) for n in [{modules}]]; print('ALL')"
    everything = run_python(env.python, code, JAX_ROCM_SYSROOT=str(root), LD_LIBRARY_PATH=str(env.stubs))
    assert everything.stdout.strip() == "ALL", everything.stderr
    assert len(names) == 8


def test_a_library_without_custom_calls_costs_one_warning_and_poisons_nothing(env: ModulesEnv, tmp_path: Path) -> None:
    """The stand-in has no GPU custom-call extension: the backend runs, custom calls are named as lost."""
    root = make_sysroot(tmp_path / "machine")
    done = run_python(env.python, AFTER_THE_LOADER, JAX_ROCM_SYSROOT=str(root), LD_LIBRARY_PATH=str(env.stubs))
    assert done.returncode == 0, done.stderr
    assert "RESULT_ON True" in done.stdout and "SPARSE OK" in done.stdout
    (warning,) = our_warnings(done.stderr)
    assert "ROCm custom calls unavailable: the PJRT library offers no GPU custom-call extension" in warning
    assert "[custom-calls-unavailable]" in warning
    assert "falls back to CPU" not in warning and "loader-internal-error" not in warning


def test_without_rocm_libraries_the_backend_still_runs_and_the_doctor_names_what_is_lost(
    env: ModulesEnv, tmp_path: Path
) -> None:
    root = make_sysroot(tmp_path / "machine")
    done = run_python(env.python, AFTER_THE_LOADER, JAX_ROCM_SYSROOT=str(root))
    assert done.returncode == 0, done.stderr
    assert "RESULT_ON True" in done.stdout and "SPARSE OK" in done.stdout
    assert our_warnings(done.stderr) == []  # missing ROCm libraries are named at debug level only
    doctor = subprocess.run(
        [str(env.python.parent / "jax-rocm-doctor"), "--json"],
        capture_output=True,
        text=True,
        env=clean_env(JAX_ROCM_SYSROOT=str(root)),
    )
    report = json.loads(doctor.stdout)
    lost = {f["summary"] for f in report["findings"] if f["id"] == "extension-module-unavailable"}
    assert any(s.startswith("GPU linear algebra unavailable: ") and "librocsolver.so.0" in s for s in lost), lost
    assert "the MIOpen RNN unavailable: libMIOpen.so.1 not found" in lost
    modules = {m["module"]: m for m in report["extensions"]}
    assert set(modules) == {p.stem for p in env.native.glob("*.so")}
    row = releases.get(env.combo.release)
    assert row is not None
    published = row.plugin["cp" + env.combo.python.replace(".", "")]
    assert {m["source"]["wheel"] for m in modules.values()} == {published.filename}


def test_on_a_machine_without_a_gpu_the_modules_are_not_even_opened(env: ModulesEnv, tmp_path: Path) -> None:
    code = DEVICES + "\ntry:\n    import jax_rocm7_plugin._solver\nexcept ImportError as e:\n    print('REFUSED', e)\n"
    done = run_python(env.python, code, JAX_ROCM_SYSROOT=str(tmp_path), LD_LIBRARY_PATH=str(env.stubs))
    assert "PLATFORMS ['cpu']" in done.stdout
    assert "REFUSED jax_rocm7_plugin._solver: no usable AMD GPU on this machine" in done.stdout
    (warning,) = our_warnings(done.stderr)
    assert "[amdgpu-driver-missing]" in warning


def test_on_a_machine_without_a_gpu_the_doctor_fits_one_screen(env: ModulesEnv, tmp_path: Path) -> None:
    """The verdict and the first error on top; the modules' shared cause once; their details on request."""
    doctor = env.python.parent / "jax-rocm-doctor"
    plain = clean_env(JAX_ROCM_SYSROOT=str(tmp_path))
    text = subprocess.run([str(doctor)], capture_output=True, text=True, env=plain).stdout
    lines = text.splitlines()
    assert lines[0] == "ROCm backend: unavailable; jax will use CPU"
    assert lines[1].startswith("  [error] amdgpu-driver-missing:"), text
    assert len(lines) <= 30 and max(map(len, lines)) <= 400, text
    assert text.count("extension-module-unavailable") <= 1 and "  extension: " not in text, text
    verbose = subprocess.run([str(doctor), "--verbose"], capture_output=True, text=True, env=plain).stdout
    assert verbose.count("  extension: ") == len(list(env.native.glob("*.so"))), verbose
    report = json.loads(subprocess.run([str(doctor), "--json"], capture_output=True, text=True, env=plain).stdout)
    lost = [f["id"] for f in report["findings"]].count("extension-module-unavailable")  # one per module, as before
    assert lost >= 2 and text.count("      - ") >= lost, text  # in the text: one entry listing them


def test_the_published_pair_on_a_machine_without_a_gpu_reads_short(
    env: ModulesEnv, published_library: Path, tmp_path: Path
) -> None:
    """The released library NEEDs a dozen ROCm libraries and the modules eight more: with no ROCm at all they are
    consequences of one cause, one line under rocm-not-found; --json keeps each finding."""
    doctor = env.python.parent / "jax-rocm-doctor"
    plain = clean_env(JAX_ROCM_SYSROOT=str(tmp_path), JAX_ROCM_PJRT_LIBRARY=str(published_library))
    text = subprocess.run([str(doctor)], capture_output=True, text=True, env=plain).stdout
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) <= 30, text
    assert "library-dependency-missing" not in text and "also missing for this reason: " in text, text
    report = json.loads(subprocess.run([str(doctor), "--json"], capture_output=True, text=True, env=plain).stdout)
    ids = [f["id"] for f in report["findings"]]
    assert "rocm-not-found" in ids and "library-dependency-missing" in ids


@pytest.fixture
def published_library(env: ModulesEnv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's published xla_rocm_plugin.so, from the wheel `released` builds use: downloaded into their
    cache and sha256-checked against the release table where it is not there yet (no wheel is built). Inflated
    once per release for every worker (tests/support/shared.py; only read)."""
    from jax_rocm7_build.downloads import verified_download
    from jax_rocm7_build.progress import Progress

    from jax_rocm7_plugin._names import PJRT_DISTRIBUTION
    from tests.support.shared import once, shared_root

    row = releases.get(env.combo.release)
    assert row is not None

    def inflate(folder: Path) -> None:
        wheel = verified_download(row.published_pjrt, PJRT_DISTRIBUTION, Progress())
        with zipfile.ZipFile(wheel) as archive:
            member = next(n for n in archive.namelist() if n.endswith("/xla_rocm_plugin.so"))
            with archive.open(member) as source, open(folder / "xla_rocm_plugin.so", "wb") as sink:
                while chunk := source.read(16 << 20):
                    sink.write(chunk)

    return once(shared_root(tmp_path_factory), f"published-{row.release}", inflate) / "xla_rocm_plugin.so"


def test_the_published_library_goes_through_our_loader(
    env: ModulesEnv, published_library: Path, tmp_path: Path
) -> None:
    """With stubs whose hipInit answers 100 (hipErrorNoDevice): our loader reads the real library's
    PJRT C API version and registers it with its extensions, no ROCM target stays queued, and
    JAX_PLATFORMS=rocm ends in jax's one sentence naming the runtime's no-device answer."""
    interpreter = interpreter_for(env.combo)
    stubs = make_link_stubs(
        [published_library, *sorted(env.native.glob("*.so"))],
        tmp_path / "stubs",
        interpreter=interpreter,
        returns={"hipInit": 100},
        strings={"hipGetErrorName": "hipErrorNoDevice", "hipGetErrorString": "no ROCm-capable device is detected"},
    )
    root = make_sysroot(tmp_path / "machine")
    settings = {
        "JAX_ROCM_SYSROOT": str(root),
        "LD_LIBRARY_PATH": str(stubs),
        "JAX_ROCM_PJRT_LIBRARY": str(published_library),
    }
    code = """
import logging; logging.basicConfig(level=logging.DEBUG, format="LOG %(name)s %(message)s")
import jax
try:
    jax.devices()
except RuntimeError as error:
    print("DEVICES FAILED", error)
from jaxlib import xla_client
import jax.experimental.sparse
print("QUEUED", len(getattr(xla_client, "_custom_callback", {}).get("ROCM", [])), "SPARSE OK")
"""
    done = run_python(env.python, code, **settings)
    assert "QUEUED 0 SPARSE OK" in done.stdout, done.stdout + done.stderr
    registered = [line for line in done.stderr.splitlines() if "LOG jax_rocm7_plugin registered backend 'rocm'" in line]
    assert len(registered) == 1 and "PJRT C API 0." in registered[0]
    assert "custom-calls-unavailable" not in done.stderr
    required = run_python(env.python, "import jax; jax.devices()", JAX_PLATFORMS="rocm", **settings)
    assert required.returncode != 0
    last = required.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: Unable to initialize backend 'rocm'") and "No visible GPU devices" in last
    assert "HIP_ERROR_NoDevice" in required.stderr  # XLA's words for the stubbed hipInit's 100


def test_doctor_binary_reads_the_published_modules(env: ModulesEnv, tmp_path: Path) -> None:
    """The modules with GPU kernels (offload bundles) run on a gfx942; none has code for a gfx1170."""
    root = make_sysroot(tmp_path / "machine", [Gpu(90402, drm_render_minor=128), Gpu(110700, drm_render_minor=129)])
    done = subprocess.run(
        [str(env.python), "-m", "jax_rocm7_plugin", "doctor", "--sysroot", str(root), "--binary", str(env.native)],
        capture_output=True, text=True, env=clean_env(), cwd="/", timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = {Path(line.split(":", 1)[0]).name: line for line in done.stdout.splitlines()[1:]}
    assert {"_solver.so", "_linalg.so", "_prng.so", "rocm_plugin_extension.so"} <= set(lines)
    for module in ("_solver.so", "_linalg.so", "_prng.so"):
        assert ": offload bundles for " in lines[module]
        assert (
            "NOT on KFD node 2 (no code for gfx1170" in lines[module] and "runs on KFD node 1: gfx942" in lines[module]
        )
    assert lines["rocm_plugin_extension.so"].endswith(": no GPU code")
