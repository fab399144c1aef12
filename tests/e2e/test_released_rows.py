"""The published artifacts of every row of the release table: jaxlib's commit and the library's facts per row,
and the wheels `released` builds from the newest row passing `check` for every CPython (downloads and builds:
end-to-end). benchmarks/released_builds.py builds every row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jax_rocm7_build import release_row
from packaging.version import Version

from jax_rocm7_plugin._policy import releases


@pytest.mark.parametrize("row", releases.table(), ids=lambda r: r.release)
def test_every_row_names_the_commit_its_jaxlib_was_built_from(row: releases.Release) -> None:
    """Reads `_git_hash` from the published jaxlib wheel of each release (downloaded each run: ~87 MB)."""
    assert release_row.jaxlib_git_hash(row.release, row.python[0]) == row.jax_commit


@pytest.mark.parametrize("row", releases.table(), ids=lambda r: r.release)
def test_every_row_describes_its_published_library(row: releases.Release, tmp_path: Path) -> None:
    """What the table says of each release's published library, read again from the library itself: its sha256
    (checked by the download the build uses), the ROCm its summary states, and what the first compile needs
    outside it and where it looks for them (the doctor checks those places only)."""
    import zipfile

    from jax_rocm7_build.downloads import verified_download
    from jax_rocm7_build.first_compile import first_compile_needs
    from jax_rocm7_build.progress import Progress
    from jax_rocm7_build.release_row import rocm_of

    from jax_rocm7_plugin._names import LIBRARY_FILE, PJRT_DISTRIBUTION

    wheel = verified_download(row.published_pjrt, PJRT_DISTRIBUTION, Progress())
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        (member,) = [n for n in archive.namelist() if n.endswith(f"/{LIBRARY_FILE}")]
        library = Path(archive.extract(member, tmp_path))
    summary = next((line[9:] for line in metadata.splitlines() if line.startswith("Summary: ")), "")
    stated = rocm_of(summary)["version"]
    if stated is None:  # "ROCm:unknown": the compiler that built the library names its ROCm in .comment
        from elftools.elf.elffile import ELFFile

        with open(library, "rb") as handle:
            comment = ELFFile(handle).get_section_by_name(".comment").data().decode(errors="replace")
        stated = next((w[4:].split(")")[0] for w in comment.replace("\0", " ").split() if w.startswith("roc-")), None)
    assert stated == row.rocm_version, summary
    needs = first_compile_needs(library)
    library.unlink()
    assert (needs["device_bitcode"], needs["external_ld_lld"]) == (
        row.first_compile.device_bitcode,
        row.first_compile.external_ld_lld,
    )
    assert (tuple(needs["bitcode_search"]), tuple(needs["lld_search"])) == (
        row.first_compile.bitcode_search,
        row.first_compile.lld_search,
    )


# The full build of every row is the same code on other data (the rows above check the data): the suite builds
# the newest row, and benchmarks/released_builds.py builds and checks every row, timing each stage.
NEWEST = max(releases.table(), key=lambda row: Version(row.release))


def test_released_wheels_pass_check_for_every_python(tmp_path: Path) -> None:
    """The published library of the newest release (newest .postN, sha256-verified) re-packaged, and the
    plugin for each CPython the release serves, in one run (`--python-version all`, a packager's command for a
    whole row): `check` passes every wheel (build.py runs it)."""
    check_released_row(NEWEST, tmp_path)


def check_released_row(row: releases.Release, tmp_path: Path) -> None:
    import zipfile

    from tests.support.wheels import build

    pjrt, *plugins = build(
        tmp_path, None, "--pjrt-library", "released", "--release", row.release, "--python-version", "all"
    )
    assert pjrt.name == f"jax_rocm7_pjrt-{row.release}-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(pjrt) as archive:
        info = json.loads(archive.read("jax_rocm7_pjrt/build_info.json"))
        metadata = archive.read(f"jax_rocm7_pjrt-{row.release}.dist-info/METADATA").decode()
    assert info["source"]["wheel"] == row.published_pjrt.filename
    assert info["source"]["wheel_sha256"] == row.published_pjrt.sha256
    assert info["rocm_version"] == (row.rocm_version or "7.x") and f"(ROCm {info['rocm_version']})" in metadata
    tags = ["cp" + python.replace(".", "") for python in row.python]
    assert [p.name for p in plugins] == [
        f"jax_rocm7_plugin-{row.release}-{tag}-{tag}-manylinux_2_28_x86_64.whl" for tag in tags
    ]
    for python, tag, plugin in zip(row.python, tags, plugins, strict=True):
        with zipfile.ZipFile(plugin) as archive:
            metadata = archive.read(f"jax_rocm7_plugin-{row.release}.dist-info/METADATA").decode()
            build_info = json.loads(archive.read("jax_rocm7_plugin/_native/build_info.json"))
        assert f"Requires-Python: =={python}.*" in metadata and f"Requires-Dist: jaxlib=={row.release}\n" in metadata
        assert {m["wheel_sha256"] for m in build_info["modules"].values()} == {row.plugin[tag].sha256}
