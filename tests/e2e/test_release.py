"""Release engineering: the version matrix through loader and metadata, reproducible wheels,
and an offline install through jax's own extra that picks the newest .postN of each wheel."""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from jax_rocm7_plugin._policy import versions
from tests.support.environment import REPO, TEST_CACHE
from tests.support.native import fake_hip_runtime, pjrt_library_with_code_for
from tests.support.snippets import make_venv, our_warnings, run_python
from tests.support.sysroots import bundle_for
from tests.support.wheels import build

PLUGINS = ["0.10.2", "0.10.2.post1", "0.10.2.1", "0.10.2+rocm7.1", "0.10.3", "0.10.1.post2"]
PJRTS = ["0.10.2", "0.10.2.post3", "0.10.2.1", "0.10.2+rocm7.13.0a20260415", "0.10.2rc1", "0.10.1", "0.10.3", "0.10.20"]
JAXLIBS = ["0.10.2", "0.10.1", "0.10.3"]


def jax_extra_pin(jax_release: str) -> SpecifierSet:
    """jax's own `rocm7-local` requirement on the plugin, read from the installed jax, for that release."""
    extra = next(Requirement(r) for r in importlib.metadata.requires("jax") or [] if r.startswith("jax-rocm7-plugin"))
    installed = importlib.metadata.version("jax")
    return SpecifierSet(str(extra.specifier).replace(installed, jax_release))


@pytest.mark.parametrize(("plugin", "pjrt", "jaxlib"), list(itertools.product(PLUGINS, PJRTS, JAXLIBS)))
def test_loader_agrees_with_the_metadata_pins(plugin: str, pjrt: str, jaxlib: str) -> None:
    found = {f.id for f in versions.version_findings(plugin, jaxlib, pjrt)}
    # pip's view: our plugin's Requires-Dist on the library, and jax's extra on the plugin.
    pjrt_admitted = SpecifierSet(versions.pin_for(plugin)).contains(pjrt, prereleases=True)
    plugin_admitted = jax_extra_pin(versions.release_str(jaxlib)).contains(plugin, prereleases=True)
    assert ("version-skew-pjrt" not in found) == pjrt_admitted
    assert ("version-skew-jaxlib" not in found) == plugin_admitted


def test_the_metadata_pin_is_the_one_the_version_policy_states(standin_wheels) -> None:  # type: ignore[no-untyped-def]
    """The pin is written once (versions.pin_for): build.py hands it to setup_plugin.py, which spells none."""
    from jax_rocm7_plugin.version import JAX_RELEASE

    assert "==" not in (REPO / "setup_plugin.py").read_text().split("install_requires=", 1)[1].split("]", 1)[0]
    plugin = standin_wheels(JAX_RELEASE, f"{sys.version_info.major}.{sys.version_info.minor}")["plugin"]
    with zipfile.ZipFile(plugin) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line for line in archive.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    assert f"Requires-Dist: jax-rocm7-pjrt{versions.pin_for(JAX_RELEASE)}" in requires
    assert versions.pin_for("0.10.2.post7") == "==0.10.2.*"


@pytest.fixture(scope="module")
def gpu_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small PJRT-shaped ROCm library that passes `check` (NEEDED libamdhip64.so.7, RUNPATH, GetPjrtApi)."""
    directory = tmp_path_factory.mktemp("release-lib")
    hip = fake_hip_runtime(directory / "hip", devices=1)
    runpath = ("$ORIGIN/../_rocm_sdk_core/lib", "/opt/rocm/lib")
    return pjrt_library_with_code_for(directory / "lib", bundle_for(["gfx942"]), hip_dir=hip.parent, runpath=runpath)


def test_wheels_are_reproducible(gpu_library: Path, tmp_path: Path) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    first = build(tmp_path / "a", gpu_library, env=env)
    second = build(tmp_path / "b", gpu_library, env=env)
    assert [w.name for w in first] == [w.name for w in second]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    with zipfile.ZipFile(first[0]) as archive:
        assert {i.date_time for i in archive.infolist()} == {(2023, 11, 14, 22, 13, 20)}
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in archive.infolist()}
    assert modes["jax_rocm7_pjrt/xla_rocm_plugin.so"] == 0o755 and modes["jax_rocm7_pjrt/__init__.py"] == 0o644


def test_without_source_date_epoch_the_commit_time_is_used(gpu_library: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    first = build(tmp_path / "a", gpu_library, "--only", "plugin", env=env)
    second = build(tmp_path / "b", gpu_library, "--only", "plugin", env=env)
    assert first[0].read_bytes() == second[0].read_bytes()


WHEELHOUSE_PINS = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "numpy==2.4.6",
    "scipy==1.17.1",
    "ml_dtypes==0.6.0",
    "opt_einsum==3.4.0",
    "packaging==26.3",
    "pyelftools==0.33",
    "zstandard==0.25.0",
]


def test_offline_install_through_jax_extra_picks_newest_posts(gpu_library: Path, tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    cache = TEST_CACHE / "wheelhouse-0.10.2"
    downloaded = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(cache), *WHEELHOUSE_PINS],
        capture_output=True,
        text=True,
    )
    assert downloaded.returncode == 0, downloaded.stderr
    wheelhouse.mkdir()
    for wheel in cache.glob("*.whl"):
        (wheelhouse / wheel.name).symlink_to(wheel)
    build(wheelhouse, gpu_library)  # 0.10.2 pair
    build(wheelhouse, gpu_library, "--only", "pjrt", "--post", "1")
    build(wheelhouse, gpu_library, "--only", "plugin", "--post", "2")
    build(wheelhouse, gpu_library, "--only", "pjrt", "--release", "0.10.3")  # must not be taken: other release

    python = make_venv(tmp_path / "venv")
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-compile",  # what is resolved is under test, not byte-compiling scipy (a third of the time)
            "--no-index",
            "--find-links",
            str(wheelhouse),
            "jax[rocm7-local]==0.10.2",
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True)
    installed = {p["name"]: p["version"] for p in json.loads(listed.stdout)}
    assert installed["jax-rocm7-pjrt"] == "0.10.2.post1"
    assert installed["jax-rocm7-plugin"] == "0.10.2.post2"
    assert installed["jax"] == installed["jaxlib"] == "0.10.2"
    # The installed pair loads under jax: no AMD GPU here, so CPU and our one warning line.
    (tmp_path / "no-gpu").mkdir()  # a machine without the driver (a sysroot that does not exist is a bad variable)
    done = run_python(python, "import jax; print(jax.devices())", JAX_ROCM_SYSROOT=str(tmp_path / "no-gpu"))
    assert "CpuDevice" in done.stdout, done.stderr
    assert [w.endswith("[amdgpu-driver-missing]") for w in our_warnings(done.stderr)] == [True]
