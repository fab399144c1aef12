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

import pytest

from tests.support.browser import browser  # noqa: F401 - the pages' tests' Chromium (a session fixture)
from tests.support.environment import DEBIAN_HIP, TEST_CACHE, UPSTREAM_RELEASE, Combo, combo_venv, require
from tests.support.native import fake_hip_runtime, pjrt_library_with_code_for
from tests.support.sysroots import LIBRARY_TARGETS, PUBLISHED_TARGETS, bundle_for, math_library_stubs

# Load verdicts (jax_rocm7_plugin._binary.load_test) that tests cause go to a folder of this test
# process, inherited by every child it starts, and removed at exit: never the user's ~/.cache.
_VERDICT_CACHE = tempfile.mkdtemp(prefix="jax-rocm7-test-cache-")
os.environ["XDG_CACHE_HOME"] = _VERDICT_CACHE
atexit.register(shutil.rmtree, _VERDICT_CACHE, True)

# What the code under test writes to the temporary folder (hang reports, scratch files of children) goes to one
# folder of the run, removed at exit: a run leaves nothing in /tmp. It is made by the first test process (the
# xdist controller) and its workers use it, with /tmp's mode: the munge daemon and the unprivileged users of the
# tests write there too, and socket paths under it stay short. pytest's own tmp_path stays where it was, kept for
# a look after a failure.
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
_INHERITED = os.environ.get("ROCM7_TESTS_SCRATCH")
if not _INHERITED or os.environ.get("TMPDIR") != _INHERITED or not os.path.isdir(_INHERITED):
    _SCRATCH = tempfile.mkdtemp(prefix="rocm7-tests-")
    os.chmod(_SCRATCH, 0o1777)
    os.environ["TMPDIR"] = os.environ["ROCM7_TESTS_SCRATCH"] = _SCRATCH
    atexit.register(shutil.rmtree, _SCRATCH, True)
tempfile.tempdir = os.environ["TMPDIR"]


def _real_amd_gpu() -> bool:
    from jax_rocm7_plugin._machine.devices import probe_machine

    return bool(probe_machine(Path("/")).usable_gpus)


# The folder decides a test's kind: unit (pure functions), integration (sysroots, real libraries,
# child processes), e2e (wheels and venvs), hardware (an AMD GPU).
_FOLDER_MARKERS = {"e2e": "slow", "hardware": "rocm"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--sweeps",
        action="store_true",
        help="also run the rest of each sweep (tests marked `sweep`); the suite runs one case per class of each",
    )
    parser.addoption(
        "--snapshots",
        metavar="DIR",
        type=Path,
        default=None,
        help="a snapshot store (a bare git repository per source, <owner>+<name>/...): also check that the generated "
        "variable table is what the pinned sources give (build/README.md, `variables`)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        folder = item.path.resolve().relative_to(tests_dir).parts[0]
        marker = _FOLDER_MARKERS.get(folder)
        if marker is not None:
            item.add_marker(marker)
    if not config.getoption("--sweeps"):
        # Deselected, not skipped: the suite keeps one case per class (and every case that once failed) and the
        # rest runs with --sweeps (benchmarks/README.md, "Sweeps").
        swept = [item for item in items if "sweep" in item.keywords]
        if swept:
            config.hook.pytest_deselected(items=swept)
            items[:] = [item for item in items if "sweep" not in item.keywords]
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
    import fcntl

    # xdist's workers each run this session fixture: one downloads, the others wait for it (they raced on one
    # .partial file on a machine whose cache was empty).
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _download_upstream_library(target)
    return target


def _download_upstream_library(target: Path) -> None:
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


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake HIP 7 runtime and a PJRT-shaped library that needs it and carries LIBRARY_TARGETS."""
    directory = tmp_path_factory.mktemp("gpu-build")
    hip = fake_hip_runtime(directory / "hip", devices=1)
    pjrt_library_with_code_for(directory / "lib", bundle_for(LIBRARY_TARGETS), hip_dir=hip.parent)
    math_library_stubs(directory / "rocm-libs")
    # The healthy fleet's library: code objects for the processors the published 0.12.0 library carries.
    pjrt_library_with_code_for(directory / "fleet-lib", bundle_for(list(PUBLISHED_TARGETS)), hip_dir=hip.parent)
    return directory


@pytest.fixture(scope="session")
def standin_wheels(
    tmp_path_factory: pytest.TempPathFactory, standin_library: Path
) -> Callable[[str, str], dict[str, Path]]:
    """Our pair built from the stand-in library for a release, once per session for every worker
    (tests/support/shared.py); `pjrt-post1`, its pjrt .post1, only where a test asks for it (a 250 MB library
    compressed once more)."""
    from tests.support.shared import once, shared_root
    from tests.support.wheels import build

    root = shared_root(tmp_path_factory)
    built: dict[str, _Wheels] = {}

    def wheels_for(release: str, python: str) -> dict[str, Path]:
        if release not in built:
            common = ("--skip-check", "--release", release, "--python-version", python)  # a CPU plugin: not ROCm
            out = once(root, f"dist-{release}", lambda folder: build(folder, standin_library, *common))
            (pjrt,) = out.glob(f"jax_rocm7_pjrt-{release}-*.whl")
            (plugin,) = out.glob(f"jax_rocm7_plugin-{release}-*.whl")

            def post1() -> Path:
                made = once(
                    root,
                    f"dist-{release}-post1",
                    lambda folder: build(folder, standin_library, *common, "--only", "pjrt", "--post", "1"),
                )
                (wheel,) = made.glob("*.whl")
                return wheel

            built[release] = _Wheels({"pjrt": pjrt, "plugin": plugin}, post1)
        return built[release]

    return wheels_for


class _Wheels(dict[str, Path]):
    """Built wheels by name; "pjrt-post1" is built on first use."""

    def __init__(self, wheels: dict[str, Path], post1: Callable[[], Path]) -> None:
        super().__init__(wheels)
        self._post1 = post1

    def __missing__(self, name: str) -> Path:
        if name != "pjrt-post1":
            raise KeyError(name)
        self[name] = self._post1()
        return self[name]


@pytest.fixture(scope="session")
def e2e_venv(
    tmp_path_factory: pytest.TempPathFactory, standin_wheels: Callable[[str, str], dict[str, Path]]
) -> Callable[[Combo], Path]:
    """A venv of the combo's CPython with its jax/jaxlib and our pair, once per session for every worker
    (tests/support/shared.py). Read only: a test that changes a venv takes a `private_venv`."""
    from tests.support.shared import once, shared_root

    root = shared_root(tmp_path_factory)

    def venv_for(combo: Combo) -> Path:
        wheels = standin_wheels(combo.release, combo.python)
        made = once(
            root, f"venv-{combo.id}", lambda folder: combo_venv(combo, folder / "env", wheels["plugin"], wheels["pjrt"])
        )
        return made / "env" / "bin" / "python"

    return venv_for


@pytest.fixture(scope="session")
def private_venv(
    tmp_path_factory: pytest.TempPathFactory, standin_wheels: Callable[[str, str], dict[str, Path]]
) -> Callable[[Combo], Path]:
    """A venv like `e2e_venv`'s that only this worker uses, once per combo: for tests that reinstall a wheel in it
    (they restore it after; their xdist_group keeps them on one worker)."""
    made: dict[Combo, Path] = {}

    def venv_for(combo: Combo) -> Path:
        if combo not in made:
            wheels = standin_wheels(combo.release, combo.python)
            directory = tmp_path_factory.mktemp(f"private-venv-{combo.id}") / "env"
            made[combo] = combo_venv(combo, directory, wheels["plugin"], wheels["pjrt"])
        return made[combo]

    return venv_for
