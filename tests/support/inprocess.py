"""The loader's plan and the doctor's report, in this process, for a synthetic machine (a sysroot)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from jax_rocm7_plugin._doctor.diagnose import diagnose
from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._loader.register import Plan, plan_registration
from jax_rocm7_plugin._settings import PJRT_LIBRARY, read_settings


def _environ(environ: Mapping[str, str], library: Path | None) -> dict[str, str]:
    return {**environ, PJRT_LIBRARY: str(library)} if library is not None else dict(environ)


def doctor(environ: Mapping[str, str], root: Path, library: Path | None = None, *, deep: bool = False) -> Report:
    """What `doctor --sysroot ROOT [--library LIBRARY]` reports with these variables. Every fix it gives is held
    to the access policy here, so each test that runs the doctor in process also checks that no fix widens access."""
    report = diagnose(read_settings(_environ(environ, library), sysroot=root), deep=deep)
    assert_no_widening(report.findings)
    return report


def assert_no_widening(findings: Sequence[Finding]) -> None:
    """No fix joins a privileged group, makes a node world-writable or turns a protection off
    (_policy/access_policy.json)."""
    try:
        from jax_rocm7_plugin._policy.access_policy import widening
    except ImportError:  # benchmarks/diagnosis.py --source: a doctor from before the policy, measured as it was
        return
    widened = [(f.id, why) for f in findings if (why := widening(f.fix)) is not None]
    assert widened == [], widened


def loader_plan(
    environ: Mapping[str, str], root: Path, library: Path | None = None, *, load: bool = True
) -> Plan | Finding:
    """What the loader decides on that machine (without registering anything)."""
    plan = plan_registration(read_settings({**_environ(environ, library), "JAX_ROCM_SYSROOT": str(root)}), load=load)
    if isinstance(plan, Finding):
        assert_no_widening([plan])
    return plan
