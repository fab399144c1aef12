"""The loader's plan and the doctor's report, in this process, for a synthetic machine (a sysroot)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jax_rocm7_plugin._doctor.diagnose import diagnose
from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._loader.register import Plan, plan_registration
from jax_rocm7_plugin._settings import PJRT_LIBRARY, read_settings


def _environ(environ: Mapping[str, str], library: Path | None) -> dict[str, str]:
    return {**environ, PJRT_LIBRARY: str(library)} if library is not None else dict(environ)


def doctor(environ: Mapping[str, str], root: Path, library: Path | None = None, *, deep: bool = False) -> Report:
    """What `doctor --sysroot ROOT [--library LIBRARY]` reports with these variables."""
    return diagnose(read_settings(_environ(environ, library), sysroot=root), deep=deep)


def loader_plan(
    environ: Mapping[str, str], root: Path, library: Path | None = None, *, load: bool = True
) -> Plan | Finding:
    """What the loader decides on that machine (without registering anything)."""
    return plan_registration(read_settings({**_environ(environ, library), "JAX_ROCM_SYSROOT": str(root)}), load=load)
