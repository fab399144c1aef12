"""The published artifacts of every row of the release table: jaxlib's commit, and the wheels `released`
builds from them passing `check` for every CPython (downloads and builds: end-to-end)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jax_rocm7_build import release_row

from jax_rocm7_plugin._policy import releases


@pytest.mark.parametrize("row", releases.table(), ids=lambda r: r.release)
def test_every_row_names_the_commit_its_jaxlib_was_built_from(row: releases.Release) -> None:
    """Reads `_git_hash` from the published jaxlib wheel of each release (downloaded each run: ~87 MB)."""
    assert release_row.jaxlib_git_hash(row.release, row.python[0]) == row.jax_commit


@pytest.mark.parametrize("row", releases.table(), ids=lambda r: r.release)
def test_released_wheels_pass_check_for_every_python(row: releases.Release, tmp_path: Path) -> None:
    """The published library of each release (newest .postN, sha256-verified) re-packaged, and the
    plugin for each CPython the release serves: `check` passes every wheel (build.py runs it)."""
    from tests.support.wheels import build

    first, *others = row.python
    pjrt, _plugin = build(
        tmp_path, None, "--pjrt-library", "released", "--release", row.release, "--python-version", first
    )
    assert pjrt.name == f"jax_rocm7_pjrt-{row.release}-py3-none-manylinux_2_28_x86_64.whl"
    import zipfile

    with zipfile.ZipFile(pjrt) as archive:
        info = json.loads(archive.read("jax_rocm7_pjrt/build_info.json"))
        metadata = archive.read(f"jax_rocm7_pjrt-{row.release}.dist-info/METADATA").decode()
    assert info["source"]["wheel"] == row.published_pjrt.filename
    assert info["source"]["wheel_sha256"] == row.published_pjrt.sha256
    assert info["rocm_version"] == (row.rocm_version or "7.x") and f"(ROCm {info['rocm_version']})" in metadata
    # What the first compile needs outside the library, as the table says, read again from the library itself.
    from jax_rocm7_build.first_compile import first_compile_needs

    with zipfile.ZipFile(pjrt) as archive:
        library = Path(archive.extract("jax_rocm7_pjrt/xla_rocm_plugin.so", tmp_path / "library"))
    needs = first_compile_needs(library)
    library.unlink()
    assert (needs["device_bitcode"], needs["external_ld_lld"]) == (
        row.first_compile.device_bitcode,
        row.first_compile.external_ld_lld,
    )
    # ... and where it looks for them (the doctor checks those places only).
    assert (tuple(needs["bitcode_search"]), tuple(needs["lld_search"])) == (
        row.first_compile.bitcode_search,
        row.first_compile.lld_search,
    )
    for python in others:
        (other,) = build(
            tmp_path / python, None, "--release", row.release, "--python-version", python, "--only", "plugin"
        )
        tag = "cp" + python.replace(".", "")
        assert other.name == f"jax_rocm7_plugin-{row.release}-{tag}-{tag}-manylinux_2_28_x86_64.whl"
        with zipfile.ZipFile(other) as archive:
            metadata = archive.read(f"jax_rocm7_plugin-{row.release}.dist-info/METADATA").decode()
            build_info = json.loads(archive.read("jax_rocm7_plugin/_native/build_info.json"))
        assert f"Requires-Python: =={python}.*" in metadata and f"Requires-Dist: jaxlib=={row.release}\n" in metadata
        assert {m["wheel_sha256"] for m in build_info["modules"].values()} == {row.plugin[tag].sha256}
