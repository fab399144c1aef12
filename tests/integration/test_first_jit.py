"""`doctor --deep`'s first jit: a real child importing jax, compiling and running on 'rocm' (the stand-in
PJRT plugin on a synthetic GPU machine), and real failing children: libraries (compiled here, test
fixtures) that abort or hang when jax creates its client. Failure classes no library here can
produce are checked on recorded messages, each with where it was recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.first_jit import classify, jit_findings, run_first_jit
from tests.support.environment import REPO
from tests.support.native import compile_shared, pjrt_table_source
from tests.support.sysroots import make_sysroot

# Every PJRT function aborts (or hangs), but PJRT_Plugin_Initialize and _Attributes answer: the loader's
# child-process load test passes, and the first call jax makes after them, PJRT_Client_Create, does not.
_BEHAVIOUR = {
    "aborts": "static void* broken(void* a) { (void)a; abort(); }",
    "hangs": "static void* broken(void* a) { (void)a; for (;;) pause(); }",
}


def _library_that(directory: Path, behaviour: str) -> Path:
    extra = _BEHAVIOUR[behaviour] + "\nstatic void* fine(void* a) { (void)a; return 0; }\n"
    source = pjrt_table_source(functions="broken", initialize="fine", attributes="fine", extra=extra)
    return compile_shared(directory, f"client_create_{behaviour}", source)


def _environ(root: Path, library: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    return {**keep, "PYTHONPATH": str(REPO), "JAX_ROCM_SYSROOT": str(root), "JAX_ROCM_PJRT_LIBRARY": str(library)}


def test_the_first_jit_runs_and_is_reported(tmp_path: Path, standin_library: Path) -> None:
    root = make_sysroot(tmp_path / "machine")
    command = [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--deep", "--json"]
    done = subprocess.run(command, env=_environ(root, standin_library), capture_output=True, text=True, timeout=180)
    report = json.loads(done.stdout)
    first = report["first_jit"]
    assert first["ok"] is True, first
    steps = first["steps"]
    assert steps["compiled"]["seconds"] > 0 and steps["ran"]["ok"] is True and steps["ran"]["max_abs_error"] < 1e-2
    assert "stats" in steps["memory"] and steps["backend"]["devices"]
    assert "first-jit-failed" not in [f["id"] for f in report["findings"]]
    text = subprocess.run(command[:-1], env=_environ(root, standin_library), capture_output=True, text=True)
    assert "  first jit: compiled in " in text.stdout and "result matches numpy" in text.stdout


def test_a_library_that_aborts_when_jax_creates_its_client(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "machine")
    result = run_first_jit(_environ(root, _library_that(tmp_path / "lib", "aborts")), timeout_s=120)
    assert not result.ok and result.cause == "crash" and result.failure == "the process died (SIGABRT)"
    assert result.step == "start the rocm backend" and "imported" in result.steps
    (finding,) = jit_findings(result)
    assert finding.id == "first-jit-failed" and "report it" in finding.fix


def test_a_library_that_hangs_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "machine")
    result = run_first_jit(_environ(root, _library_that(tmp_path / "lib", "hangs")), timeout_s=8)
    assert not result.ok and result.cause == "hang" and result.failure == "no answer within 8 s"
    assert result.step == "start the rocm backend"
    (finding,) = jit_findings(result)
    assert "dmesg" in finding.fix and "failed in: start the rocm backend" in finding.evidence


# Recorded messages: the published 0.10.2 library's own format strings (strings(1) of xla_rocm_plugin.so,
# filled in as XLA fills them), the HIP runtime's abort message quoted in ROCm/legacy-rocm-build#1815,
# and the out-of-memory status jax raises (XLA's BFC allocator).
RECORDED = [
    ("INTERNAL: unable to find ld.lld in PATH: /usr/local/bin:/usr/bin:/bin", "toolchain-missing"),
    ("INTERNAL: Unable to find potential ROCm-Device-Libs dir /opt/rocm/amdgcn/bitcode", "toolchain-missing"),
    ("bitcode module not found at /opt/rocm/amdgcn/bitcode/ocml.bc", "toolchain-missing"),
    ('"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"', "no-code-object"),
    ("INTERNAL: Failed to launch ROCm kernel: fusion with block dimensions: invalid device function", "no-code-object"),
    ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 68719476736 bytes.", "out-of-memory"),
    ("INTERNAL: hipErrorOutOfMemory", "out-of-memory"),
    ("FAILED_PRECONDITION: something nobody has seen before\nsecond line", "other"),
]


@pytest.mark.parametrize(("message", "cause"), RECORDED)
def test_recorded_failure_messages_are_classified(message: str, cause: str) -> None:
    found, meaning = classify(message)
    assert found == cause
    if cause == "other":
        assert meaning == "FAILED_PRECONDITION: something nobody has seen before"
