"""The doctor's --deep probe: start the HIP runtime in a child process and ask it what it sees.

The child loads the runtime with ctypes and calls hipInit, hipGetDeviceCount,
hipRuntimeGetVersion and hipDriverGetVersion, naming every error with the
runtime's own hipGetErrorName; then, if asked, it dlopens the PJRT library and
reads its C API version. Each result is one JSON line printed as soon as it is
known, so a crash in a later step (a runtime can abort the process) still leaves
the earlier answers. The parent never loads a GPU library itself.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._names import ROCM_MAJOR

DEFAULT_TIMEOUT_S = 120.0  # hipInit on a large node can take tens of seconds


class HipProbe(NamedTuple):
    runtime: str
    ok: bool  # the child ran to the end
    hip: dict[str, Any]  # what the runtime answered
    pjrt: dict[str, Any] | None
    failure: str | None  # why the child did not finish

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


def hip_version_text(encoded: int) -> str:
    """HIP_VERSION encoding: major*10,000,000 + minor*100,000 + patch (50221153 -> 5.2.21153)."""
    major, rest = divmod(encoded, 10_000_000)
    minor, patch = divmod(rest, 100_000)
    return f"{major}.{minor}.{patch}"


def run_probe(runtime: Path, pjrt_library: Path | None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> HipProbe:
    command = [sys.executable, "-m", "jax_rocm7_plugin._doctor.deep", str(runtime)]
    if pjrt_library is not None:
        command.append(str(pjrt_library))
    package_parent = str(Path(__file__).resolve().parents[2])  # the folder holding jax_rocm7_plugin
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        return _parse(runtime, stdout, f"the probe did not finish within {timeout_s:.0f} s")
    failure = None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        how = f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
        failure = f"the probe process ended with {how}" + (f": {last}" if last else "")
    return _parse(runtime, done.stdout, failure)


def deep_findings(probe: HipProbe) -> list[Finding]:
    results: list[Finding] = []
    hip = probe.hip
    where = f"deep probe of {probe.runtime}"
    if not hip.get("loaded", False):
        why = hip.get("error") or probe.failure or "no answer"
        return [catalog.hip_probe_failed(f"the HIP runtime {probe.runtime} could not be started", (why,))]
    runtime_version = hip.get("runtime_version", {})
    text = runtime_version.get("text")
    if runtime_version.get("code") == 0 and text and not text.startswith(f"{ROCM_MAJOR}."):
        results.append(catalog.rocm_major_mismatch((f"{where}: HIP runtime version {text}",)))
    init, count = hip.get("init", {}), hip.get("device_count", {})
    if init.get("code") != 0 or count.get("value", 0) == 0:
        name = count.get("name") if count.get("code") else init.get("name")
        results.append(
            catalog.hip_no_device(
                str(name or "no devices"),
                (
                    f"{where}: hipInit -> {init.get('name')}",
                    f"hipGetDeviceCount -> {count.get('name')}, {count.get('value')} device(s)",
                    f"runtime {text}, driver {hip.get('driver_version', {}).get('text')}",
                ),
            )
        )
    if probe.failure:
        results.append(catalog.hip_probe_failed(f"the deep probe did not finish: {probe.failure}", (where,)))
    pjrt = probe.pjrt
    if pjrt is not None and pjrt.get("error"):
        results.append(catalog.pjrt_library_invalid(f"loading the PJRT library failed: {pjrt['error']}", (where,)))
    return results


def _parse(runtime: Path, stdout: str, failure: str | None) -> HipProbe:
    hip: dict[str, Any] = {}
    pjrt: dict[str, Any] | None = None
    finished = False
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        kind = record.pop("kind", None)
        if kind == "hip":
            hip = record
        elif kind == "pjrt":
            pjrt = record
        elif kind == "done":
            finished = True
    if not finished and failure is None:
        failure = "the probe process stopped before it finished"
    return HipProbe(str(runtime), finished and failure is None, hip, pjrt, failure)


# ------------------------------------------------------------------ child side


def _emit(kind: str, **record: Any) -> None:
    print(json.dumps({"kind": kind, **record}), flush=True)


def _probe_hip(runtime: str) -> None:
    try:
        hip = ctypes.CDLL(runtime)
    except OSError as error:
        _emit("hip", loaded=False, error=str(error))
        return
    hip.hipGetErrorName.restype = ctypes.c_char_p

    def name(code: int) -> str:
        return (hip.hipGetErrorName(code) or b"unknown").decode()

    result: dict[str, Any] = {"loaded": True}
    code = hip.hipInit(0)
    result["init"] = {"code": code, "name": name(code)}
    count = ctypes.c_int(-1)
    code = hip.hipGetDeviceCount(ctypes.byref(count))
    result["device_count"] = {"code": code, "name": name(code), "value": count.value if code == 0 else 0}
    for key, function in (("runtime_version", hip.hipRuntimeGetVersion), ("driver_version", hip.hipDriverGetVersion)):
        version = ctypes.c_int(0)
        code = function(ctypes.byref(version))
        value = version.value
        result[key] = {"code": code, "name": name(code), "value": value, "text": hip_version_text(value)}
    _emit("hip", **result)


def _probe_pjrt(library: str) -> None:
    from jax_rocm7_plugin._binary import pjrt_api

    try:
        handle = pjrt_api.load_library(Path(library))
        version = pjrt_api.read_c_api_version(handle)
    except pjrt_api.LibraryLoadError as error:
        _emit("pjrt", loaded=False, error=str(error), missing=error.missing)
        return
    except pjrt_api.NotAPjrtPlugin as error:
        _emit("pjrt", loaded=True, error=str(error))
        return
    _emit("pjrt", loaded=True, c_api_version=str(version))


def _child(argv: list[str]) -> int:
    _probe_hip(argv[0])
    if len(argv) > 1:
        _probe_pjrt(argv[1])
    _emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
