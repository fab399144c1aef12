"""The doctor's --deep probe: start the HIP runtime in a child process and ask it what it sees.

The child (`_binary/hip_child.py`, through the one child runner) loads the runtime with ctypes
and calls hipInit, hipGetDeviceCount, hipRuntimeGetVersion and hipDriverGetVersion, naming every
error with the runtime's own hipGetErrorName. The PJRT library's side is the pipeline's load test
(the same runner and child the loader uses), run afresh here, never from the verdict cache. The
parent never loads a GPU library itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._binary.child import run_script
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._names import ROCM_MAJOR
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._binary.load_test import Verdict

DEFAULT_TIMEOUT_S = 120.0  # hipInit on a large node can take tens of seconds
NOTICE_AFTER_S = 5.0


class HipProbe(NamedTuple):
    runtime: str
    ok: bool  # the child ran to the end
    hip: dict[str, Any]  # what the runtime answered
    pjrt: dict[str, Any] | None
    failure: str | None  # why the child did not finish

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


def pjrt_summary(verdict: Verdict) -> dict[str, Any]:
    """The PJRT part of the deep report, from a fresh load test."""
    summary: dict[str, Any] = {"loaded": verdict.loaded}
    if verdict.c_api_version is not None:
        summary["c_api_version"] = verdict.c_api_version
    for key in ("error", "crashed", "problem", "plugin_error", "died_in"):
        if getattr(verdict, key):
            summary[key] = getattr(verdict, key)
    return summary


def run_probe(runtime: Path, pjrt: dict[str, Any] | None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> HipProbe:
    run = run_script(
        "hip_child.py",
        [str(runtime)],
        timeout=timeout_s,
        notice_after=NOTICE_AFTER_S,
        notice=f"doctor --deep: still waiting for the HIP runtime {runtime} to start (up to {timeout_s:g} s)",
    )
    hip = run.stage("hip") or {}
    hip.pop("stage", None)
    finished = run.stage("done") is not None and run.death is None
    failure = None if finished else f"the probe process ended with {run.death or 'no answer'}"
    if run.timed_out is not None:
        failure = f"the probe did not finish within {run.timed_out:.0f} s"
    return HipProbe(str(runtime), finished, hip, pjrt, failure)


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
    return results
