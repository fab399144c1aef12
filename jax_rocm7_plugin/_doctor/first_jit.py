"""The first jit of `doctor --deep`: one small program compiled and run on the 'rocm' backend in a child.

Users' next failures after "the backend comes up" are at the first compile or the first kernel. The
child (`_binary/jit_child.py`) imports jax as a program would, with JAX_PLATFORMS=rocm, puts a matrix
on the first device, compiles and runs a jitted matmul and reduction, checks the result against
numpy and asks the device for its memory as XLA sees it. A failure is classified from its message
(CAUSES: the words XLA, HIP and the runtime use, taken from the published libraries' strings and the
issues named there), and otherwise reported with its raw tail; a hang past the deadline and a death
by signal are said as such, with the step they happened in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._record import NamedTuple

DEFAULT_TIMEOUT_S = 60.0
NOTICE_AFTER_S = 10.0
# (cause, what it means, pattern over the error text). First match wins.
CAUSES: tuple[tuple[str, str, str], ...] = (
    (
        "toolchain-missing",
        "XLA could not find ROCm's device bitcode or the ld.lld linker it compiles kernels with",
        # 0.10.x strings: "Unable to find potential ROCm-Device-Libs dir", "bitcode module not found at",
        # "unable to find ld.lld in PATH" (ROCm/xla#142, rocm-install-on-linux#685, TheRock#4269)
        r"ROCm-Device-Libs|bitcode module (?:is required .* but was )?not found|unable to find ld\.lld|"
        r"ld\.lld(?: \(in-process\))? execute fail|ocml\.bc|oclc_[a-z_]+\.bc",
    ),
    (
        "no-code-object",
        "the library (or a kernel library it uses) has no code object for this GPU",
        # HIP: hipErrorNoBinaryForGpu, "invalid device function" (rocm-jax#132, #234)
        r"hipErrorNoBinaryForGpu|NoBinaryForGpu|invalid device function|no kernel image|"
        r"Unable to find code object for all current devices",
    ),
    (
        "out-of-memory",
        "the GPU ran out of memory",
        r"RESOURCE_EXHAUSTED|[Oo]ut of memory|hipErrorOutOfMemory|OOM",
    ),
)


class FirstJit(NamedTuple):
    ok: bool
    steps: dict[str, dict[str, Any]]  # what each step the child finished reported
    failure: str | None = None  # how it failed, in words
    cause: str | None = None  # a CAUSES key, "hang", "crash", or "other"
    step: str | None = None  # where it failed
    tail: str | None = None  # the raw error text

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


def run_first_jit(environ: Mapping[str, str], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> FirstJit:
    """The child, with this environment plus JAX_PLATFORMS=rocm, under `timeout_s` seconds."""
    from jax_rocm7_plugin._binary.child import run_script

    run = run_script(
        "jit_child.py",
        [],
        timeout=timeout_s,
        notice_after=NOTICE_AFTER_S,
        notice=f"doctor --deep: still compiling and running the first jit on 'rocm' (up to {timeout_s:g} s)",
        with_site={**environ, "JAX_PLATFORMS": "rocm"},
    )
    done = ("begin", "done", None)  # the records that are no step's answer
    steps = {
        r["stage"]: {k: v for k, v in r.items() if k != "stage"} for r in run.records if r.get("stage") not in done
    }
    began = run.stage("begin")
    step = str(began["step"]) if began is not None else "start python"  # where a hang or a death happened
    if run.timed_out is not None:
        return FirstJit(False, steps, f"no answer within {run.timed_out:g} s", "hang", step, run.stderr_tail)
    if run.death is not None and run.stage("done") is None:
        return FirstJit(False, steps, f"the process died ({run.death})", "crash", step, run.stderr_tail)
    error = steps.get("error")
    if error is not None:
        message = str(error.get("message", ""))
        cause, meaning = classify(message)
        return FirstJit(False, steps, meaning, cause, str(error.get("step")), message[-2000:])
    ran = steps.get("ran", {})
    if not ran.get("ok"):
        return FirstJit(False, steps, f"wrong result (max abs error {ran.get('max_abs_error')})", "other", "run")
    return FirstJit(True, steps)


def classify(message: str) -> tuple[str, str]:
    """(cause, what it means) of an error text; ("other", its first line) when no pattern matches."""
    for cause, meaning, pattern in CAUSES:
        if re.search(pattern, message):
            return cause, meaning
    first = message.strip().splitlines()[0] if message.strip() else "an error without a message"
    return "other", first[:300]


def jit_findings(result: FirstJit) -> list[Finding]:
    if result.ok:
        return []
    evidence = tuple(
        line
        for line in (
            f"failed in: {result.step}",
            *(result.tail or "").strip().splitlines()[-6:],
        )
        if line
    )
    return [catalog.first_jit_failed(result.cause or "other", result.failure or "it failed", evidence)]


def summary_lines(result: FirstJit) -> list[str]:
    """The doctor's text lines for a first jit that worked: times and memory."""
    steps = result.steps
    compiled, ran, memory = steps.get("compiled", {}), steps.get("ran", {}), steps.get("memory", {}).get("stats", {})
    devices = steps.get("backend", {}).get("devices", [])
    line = (
        f"  first jit: compiled in {compiled.get('seconds', 0):.2f} s, ran in {ran.get('seconds', 0) * 1000:.1f} ms "
        f"on {devices[0] if devices else 'rocm'} (of {len(devices)}), result matches numpy"
    )
    limit = memory.get("bytes_limit")
    if limit:
        line += (
            f"; XLA's memory limit {limit / 1024**3:.1f} GiB, {memory.get('bytes_in_use', 0) / 1024**2:.0f} MiB in use"
        )
    return [line]
