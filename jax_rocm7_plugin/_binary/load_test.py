"""Load a shared object in a child process first, so one that crashes on load cannot kill `import jax`.

The child dlopens the library and, for a PJRT plugin, calls GetPjrtApi and reads the C API
version and the extension chain; it prints one JSON line. A child killed by a signal (abort in
a constructor, SIGSEGV, SIGILL from instructions this CPU lacks) or by the time limit is the
verdict; the library is then not loaded in this process. A verdict is kept per identity of the
file (path, size, mtime, inode) and of the settings that change what a load finds
(LD_LIBRARY_PATH, ROCm variables), in $XDG_CACHE_HOME/jax-rocm7-plugin (written only where
writable), so later imports pay one stat and one small read. Failed dlopens (a missing
dependency) are not cached: they depend on the machine and cost little.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._findings import Finding

TIMEOUT_SECONDS = 120.0  # a 500 MB library loads in ~1 s; a hung constructor is not waited on forever
VERDICT_FORMAT = 1

# Runs in `python -I -S`: stdlib only, no site-packages, nothing of ours.
_CHILD = r"""
import ctypes, json, struct, sys
def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n"); sys.stdout.flush()
for preloaded in sys.argv[3:]:  # what the parent holds already (ROCm from pip preloads its libraries)
    try:
        ctypes.CDLL(preloaded, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass
try:
    library = ctypes.CDLL(sys.argv[1])
except OSError as error:
    say(loaded=False, error=str(error)); sys.exit(0)
if sys.argv[2] != "pjrt":
    say(loaded=True); sys.exit(0)
try:
    get_api = library.GetPjrtApi
except AttributeError:
    say(loaded=True, api="missing"); sys.exit(0)
get_api.restype = ctypes.c_void_p
get_api.argtypes = []
api = get_api()
if not api:
    say(loaded=True, api="null"); sys.exit(0)
say(loaded=True, api="called")
size, node, version_size, _vext, major, minor = struct.unpack("<QQQQii", ctypes.string_at(api, 40))
kinds = []
for _ in range(64):
    if not node:
        break
    ext_size, kind, _pad, node = struct.unpack("<QiiQ", ctypes.string_at(node, 24))
    if ext_size < 24:
        break
    kinds.append(kind)
say(loaded=True, api="ok", api_size=size, version_size=version_size, major=major, minor=minor, extensions=kinds)
"""


class Verdict(NamedTuple):
    loaded: bool
    error: str | None = None  # dlopen's message when not loaded
    crashed: str | None = None  # "SIGABRT" ..., or "no answer within N s"
    api: str | None = None  # pjrt: "ok", "missing", "null", or "called" (died reading what it returned)
    major: int | None = None
    minor: int | None = None
    api_size: int | None = None
    version_size: int | None = None
    extensions: tuple[int, ...] = ()
    cached: bool = False


def _identity(path: Path, kind: str, settings: tuple[str, ...]) -> str | None:
    """The cache key; `settings`: NAME=value of what changes a load besides the file (Settings.load_identity).
    Not in it: the ROCm libraries this process has mapped, which the child loads too (reading
    /proc/self/maps costs ~1 ms, so only a cache miss pays it)."""
    try:
        info = path.stat()
    except OSError:
        return None
    parts = [str(path.resolve()), str(info.st_size), str(info.st_mtime_ns), str(info.st_ino), str(info.st_dev), kind]
    parts += settings
    parts += [sys.version, str(VERDICT_FORMAT)]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _read_cached(directory: Path | None, key: str) -> Verdict | None:
    if directory is None:
        return None
    from jax_rocm7_plugin._safe_io import read_text

    try:
        data = json.loads(read_text(directory / f"{key}.json", 64 * 1024))
        verdict = Verdict(**{**data, "extensions": tuple(data.get("extensions", ())), "cached": True})
    except (OSError, ValueError, TypeError):
        return None
    return verdict


def _write_cached(directory: Path | None, key: str, verdict: Verdict) -> None:
    """Atomically; silently nothing where the cache is not writable."""
    if directory is None:
        return
    record = {k: v for k, v in verdict._asdict().items() if k != "cached"}
    partial = directory / f".{key}.{os.getpid()}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(record), encoding="utf-8")
        os.replace(partial, directory / f"{key}.json")
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()


def _signal_name(returncode: int) -> str:
    import signal

    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _rocm_loaded_here() -> list[str]:
    """ROCm libraries this process has mapped (ld.so reuses them by soname, so the child must too)."""
    from jax_rocm7_plugin._binary.process_maps import mapped_objects
    from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library

    return sorted(p for p in mapped_objects() if is_rocm_library(os.path.basename(p)))


def _run_child(path: Path, kind: str, timeout: float, preloaded: list[str]) -> Verdict:
    import subprocess  # only when no verdict is cached

    command = [sys.executable, "-I", "-S", "-c", _CHILD, str(path), kind, *preloaded]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, errors="replace"
        )
    except subprocess.TimeoutExpired:
        return Verdict(loaded=False, crashed=f"no answer within {timeout:g} s")
    except OSError as error:
        return Verdict(loaded=False, error=f"could not start the probe: {error}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    last: dict[str, Any] = lines[-1] if lines else {}
    if done.returncode < 0:
        return Verdict(loaded=bool(last.get("loaded")), crashed=_signal_name(done.returncode), api=last.get("api"))
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Verdict(loaded=False, crashed=f"exit status {done.returncode}: {tail}")
    return Verdict(
        loaded=bool(last["loaded"]),
        error=last.get("error"),
        api=last.get("api"),
        major=last.get("major"),
        minor=last.get("minor"),
        api_size=last.get("api_size"),
        version_size=last.get("version_size"),
        extensions=tuple(last.get("extensions", ())),
    )


def verdict_finding(path: Path, verdict: Verdict) -> Finding | None:
    """What a PJRT library's verdict means for the user (None: it loads and is a PJRT plugin).

    A load that failed for a missing dependency is left to the caller, which can name them all.
    """
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._binary import pjrt_api

    if verdict.crashed:
        evidence = (f"library: {path}", f"GetPjrtApi: {verdict.api}" if verdict.api else "died while loading")
        return catalog.pjrt_library_crashed(str(path), verdict.crashed, evidence)
    if not verdict.loaded:
        error = verdict.error or "unknown error"
        if pjrt_api.missing_dependency(error, path):
            return None
        return catalog.pjrt_library_invalid(f"{path} cannot be loaded: {error}", (error,))
    problem = {"missing": "it does not export GetPjrtApi", "null": "GetPjrtApi() returned NULL"}.get(verdict.api or "")
    problem = problem or pjrt_api.header_problem(verdict.api_size or 0, verdict.version_size or 0)
    if problem is not None:
        return catalog.pjrt_library_invalid(f"{path} is not a PJRT plugin: {problem}", (f"library: {path}",))
    return None


def probe(
    path: Path,
    kind: str,
    identity: tuple[str, ...],
    directory: Path | None,
    timeout: float = TIMEOUT_SECONDS,
) -> Verdict:
    """What loading `path` does, learned in a child process (or from the cache in `directory`).

    `kind`: "pjrt" or "module"; `identity`: Settings.load_identity; `directory`: Settings.cache_dir.
    """
    key = _identity(path, kind, identity)
    if key is not None:
        cached = _read_cached(directory, key)
        if cached is not None:
            return cached
    verdict = _run_child(path, kind, timeout, _rocm_loaded_here())
    # Kept: a load that worked, or a death by signal (both properties of the file). Not kept: a
    # missing dependency or a time-out, which a changed machine or a calmer moment may undo.
    if key is not None and ((verdict.loaded and not verdict.crashed) or (verdict.crashed or "").startswith("SIG")):
        _write_cached(directory, key, verdict)
    return verdict
