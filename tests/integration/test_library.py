from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._binary.elf_header import shared_object_problem
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.pjrt_library import LIBRARY_ENV, LibraryChoice, locate_library


def test_explicit_library(standin_library: Path) -> None:
    choice = locate_library(standin_library)
    assert isinstance(choice, LibraryChoice)
    assert choice.source == LIBRARY_ENV and choice.pjrt_version is None


@pytest.mark.parametrize("kind", ["directory", "missing"])
def test_explicit_library_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path if kind == "directory" else tmp_path / "nope.so"
    finding = locate_library(target)
    assert isinstance(finding, Finding) and finding.id == "pjrt-library-invalid"
    assert str(target) in finding.summary
    assert ("not a regular file" if kind == "directory" else "does not exist") in finding.summary


def test_explicit_library_must_be_elf(tmp_path: Path) -> None:
    text = tmp_path / "plugin.so"
    text.write_text("#!/bin/sh\n" * 10)
    finding = locate_library(text)
    assert isinstance(finding, Finding) and "not an ELF file" in finding.summary


def test_elf_header_rejects_executables_and_truncation(tmp_path: Path) -> None:
    import sys

    assert "not a shared object" in (shared_object_problem(Path(sys.executable).resolve()) or "not a shared object")
    short = tmp_path / "short.so"
    short.write_bytes(b"\x7fELF\x02")
    assert shared_object_problem(short) == f"{short} is not an ELF file"


def test_runfiles_directory(tmp_path: Path, standin_library: Path) -> None:
    target = tmp_path / "_main" / "pjrt" / "xla_rocm_plugin.so"
    target.parent.mkdir(parents=True)
    target.symlink_to(standin_library)
    choice = locate_library(None, runfiles_dir=str(tmp_path))
    assert isinstance(choice, LibraryChoice) and choice.path == target


def test_unbuilt_locator_tree_falls_back_to_runfiles(
    tmp_path: Path, standin_library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tests.support.environment import REPO

    monkeypatch.syspath_prepend(str(REPO / "pjrt"))  # jax_rocm7_pjrt without build_info.json
    monkeypatch.setitem(sys.modules, "jax_rocm7_pjrt", None)  # restored (removed) after the test
    del sys.modules["jax_rocm7_pjrt"]
    assert locate_library(None).id == "pjrt-library-invalid"  # type: ignore[union-attr]
    target = tmp_path / "_main" / "pjrt" / "xla_rocm_plugin.so"
    target.parent.mkdir(parents=True)
    target.symlink_to(standin_library)
    choice = locate_library(None, runfiles_dir=str(tmp_path))
    assert isinstance(choice, LibraryChoice) and choice.source == "bazel runfiles"


def test_runfiles_manifest(tmp_path: Path, standin_library: Path) -> None:
    manifest = tmp_path / "MANIFEST"
    manifest.write_text(f"_main/other x\n_main/pjrt/xla_rocm_plugin.so {standin_library}\n")
    choice = locate_library(None, runfiles_manifest=str(manifest))
    assert isinstance(choice, LibraryChoice) and choice.source == "bazel runfiles"
    assert locate_library(None).id == "pjrt-wheel-missing"  # type: ignore[union-attr]
