"""Why does (or doesn't) this machine get RocmDevice? Same probes and findings as the loader.

Unlike the loader, the doctor keeps going after the first problem so the report
lists every cause; and it neither imports jax nor loads a GPU library.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jax_rocm7_plugin import versions
from jax_rocm7_plugin.findings import Finding, most_severe_first
from jax_rocm7_plugin.library import LIBRARY_ENV, LibraryChoice, locate_library
from jax_rocm7_plugin.machine import MachineState, machine_findings, probe_machine
from jax_rocm7_plugin.version import __version__ as PLUGIN_VERSION


@dataclass
class Report:
    findings: list[Finding]
    gpus: list[dict[str, Any]]
    library: dict[str, Any]
    packages: dict[str, str | None]
    sysroot: str

    @property
    def ok(self) -> bool:
        return not any(f.blocks_rocm for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "gpus": self.gpus,
            "library": self.library,
            "packages": self.packages,
            "sysroot": self.sysroot,
        }


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _gpus(state: MachineState) -> list[dict[str, Any]]:
    usable = {g.node_index for g in state.usable_gpus}
    return [
        {
            "kfd_node": g.node_index,
            "gfx_target": g.gfx_target,
            "render_node": str(g.render_node.path) if g.render_node else None,
            "usable": g.node_index in usable,
        }
        for g in state.gpus
    ]


def diagnose(environ: Mapping[str, str], root: Path, library: Path | None = None) -> Report:
    env = dict(environ)
    if library is not None:
        env[LIBRARY_ENV] = str(library)
    state = probe_machine(root)
    found = machine_findings(state)
    choice = locate_library(env)
    if isinstance(choice, Finding):
        found.append(choice)
        library_info: dict[str, Any] = {"found": False}
    else:
        library_info = {
            "found": True,
            "path": str(choice.path),
            "source": choice.source,
            "version": choice.pjrt_version,
        }
    jaxlib = installed_version("jaxlib")
    pjrt_version = choice.pjrt_version if isinstance(choice, LibraryChoice) else None
    found.extend(versions.version_findings(PLUGIN_VERSION, jaxlib, pjrt_version))
    packages = {
        "jax-rocm7-plugin": PLUGIN_VERSION,
        "jax-rocm7-pjrt": installed_version("jax-rocm7-pjrt"),
        "jax": installed_version("jax"),
        "jaxlib": jaxlib,
    }
    return Report(most_severe_first(found), _gpus(state), library_info, packages, str(root))


def render_text(report: Report) -> str:
    usable = [g for g in report.gpus if g["usable"]]
    if report.ok:
        targets = ", ".join(sorted({g["gfx_target"] or "unknown" for g in usable})) or "none"
        verdict = f"ROCm backend: available ({len(usable)} usable GPU(s): {targets})"
    else:
        verdict = "ROCm backend: unavailable; jax will use CPU"
    lines = [verdict]
    for finding in report.findings:
        lines.append(f"  [{finding.severity}] {finding.id}: {finding.summary}")
        lines.append(f"      fix: {finding.fix}")
        lines.extend(f"      evidence: {e}" for e in finding.evidence)
    lines.append("  packages: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in report.packages.items()))
    if report.library.get("found"):
        lines.append(f"  library: {report.library['path']} (from {report.library['source']})")
    return "\n".join(lines)


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)
