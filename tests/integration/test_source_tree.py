"""Run from a checkout of this repository while a built wheel is installed: Python imports the tree's package (the
current folder comes first on sys.path), and the doctor says so with both paths and the fix, instead of judging the
tree's versions as if they were the install's. From any other folder, the installed one is judged and nothing is
said."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.environment import REPO
from tests.support.snippets import clean_env
from tests.support.sysroots import make_sysroot


def _installed_site(where: Path, version: str) -> Path:
    """A site folder holding a built jax-rocm7-plugin `version` (test fixture: its metadata folder and package)."""
    site = where / "site"
    (site / f"jax_rocm7_plugin-{version}.dist-info").mkdir(parents=True)
    (site / "jax_rocm7_plugin").mkdir()
    (site / "jax_rocm7_plugin" / "version.py").write_text(f"JAX_RELEASE = __version__ = {version!r}\n")
    return site


def _doctor(cwd: Path, site: Path, root: Path) -> tuple[int, list[dict[str, object]]]:
    command = [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--json", "--sysroot", str(root)]
    done = subprocess.run(
        command, cwd=cwd, env=clean_env(PYTHONPATH=str(site)), capture_output=True, text=True, timeout=120
    )
    return done.returncode, json.loads(done.stdout)["findings"]


def test_the_doctor_run_from_the_checkout_names_the_tree_and_the_install(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "root")
    site = _installed_site(tmp_path, "0.12.0")
    code, findings = _doctor(REPO, site, root)
    (shadow,) = [f for f in findings if f["id"] == "plugin-source-tree-shadows-install"]
    assert code == 1 and shadow["severity"] == "error"
    assert str(REPO / "jax_rocm7_plugin") in str(shadow["summary"])
    assert str(site / "jax_rocm7_plugin") in str(shadow["summary"]) and "0.12.0" in str(shadow["summary"])
    assert str(shadow["fix"]).startswith("run from another folder")
    # What follows from judging the tree in the install's place says so.
    assert all(f.get("follows") == shadow["id"] for f in findings if str(f["id"]).startswith("version-skew"))


def test_the_same_release_installed_is_said_as_info_and_another_folder_says_nothing(tmp_path: Path) -> None:
    from jax_rocm7_plugin.version import __version__

    root = make_sysroot(tmp_path / "root")
    _, findings = _doctor(REPO, _installed_site(tmp_path / "same", __version__), root)
    assert [f["severity"] for f in findings if f["id"] == "plugin-source-tree-shadows-install"] == ["info"]
    # An install whose package is the very folder imported (a link to the tree, as an install in place makes it)
    # is this package: nothing to say.
    in_place = tmp_path / "in-place"
    (in_place / f"jax_rocm7_plugin-{__version__}.dist-info").mkdir(parents=True)
    (in_place / "jax_rocm7_plugin").symlink_to(REPO / "jax_rocm7_plugin")
    _, findings = _doctor(in_place, in_place, root)
    assert "plugin-source-tree-shadows-install" not in {f["id"] for f in findings}, findings


def test_the_text_and_the_page_fold_the_version_findings_under_it_by_their_ids() -> None:
    """The checkout's 0.10.2 judged against an installed jax 0.12.0 and its pjrt: both skews follow from the tree being
    imported in the install's place, and are said under it by id (they are no missing libraries)."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._doctor.render import render_html, render_text
    from jax_rocm7_plugin._doctor.report import Report

    found = [
        catalog.source_tree_shadows_install("/src/jax_rocm7_plugin", "/venv/jax_rocm7_plugin", "0.12.0", "0.10.2",
                                            differs=True),
        catalog.version_skew("jaxlib", "jaxlib 0.12.0 is installed", "pip install ...", ()),
        catalog.version_skew("pjrt", "jax-rocm7-pjrt 0.12.0 is installed", "pip install ...", ()),
    ]  # fmt: skip
    report = Report(tuple(catalog.with_causes(found)), "/", ())
    text = render_text(report)
    assert "also for this reason: version-skew-jaxlib, version-skew-pjrt (--verbose lists them)" in text, text
    assert "[error] version-skew" not in text
    assert "Also for this reason:</b> version-skew-jaxlib, version-skew-pjrt" in render_html(report)
