"""Load a shared object in a child process first, so one that crashes on load cannot kill `import jax`.

The child (`load_child.py`, through the one runner in `child.py`) dlopens the library and, for a
PJRT plugin, does what jaxlib does first: calls GetPjrtApi, reads the PJRT_Api table (C API
version, extension chain, every function pointer: none may be NULL or point outside the library's
code), then calls PJRT_Plugin_Initialize and PJRT_Plugin_Attributes. A child killed by a signal
(abort in a constructor, SIGSEGV, SIGILL from instructions this CPU lacks) or by the time limit is
the verdict, naming the step it died in; the library is then not loaded in this process.

A verdict is kept per identity of the file (path, size, mtime, ctime, inode, device) and of the
settings that change what a load finds (LD_LIBRARY_PATH, ROCm variables), in
$XDG_CACHE_HOME/jax-rocm7-plugin (written only where writable), so later imports pay one stat and
one small read. Failed dlopens (a missing dependency) and time-outs are not cached: they depend on
the machine and the moment.

Within one run of the doctor (`one_run`) every verdict is kept in memory, time-outs included, so that
checking a fix (diagnosing again with it made, `_doctor/proof.py`) never loads the same file under the
same settings twice. A fix that changes what a load finds (a library path variable) does load again;
those loads share one budget of `load_timeout` seconds in all (`checking_fixes`), and a load the budget
cannot wait for raises `OutOfTime`: the fix is then said to be unchecked, never judged on a cut load.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin._names import PJRT_ENTRY_SYMBOL, PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._settings import LOAD_TIMEOUT

if TYPE_CHECKING:
    # The runner and the table reader are imported when a verdict is not cached, or is not a clean load:
    # a process that finds one pays a stat and a small read, not their imports.
    from jax_rocm7_plugin._binary.child import ChildRun
    from jax_rocm7_plugin._findings import Finding
    from jax_rocm7_plugin._settings import Settings

VERDICT_FORMAT = 2
NOTICE_AFTER_SECONDS = 3.0  # ten times a cold load of the published libraries (benchmarks/cold_load.py)


class Verdict(NamedTuple):
    loaded: bool
    error: str | None = None  # dlopen's message when not loaded
    crashed: str | None = None  # "SIGABRT" ..., or "no answer within N s"
    api: str | None = None  # pjrt: "ok", "missing", "null", or "called" (died in GetPjrtApi or reading its table)
    major: int | None = None
    minor: int | None = None
    api_size: int | None = None
    version_size: int | None = None
    extensions: tuple[int, ...] = ()
    problem: str | None = None  # what in the PJRT_Api table jaxlib would crash on
    plugin_error: str | None = None  # the error PJRT_Plugin_Initialize / _Attributes returned
    died_in: str | None = None  # the step the child was in when it died
    cached: bool = False

    @property
    def c_api_version(self) -> str | None:
        """The PJRT C API the library speaks, "major.minor", when its table was read."""
        return f"{self.major}.{self.minor or 0}" if self.major is not None else None


class OutOfTime(Exception):
    """A load test that the budget of checking fixes cannot wait for (`checking_fixes`)."""


class _Run:
    """The verdicts of one doctor run, and the time its fix checks may still spend on loads."""

    def __init__(self) -> None:
        self.verdicts: dict[str, Verdict] = {}
        self.budget: float | None = None  # seconds the fix checks' loads may take; None: not checking fixes
        self.budget_ends: float | None = None  # monotonic time, from the first of those loads on

    def limit(self, timeout: float) -> tuple[float, bool]:
        """(the limit of the next load, whether it is cut below `timeout` by the budget)."""
        if self.budget is None:
            return timeout, False
        if self.budget_ends is None:  # the first load of the fix checks: the whole budget is before it
            self.budget_ends = time.monotonic() + self.budget
            return min(timeout, self.budget), self.budget < timeout
        left = self.budget_ends - time.monotonic()
        if left <= 0:
            raise OutOfTime(f"the {timeout:g} s the doctor gives load tests while checking fixes are spent")
        return min(timeout, left), left < timeout


_RUNS: list[_Run] = []  # the doctor's run, while one is under way (one thread reads the machine)


@contextmanager
def one_run() -> Iterator[None]:
    """Within it, each file is loaded once per identity of the settings (verdicts kept in memory)."""
    _RUNS.append(_Run())
    try:
        yield
    finally:
        _RUNS.pop()


@contextmanager
def checking_fixes(seconds: float) -> Iterator[None]:
    """Within `one_run`: the loads that start here share `seconds` in all (OutOfTime past that)."""
    run = _RUNS[-1] if _RUNS else None
    if run is None or run.budget is not None:
        yield
        return
    run.budget = seconds
    try:
        yield
    finally:
        run.budget = run.budget_ends = None


def _identity(path: Path, kind: str, settings: tuple[str, ...]) -> str | None:
    """The cache key; `settings`: NAME=value of what changes a load besides the file (Settings.load_identity).
    Not in it: the ROCm libraries this process has mapped, which the child loads too (reading
    /proc/self/maps costs ~1 ms, so only a cache miss pays it)."""
    try:
        info = path.stat()
    except OSError:
        return None
    # st_ctime_ns: a copy over the same inode with the mtime put back (cp -p, rsync --inplace -t) changes
    # it, and nothing in user space can set it back.
    identity = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)
    parts = [os.path.abspath(path), *map(str, identity), kind]  # inode and device name the file
    parts += settings
    parts += [sys.version, str(VERDICT_FORMAT)]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _read_cached(directory: Path | None, key: str) -> Verdict | None:
    if directory is None:
        return None
    from jax_rocm7_plugin._safe_io import read_trusted

    try:  # a verdict another user could have planted never decides an in-process load
        data = json.loads(read_trusted(directory / f"{key}.json", 64 * 1024, directory.parent))
        verdict = Verdict(**{**data, "extensions": tuple(data.get("extensions", ())), "cached": True})
    except (OSError, ValueError, TypeError):
        return None
    return verdict


def _write_cached(directory: Path | None, key: str, verdict: Verdict) -> None:
    """Private and atomically; silently nothing where the cache is not writable or not this user's alone."""
    if directory is None:
        return
    from jax_rocm7_plugin._safe_io import write_private

    record = {k: v for k, v in verdict._asdict().items() if k != "cached"}
    write_private(directory, f"{key}.json", json.dumps(record), directory.parent)


def _rocm_loaded_here() -> list[str]:
    """ROCm libraries this process has mapped (ld.so reuses them by soname, so the child must too)."""
    from jax_rocm7_plugin._binary.process_maps import mapped_objects
    from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library

    return sorted(p for p in mapped_objects() if is_rocm_library(os.path.basename(p)))


def _died_in(run: ChildRun) -> str:
    last = run.records[-1] if run.records else {}
    stage = last.get("stage")
    if stage is None or (stage == "loaded" and not run.stage("api")):
        return "dlopen (its constructors)"
    if stage == "calling":
        return str(last.get("function"))
    return f"{PJRT_ENTRY_SYMBOL} or reading what it returned" if stage in ("api", "loaded") else str(stage)


def _verdict(run: ChildRun) -> Verdict:
    """What the child's records and its end say."""
    from jax_rocm7_plugin._binary.pjrt_api import FIRST_FUNCTIONS, PLUGIN_ATTRIBUTES, PLUGIN_INITIALIZE

    if run.start_error is not None:
        return Verdict(loaded=False, error=f"could not start the load test: {run.start_error}")
    failed = run.stage("load-failed")
    if failed is not None:
        return Verdict(loaded=False, error=str(failed.get("error")))
    api, table = run.stage("api"), run.stage("table")
    fields: dict[str, Any] = {"loaded": run.stage("loaded") is not None, "api": api.get("api") if api else None}
    if table is not None:
        fields["api"] = "ok"  # GetPjrtApi answered and its table was read; `problem` says if it is usable
        fields.update({key: table.get(key) for key in ("major", "minor", "api_size", "version_size", "problem")})
        fields["extensions"] = tuple(table.get("extensions", ()))
    for function in (FIRST_FUNCTIONS[PLUGIN_INITIALIZE], FIRST_FUNCTIONS[PLUGIN_ATTRIBUTES]):
        answer = run.stage(function)
        if answer is not None and answer.get("error"):
            fields["plugin_error"] = f"{function} failed: {answer['error']}"
    if run.death is not None or run.stage("done") is None:
        if fields["api"] == "ok":
            fields["api"] = "called"
        return Verdict(**fields, crashed=run.death or "stopped before it finished", died_in=_died_in(run))
    return Verdict(**fields)


def verdict_finding(path: Path, verdict: Verdict) -> Finding | None:
    """What a PJRT library's verdict means for the user (None: it loads and is a PJRT plugin).

    A load that failed for a missing dependency is left to the caller, which can name them all.
    """
    if verdict.api == "ok" and not (verdict.crashed or verdict.problem or verdict.plugin_error):
        return None  # the table was read and judged in the child (`problem`): the common case, answered here
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._binary.pjrt_api import missing_dependency

    if verdict.crashed:
        evidence = (f"library: {path}", f"died in {verdict.died_in}" if verdict.died_in else "died while loading")
        return catalog.pjrt_library_crashed(str(path), verdict.crashed, evidence)
    if not verdict.loaded:
        error = verdict.error or "unknown error"
        if missing_dependency(error, path.name):
            return None
        return catalog.pjrt_library_invalid(f"{path} cannot be loaded: {error}", (error,))
    problem = {
        "missing": f"it does not export {PJRT_ENTRY_SYMBOL}",
        "null": f"{PJRT_ENTRY_SYMBOL}() returned NULL",
    }.get(verdict.api or "")
    problem = problem or verdict.problem
    if problem is not None:
        return catalog.pjrt_library_invalid(f"{path} is not a usable PJRT plugin: {problem}", (f"library: {path}",))
    if verdict.plugin_error is not None:
        return catalog.pjrt_library_invalid(f"{path}: {verdict.plugin_error}", (f"library: {path}",))
    return None


def cached_verdict(path: Path, kind: str, settings: Settings) -> Verdict | None:
    """The verdict kept for this file as it is now (and these settings), if any: a stat and a small read."""
    key = _identity(path, kind, settings.load_identity)
    return _read_cached(settings.cache_dir, key) if key is not None else None


def probe(
    path: Path, kind: str, settings: Settings, *, use_cache: bool = True, preload: tuple[Path, ...] = ()
) -> Verdict:
    """What loading `path` does, learned in a child process (or from the verdict cache).

    `kind`: "pjrt" or "module". The child gets `settings.load_timeout` seconds; past
    NOTICE_AFTER_SECONDS it says once on stderr what is being waited for. `preload`: libraries
    the child loads first (the doctor's deep probe: the HIP runtime it found; the loader: libraries of a ROCm
    install's private directory the library's RUNPATH misses); they are part of the verdict's key.
    """
    identity = (*settings.load_identity, *(f"preload={p}" for p in preload))
    key = _identity(path, kind, identity) if use_cache else None
    run = _RUNS[-1] if _RUNS and key is not None else None
    if run is not None and key in run.verdicts:
        return run.verdicts[key]
    if key is not None:
        cached = _read_cached(settings.cache_dir, key)
        if cached is not None:
            return cached
    timeout, cut = run.limit(settings.load_timeout) if run is not None else (settings.load_timeout, False)
    notice = (
        f"{PLUGIN_DISTRIBUTION}: still loading {path} in a test process before jax may load it "
        f"(waiting up to {timeout:g} s; {LOAD_TIMEOUT} sets the limit)"
    )
    from jax_rocm7_plugin._binary.child import run_script

    child_run = run_script(
        "load_child.py",
        [str(path), kind, PJRT_ENTRY_SYMBOL, *map(str, preload), *_rocm_loaded_here()],
        timeout=timeout,
        notice_after=NOTICE_AFTER_SECONDS,
        notice=notice,
    )
    if cut and child_run.timed_out is not None:
        raise OutOfTime(f"a load test needed more than the {timeout:g} s left of the doctor's time for checking fixes")
    verdict = _verdict(child_run)
    if run is not None:
        run.verdicts[key] = verdict
    # Kept: a load that worked, or a death by signal (both properties of the file). Not kept: a
    # missing dependency or a time-out, which a changed machine or a calmer moment may undo.
    if key is not None and ((verdict.loaded and not verdict.crashed) or (verdict.crashed or "").startswith("SIG")):
        _write_cached(settings.cache_dir, key, verdict)
    return verdict
