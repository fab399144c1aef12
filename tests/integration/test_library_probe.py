"""The child-process load test of libraries: verdicts, and the cache that keeps them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jax_rocm7_plugin._binary import load_test as library_probe
from jax_rocm7_plugin._binary.load_test import Verdict
from jax_rocm7_plugin._settings import read_settings
from tests.support.native import compile_shared, fake_pjrt_library, library_needing_missing_dependency


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}


def probe(library: Path, environ: dict[str, str]) -> Verdict:
    """The loader's load test with the cache and identity these variables give."""
    settings = read_settings(environ)
    return library_probe.probe(library, "pjrt", settings.load_identity, settings.cache_dir)


def verdict_files(environ: dict[str, str]) -> list[Path]:
    directory = read_settings(environ).cache_dir
    return sorted(directory.glob("*.json")) if directory is not None and directory.is_dir() else []


def test_a_pjrt_plugin_is_read_in_the_child_then_from_the_cache(tmp_path: Path, environ: dict[str, str]) -> None:
    library = fake_pjrt_library(tmp_path, 0, 81)
    first = probe(library, environ)
    assert first.loaded and first.api == "ok" and (first.major, first.minor) == (0, 81) and not first.cached
    assert len(verdict_files(environ)) == 1
    second = probe(library, environ)
    assert second.cached and second._replace(cached=False) == first
    os.utime(library, ns=(1, 1))  # another file now, for all the cache knows
    assert not probe(library, environ).cached


@pytest.mark.parametrize(("statement", "signal"), [("abort();", "SIGABRT"), ("__builtin_trap();", "SIGILL")])
def test_a_library_that_dies_loading_is_a_verdict_not_a_death(
    tmp_path: Path, environ: dict[str, str], statement: str, signal: str
) -> None:
    source = f"#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) {{ {statement} }}\n"
    library = compile_shared(tmp_path, "dies", source)
    verdict = probe(library, environ)
    assert verdict.crashed == signal and not verdict.loaded
    assert probe(library, environ).cached  # a death is a property of the file
    finding = library_probe.verdict_finding(library, verdict)
    assert finding is not None and finding.id == "pjrt-library-crashed" and f"({signal})" in finding.summary


def test_garbage_from_get_pjrt_api_kills_only_the_child(tmp_path: Path, environ: dict[str, str]) -> None:
    library = compile_shared(tmp_path, "garbage", "void* GetPjrtApi(void) { return (void*)8; }\n")
    verdict = probe(library, environ)
    assert verdict.crashed == "SIGSEGV" and verdict.api == "called"


def test_a_missing_dependency_is_not_cached(tmp_path: Path, environ: dict[str, str]) -> None:
    library = library_needing_missing_dependency(tmp_path)
    verdict = probe(library, environ)
    assert not verdict.loaded and "libgone.so" in (verdict.error or "") and verdict_files(environ) == []
    assert library_probe.verdict_finding(library, verdict) is None  # the caller names every missing library


def test_an_unwritable_cache_writes_nothing_and_still_answers(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    environ = {"XDG_CACHE_HOME": str(tmp_path / "file"), "HOME": "relative"}
    library = fake_pjrt_library(tmp_path, 0, 81)
    assert probe(library, environ).loaded
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["file", library.name, library.name[3:-3] + ".c"])
    assert read_settings({"HOME": "relative"}).cache_dir is None
