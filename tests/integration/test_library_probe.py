"""The child-process load test of libraries: verdicts, and the cache that keeps them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from jax_rocm7_plugin._binary import load_test as library_probe
from jax_rocm7_plugin._binary.load_test import Verdict
from jax_rocm7_plugin._settings import read_settings
from tests.support.native import (
    compile_shared,
    fake_pjrt_library,
    library_needing_missing_dependency,
    pjrt_library_whose,
)


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}


def probe(library: Path, environ: dict[str, str]) -> Verdict:
    """The loader's load test with the cache and identity these variables give."""
    settings = read_settings(environ)
    return library_probe.probe(library, "pjrt", settings)


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


def test_the_real_plugin_passes_what_jaxlib_calls_first(standin_library: Path, environ: dict[str, str]) -> None:
    verdict = probe(standin_library, environ)
    assert verdict.api == "ok" and (verdict.major, verdict.minor) == (0, 81)  # xla-cpu-pjrt 0.0.1's header
    assert verdict.problem is None and verdict.plugin_error is None and verdict.crashed is None
    assert library_probe.verdict_finding(standin_library, verdict) is None


def test_version_of_a_compiled_library(tmp_path: Path, environ: dict[str, str]) -> None:
    verdict = probe(fake_pjrt_library(tmp_path, 1, 3), environ)
    assert verdict.api == "ok" and (verdict.major, verdict.minor) == (1, 3)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: fake_pjrt_library(d, 0, 81, api_size=8), "not a PJRT_Api"),
        (lambda d: fake_pjrt_library(d, 0, 81, api_size=1 << 40), "not a PJRT_Api"),
        (lambda d: compile_shared(d, "plain", "int f(void) { return 0; }\n"), "does not export GetPjrtApi"),
        (lambda d: compile_shared(d, "null", "void* GetPjrtApi(void) { return 0; }\n"), "returned NULL"),
        # jaxlib would call these and die (SIGSEGV in `import jax`): refused before anything calls them.
        (lambda d: fake_pjrt_library(d, 0, 81, functions="0"), "118 NULL (PJRT_Error_Destroy, PJRT_Error_Message"),
        (lambda d: fake_pjrt_library(d, 0, 81, functions="0x1000"), "118 outside the library's code"),
        (lambda d: fake_pjrt_library(d, 0, 81, functions="&the_api"), "outside the library's code"),  # data
    ],
    ids=["tiny-struct", "huge-struct", "no-entry", "null-api", "null-functions", "wild-functions", "data-pointers"],
)
def test_tables_jaxlib_would_crash_on_are_refused(
    tmp_path: Path, environ: dict[str, str], make: object, words: str
) -> None:
    library = make(tmp_path)  # type: ignore[operator]
    verdict = probe(library, environ)
    assert verdict.crashed is None, verdict
    finding = library_probe.verdict_finding(library, verdict)
    assert finding is not None and finding.id == "pjrt-library-invalid" and words in finding.summary, finding


def test_plugin_initialize_that_fails_is_named_with_its_message(tmp_path: Path, environ: dict[str, str]) -> None:
    library = pjrt_library_whose(tmp_path, "initialize", "failing")
    verdict = probe(library, environ)
    assert verdict.plugin_error == "PJRT_Plugin_Initialize failed: no GPU today" and verdict.crashed is None
    finding = library_probe.verdict_finding(library, verdict)
    assert finding is not None and finding.id == "pjrt-library-invalid" and "no GPU today" in finding.summary


@pytest.mark.parametrize(
    ("function", "variant", "signal", "step"),
    [
        ("initialize", "aborting", "SIGABRT", "PJRT_Plugin_Initialize"),
        ("attributes", "segfaulting", "SIGSEGV", "PJRT_Plugin_Attributes"),
    ],
)
def test_plugin_functions_that_crash_name_the_step(
    tmp_path: Path, environ: dict[str, str], function: str, variant: str, signal: str, step: str
) -> None:
    library = pjrt_library_whose(tmp_path, function, variant)
    verdict = probe(library, environ)
    assert verdict.crashed == signal and verdict.died_in == step
    finding = library_probe.verdict_finding(library, verdict)
    assert finding is not None and finding.id == "pjrt-library-crashed"
    assert f"died in {step}" in finding.evidence


def test_a_library_changed_in_place_with_its_mtime_put_back_is_tested_again(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    """cp -p / install -p / rsync --inplace -t: same inode, same size, same mtime, other bytes."""
    library = fake_pjrt_library(tmp_path, 0, 81)
    assert probe(library, environ).api == "ok"
    before = library.stat()
    data = bytearray(library.read_bytes())
    data[data.find(b"\x7fELF") + 4] = 1  # ELFCLASS32: ld.so refuses it
    time.sleep(0.01)  # a ctime tick later
    with open(library, "r+b") as handle:  # in place: the same inode
        handle.write(data)
    os.utime(library, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = library.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    verdict = probe(library, environ)
    assert not verdict.cached and not verdict.loaded, verdict


def test_a_constructor_that_never_returns_is_bounded_and_announced(
    tmp_path: Path, environ: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    source = "#include <unistd.h>\n__attribute__((constructor)) static void wait(void) { for (;;) pause(); }\n"
    library = compile_shared(tmp_path, "hangs", source)
    settings = read_settings({**environ, "JAX_ROCM_LOAD_TIMEOUT": "4"})
    verdict = library_probe.probe(library, "pjrt", settings)
    assert verdict.crashed == "no answer within 4 s" and verdict.died_in == "dlopen (its constructors)"
    assert verdict_files(environ) == []  # a time-out may not recur: not kept
    notices = [line for line in capfd.readouterr().err.splitlines() if "still loading" in line]
    assert len(notices) == 1 and str(library) in notices[0] and "JAX_ROCM_LOAD_TIMEOUT" in notices[0], notices
    finding = library_probe.verdict_finding(library, verdict)
    assert finding is not None and finding.id == "pjrt-library-crashed" and "4 s" in finding.summary


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_load_timeout_that_is_no_positive_number_is_named(value: str) -> None:
    settings = read_settings({"JAX_ROCM_LOAD_TIMEOUT": value})
    assert settings.load_timeout == 30.0
    (finding,) = settings.path_findings
    assert finding.id == "environment-variable-invalid" and not finding.blocks_rocm
