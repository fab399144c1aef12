"""The release table (jax_rocm7_plugin/releases.json) and what derives from it: build.py's choice of
release, MODULE.bazel's pins, the PJRT C API policy, version.py, and the verified `released` download."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jax_rocm7_build import bazel as bazel_build
from jax_rocm7_build import release_row
from jax_rocm7_build.main_wheels import choose_release
from packaging.tags import Tag
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from jax_rocm7_plugin._policy import releases, versions
from tests.support.environment import REPO
from tests.support.starlark import jax_module

SERVED = ["0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0"]
HEX40 = re.compile(r"[0-9a-f]{40}")


def sri_sha256(text: str | None) -> bool:
    algorithm, _, digest = (text or "").partition("-")
    try:
        return algorithm == "sha256" and len(base64.b64decode(digest, validate=True)) == 32
    except ValueError:
        return False


def test_the_table_serves_every_release_users_run_newest_first() -> None:
    assert sorted((r.release for r in releases.table()), key=releases.version_key) == SERVED
    assert [r.release for r in releases.table()] == SERVED[::-1]
    assert releases.get("0.12.0").jax == ("0.12.0", "0.12.0.1")  # type: ignore[union-attr]


@pytest.mark.parametrize("row", releases.table(), ids=lambda r: r.release)
def test_every_row_is_complete(row: releases.Release) -> None:
    assert HEX40.fullmatch(row.jax_commit)
    xla = row.xla
    if xla.commit is None:  # the Bazel path then reads JAX's MODULE.bazel; the row must say why
        assert "not recorded" in xla.evidence and row.jax_commit[:8] in xla.evidence
    else:
        assert HEX40.fullmatch(xla.commit) and sri_sha256(xla.integrity)
        assert HEX40.fullmatch(xla.rules_ml_toolchain_commit or "") and sri_sha256(xla.rules_ml_toolchain_integrity)
        assert row.jax_commit[:8] in xla.evidence
    assert row.pjrt_c_api_major == 0
    assert row.rocm_version is None or row.rocm_version.startswith("7.")
    assert row.rocm_evidence
    for artifact in (*row.pjrt, *row.plugin.values()):
        assert re.fullmatch(r"[0-9a-f]{64}", artifact.sha256)
        _name, version, _build, _tags = parse_wheel_filename(artifact.filename)
        assert (
            str(version) == artifact.version and Version(artifact.version).release[:3] == Version(row.release).release
        )
    for artifact in row.pjrt:
        name, _version, _build, tags = parse_wheel_filename(artifact.filename)
        assert name == "jax-rocm7-pjrt" and {t.interpreter for t in tags} == {"py3"}
    assert [Version(a.version) for a in row.pjrt] == sorted(Version(a.version) for a in row.pjrt)
    for tag, artifact in row.plugin.items():
        name, _version, _build, tags = parse_wheel_filename(artifact.filename)
        assert name == "jax-rocm7-plugin" and Tag(tag, tag, "manylinux_2_27_x86_64") in tags
    assert [f"cp{p.replace('.', '')}" for p in row.python] == list(row.plugin)
    assert all(Version(j).release[:3] == Version(row.release).release for j in row.jax)


@pytest.mark.parametrize(
    ("python", "release"), [("3.11", "0.10.2"), ("3.12", "0.12.0"), ("3.13", "0.12.0"), ("3.14", "0.12.0")]
)
def test_the_default_release_follows_the_interpreter(python: str, release: str) -> None:
    row = choose_release(None, python, explicit_library=False)
    assert row is not None and row.release == release


def test_a_release_the_interpreter_cannot_run_is_refused_naming_its_pythons() -> None:
    with pytest.raises(ValueError, match=r"jax 0\.12\.0 runs on CPython 3\.12, 3\.13, 3\.14, 3\.15, not 3\.11"):
        choose_release("0.12.0", "3.11", explicit_library=False)
    with pytest.raises(ValueError, match=r"no release of releases\.json runs on CPython 3\.10"):
        choose_release(None, "3.10", explicit_library=False)


def test_a_release_outside_the_table() -> None:
    with pytest.raises(ValueError, match=r"build\.py release-row 0\.9\.9 --write"):
        choose_release("0.9.9", "3.11", explicit_library=False)
    assert choose_release("0.9.9", "3.11", explicit_library=True) is None  # packaging a given library


def test_build_py_names_the_pythons_in_one_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "build" / "build.py"), "wheels", "--release", "0.11.2", "--python-version", "3.11"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "jax 0.11.2 runs on CPython 3.12, 3.13, 3.14, 3.15, not 3.11" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("jaxlib", "major"), [("0.10.2", 0), ("0.11.1", 0), ("0.12.0", 0), ("0.12.0.1", 0)])
def test_c_api_major_comes_from_the_table(jaxlib: str, major: int) -> None:
    assert versions.expected_pjrt_c_api_major(jaxlib) == major
    assert versions.expected_pjrt_c_api_major("0.13.0") is None


@pytest.mark.parametrize(
    ("plugin", "jaxlib", "pjrt"),
    [("0.12.0", "0.12.0", "0.12.0.post1"), ("0.12.0", "0.12.0.1", "0.12.0"), ("0.12.0.post2", "0.12.0", "0.12.0")],
)
def test_fourth_components_and_posts_are_accepted(plugin: str, jaxlib: str, pjrt: str) -> None:
    assert versions.version_findings(plugin, jaxlib, pjrt) == []


def test_version_py_names_a_served_release_the_dev_environment_runs() -> None:
    from jax_rocm7_plugin.version import JAX_RELEASE

    pins = (REPO / "requirements" / "test.txt").read_text()
    assert f"jaxlib=={JAX_RELEASE}\n" in pins and releases.get(JAX_RELEASE) is not None


def test_the_installed_jaxlib_was_built_from_the_recorded_commit() -> None:
    import jaxlib.version

    row = releases.get(versions.release_str(jaxlib.version.__version__))
    assert row is not None and row.jax_commit == jaxlib.version._git_hash


def test_module_bazel_is_the_rendering_of_its_release() -> None:
    text = (REPO / "MODULE.bazel").read_text()
    version = re.search(r'^    version = "([^"]+)",$', text, re.M)
    assert version is not None
    row = releases.get(version.group(1))
    assert row is not None
    assert bazel_build.render_module(text, bazel_build.release_pins(row, None), row.release) == text


def test_pins_missing_from_the_row_come_from_jax_module_bazel() -> None:
    row = releases.get("0.12.0")
    assert row is not None and row.xla.commit is None
    pins = bazel_build.release_pins(row, jax_module())
    assert pins["JAX_COMMIT"] == row.jax_commit and pins["XLA_COMMIT"] == "1" * 40
    assert pins["RULES_ML_TOOLCHAIN_COMMIT"] == "2" * 40 and sri_sha256(pins["XLA_INTEGRITY"])
    with pytest.raises(ValueError, match="--jax-source DIR"):
        bazel_build.release_pins(row, None)


def test_a_row_that_disagrees_with_jax_module_bazel_stops_the_build() -> None:
    row = releases.get("0.10.2")
    assert row is not None and row.xla.commit is not None
    assert bazel_build.release_pins(row, jax_module(row.xla.commit, str(row.xla.rules_ml_toolchain_commit)))
    with pytest.raises(ValueError, match=f"XLA_COMMIT={row.xla.commit}.* pins {'3' * 40}"):
        bazel_build.release_pins(row, jax_module("3" * 40, str(row.xla.rules_ml_toolchain_commit)))


def test_a_jax_checkout_without_the_commit_gives_no_pins(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert bazel_build.read_jax_module("0" * 40, tmp_path) is None


def test_a_release_gets_its_own_bazel_workspace(tmp_path: Path) -> None:
    row = releases.get("0.12.0")
    assert row is not None
    pins = bazel_build.release_pins(row, jax_module())
    workspace = bazel_build.stage_workspace(tmp_path / "ws", pins, "0.12.0")
    module = (workspace / "MODULE.bazel").read_text()
    assert f'JAX_COMMIT = "{row.jax_commit}"' in module and f'XLA_COMMIT = "{"1" * 40}"' in module
    assert '    version = "0.12.0",' in module
    assert (workspace / "pjrt" / "BUILD").resolve() == REPO / "pjrt" / "BUILD"
    assert bazel_build.module_pins(workspace / "MODULE.bazel")["JAX_COMMIT"] == row.jax_commit


def test_a_download_with_another_hash_stops_the_build(tmp_path: Path) -> None:
    """Test fixture: a file in the build cache under the published name but with other bytes."""
    row = releases.get("0.12.0")
    assert row is not None
    cached = tmp_path / "released" / row.published_pjrt.filename
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not the published wheel")
    env = {**os.environ, "JAX_ROCM_BUILD_CACHE": str(tmp_path)}
    command = [sys.executable, str(REPO / "build" / "build.py"), "wheels", "--pjrt-library", "released"]
    done = subprocess.run(
        [*command, "--python-version", "3.12", "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 1
    import hashlib

    actual = hashlib.sha256(b"not the published wheel").hexdigest()
    assert f"has sha256 {actual}, but releases.json records {row.published_pjrt.sha256}" in done.stderr
    assert not cached.exists() and cached.with_name(cached.name + ".sha256-mismatch").is_file()  # set aside
    assert not list((tmp_path / "out").glob("*.whl"))


PYPI = {
    "0.12.0": [
        {"filename": "jax_rocm7_plugin-0.12.0-cp312-cp312-manylinux_2_27_x86_64.whl", "digests": {"sha256": "a"}}
    ],
    "0.12.0.post1": [
        {"filename": "jax_rocm7_plugin-0.12.0.post1-cp312-cp312-manylinux_2_27_x86_64.whl", "digests": {"sha256": "b"}},
        {"filename": "jax_rocm7_plugin-0.12.0.post1-cp313-cp313-manylinux_2_27_x86_64.whl", "digests": {"sha256": "c"}},
    ],
    "0.12.0rc1": [{"filename": "x", "digests": {"sha256": "d"}}],
    "0.12.1": [{"filename": "y", "digests": {"sha256": "e"}}],
}


def test_release_row_reads_the_index_as_published() -> None:
    """Test fixture PYPI: PyPI's JSON shape with made-up digests."""
    versions_of = release_row.of_release(PYPI, "0.12.0")  # type: ignore[arg-type]
    assert versions_of == ["0.12.0", "0.12.0.post1"]
    plugin = release_row.plugin_wheels(PYPI, versions_of)  # type: ignore[arg-type]
    assert {tag: a["sha256"] for tag, a in plugin.items()} == {"cp312": "b", "cp313": "c"}
    assert release_row.python_versions(plugin) == ["3.12", "3.13"]
    assert release_row.rocm_of("JAX XLA PJRT Plugin for AMD GPUs (ROCm:7.14.0)")["version"] == "7.14.0"
    assert release_row.rocm_of("JAX XLA PJRT Plugin for AMD GPUs (ROCm:unknown)")["version"] is None
    version_py = "_version = '0.12.0'\n_git_hash: str = '8dcb7aeced770bd22531b42d0b925c7342787c27'\n"
    assert release_row.git_hash_of(version_py) == "8dcb7aeced770bd22531b42d0b925c7342787c27"
    with pytest.raises(ValueError, match="no _git_hash"):
        release_row.git_hash_of("_git_hash: str | None = None\n")


def test_the_readme_lists_the_releases_of_the_table() -> None:
    rows = re.findall(
        r"^\| (\d+\.\d+\.\d+) \| (.+?) \| (3\.\d+)–(3\.\d+) \| (.+?) \| 0\.x \|$",
        (REPO / "README.md").read_text(),
        re.M,
    )
    assert [r[0] for r in rows] == [r.release for r in releases.table()]
    for (_release, jax, low, high, rocm), row in zip(rows, releases.table(), strict=True):
        assert (low, high) == (row.python[0], row.python[-1])
        assert all(j in jax for j in row.jax)
        assert (row.rocm_version or "not stated") in rocm
        if len(row.pjrt) > 1:
            assert f"library {row.published_pjrt.version}" in jax
