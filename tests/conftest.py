from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.native import fake_hip_runtime, pjrt_library_with_code_for
from tests.sysroots import LIBRARY_TARGETS, bundle_for

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# Load verdicts (jax_rocm7_plugin._binary.load_test) that tests cause go to a folder of this test
# process, inherited by every child it starts, and removed at exit: never the user's ~/.cache.
_VERDICT_CACHE = tempfile.mkdtemp(prefix="jax-rocm7-test-cache-")
os.environ["XDG_CACHE_HOME"] = _VERDICT_CACHE
atexit.register(shutil.rmtree, _VERDICT_CACHE, True)


def _real_amd_gpu() -> bool:
    from jax_rocm7_plugin._machine.devices import probe_machine

    return bool(probe_machine(Path("/")).usable_gpus)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _real_amd_gpu():
        return
    skip = pytest.mark.skip(reason="needs an AMD GPU with ROCm 7 (no usable KFD GPU on this machine)")
    for item in items:
        if "rocm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def standin_library() -> Path:
    """OpenXLA's CPU PJRT plugin from PyPI (xla-cpu-pjrt==0.0.1): a real PJRT C-API library."""
    import xla_plugins.xla_cpu_pjrt as standin

    path = Path(standin.__file__).parent / "xla_cpu_pjrt.so"
    assert path.is_file(), f"xla-cpu-pjrt is installed without its library at {path}"
    return path


DEBIAN_HIP = Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")
UPSTREAM_RELEASE = "0.10.0"
TEST_CACHE = Path(os.environ.get("JAX_ROCM_TEST_CACHE", Path.home() / ".cache" / "jax-rocm7-tests"))


def require(condition: bool, what: str) -> None:
    """Skip on a developer machine without `what`; fail in CI, whose script installs it."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing; ci/run_tests.sh installs it")
    pytest.skip(f"{what} is not installed")


@pytest.fixture(scope="session")
def debian_hip_runtime() -> Path:
    """Debian's libamdhip64-5 (HIP 5.2): a real HIP runtime that loads here and finds no device."""
    require(DEBIAN_HIP.exists(), "Debian's libamdhip64-5 (apt-get install libamdhip64-5)")
    return DEBIAN_HIP


@pytest.fixture(scope="session")
def upstream_library() -> Path:
    """xla_rocm_plugin.so of the published jax-rocm7-pjrt 0.10.0 (137 MB wheel), cached across runs."""
    target = TEST_CACHE / f"jax-rocm7-pjrt-{UPSTREAM_RELEASE}" / "xla_rocm_plugin.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "-d",
            str(target.parent),
            f"jax-rocm7-pjrt=={UPSTREAM_RELEASE}",
        ],
        capture_output=True,
        text=True,
    )
    wheels = sorted(target.parent.glob("jax_rocm7_pjrt-*.whl"))
    require(
        done.returncode == 0 and bool(wheels), f"jax-rocm7-pjrt=={UPSTREAM_RELEASE} from PyPI ({done.stderr[-300:]})"
    )
    with zipfile.ZipFile(wheels[0]) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith("/xla_rocm_plugin.so"))
        partial = target.with_suffix(".partial")
        with wheel.open(member) as source, open(partial, "wb") as sink:
            shutil.copyfileobj(source, sink, 16 * 1024 * 1024)
    partial.rename(target)
    wheels[0].unlink()
    return target


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake HIP 7 runtime and a PJRT-shaped library that needs it and carries LIBRARY_TARGETS."""
    directory = tmp_path_factory.mktemp("gpu-build")
    hip = fake_hip_runtime(directory / "hip", devices=1)
    pjrt_library_with_code_for(directory / "lib", bundle_for(LIBRARY_TARGETS), hip_dir=hip.parent)
    return directory


class Combo(NamedTuple):
    """One cell of the end-to-end matrix: a release of the table, a CPython, and the jax version."""

    release: str
    python: str
    jax: str

    @property
    def id(self) -> str:
        return f"jax{self.jax}-py{self.python}"


@pytest.fixture(scope="session")
def standin_wheels(
    tmp_path_factory: pytest.TempPathFactory, standin_library: Path
) -> Callable[[str, str], dict[str, Path]]:
    """Our pair built from the stand-in library for a release (and its pjrt .post1), once per release."""
    from tests.wheels import build

    built: dict[str, dict[str, Path]] = {}

    def wheels_for(release: str, python: str) -> dict[str, Path]:
        if release not in built:
            out = tmp_path_factory.mktemp(f"dist-{release}")
            common = ("--skip-check", "--release", release, "--python-version", python)  # a CPU plugin: not ROCm
            pjrt, plugin = build(out, standin_library, *common)
            (post1,) = build(out, standin_library, *common, "--only", "pjrt", "--post", "1")
            built[release] = {"pjrt": pjrt, "plugin": plugin, "pjrt-post1": post1}
        return built[release]

    return wheels_for


def interpreter_for(combo: Combo) -> Path:
    """The combo's CPython; skipped without it here, a failure in CI."""
    from tests.e2e import find_interpreter

    interpreter = find_interpreter(combo.python)
    require(interpreter is not None, f"CPython {combo.python} (on PATH or under pyenv)")
    assert interpreter is not None
    return interpreter


def combo_venv(combo: Combo, directory: Path, plugin: Path, pjrt: Path) -> Path:
    """A venv of the combo's CPython with its jax/jaxlib and the given wheel pair."""
    from tests.e2e import make_venv, pip

    python = make_venv(directory, interpreter_for(combo))
    # Resolution through the plugin's metadata: its jax-rocm7-pjrt==X.Y.Z.* pin takes our local pjrt wheel.
    pip(python, f"jax=={combo.jax}", f"jaxlib=={combo.release}", str(plugin), str(pjrt))
    return python


@pytest.fixture(scope="session")
def e2e_venv(
    tmp_path_factory: pytest.TempPathFactory, standin_wheels: Callable[[str, str], dict[str, Path]]
) -> Callable[[Combo], Path]:
    """A venv of the combo's CPython with its jax/jaxlib and our pair, once per combo (and xdist worker)."""
    made: dict[Combo, Path] = {}

    def venv_for(combo: Combo) -> Path:
        if combo not in made:
            wheels = standin_wheels(combo.release, combo.python)
            directory = tmp_path_factory.mktemp(f"venv-{combo.id}") / "env"
            made[combo] = combo_venv(combo, directory, wheels["plugin"], wheels["pjrt"])
        return made[combo]

    return venv_for
