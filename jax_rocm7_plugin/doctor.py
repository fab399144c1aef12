"""Why does (or doesn't) this machine get RocmDevice? Same probes and findings as the loader.

Unlike the loader, the doctor keeps going after the first problem so the report
lists every cause. Without --deep it neither imports jax nor loads a GPU
library; with --deep a child process starts the HIP runtime (hip_probe.py).
Findings are gathered in the loader's order, so the doctor's first error is the
loader's warning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from jax_rocm7_plugin import client_options, coverage, environment, packages, runtime_checks, versions
from jax_rocm7_plugin import findings as catalog
from jax_rocm7_plugin.findings import Finding, most_severe_first
from jax_rocm7_plugin.gfx_targets import product_name
from jax_rocm7_plugin.ld_resolve import DependencyReport
from jax_rocm7_plugin.library import LIBRARY_ENV, LibraryChoice, library_targets, locate_library
from jax_rocm7_plugin.machine import MachineState, machine_findings, probe_within_deadline, unknown_state
from jax_rocm7_plugin.packages import installed_version
from jax_rocm7_plugin.rocm_install import RocmInstall
from jax_rocm7_plugin.version import __version__ as PLUGIN_VERSION

HIP_SONAME = runtime_checks.HIP_SONAME


class Report(NamedTuple):
    findings: list[Finding]
    gpus: list[dict[str, Any]]
    library: dict[str, Any]
    packages: dict[str, str | None]
    sysroot: str
    rocm: dict[str, Any] | None = None
    extensions: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        return not any(f.blocks_rocm for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "gpus": self.gpus,
            "rocm": self.rocm or {},
            "library": self.library,
            "packages": self.packages,
            "extensions": self.extensions or [],
            "sysroot": self.sysroot,
        }


def diagnose(environ: Mapping[str, str], root: Path, library: Path | None = None, *, deep: bool = False) -> Report:
    env = dict(environ)
    if library is not None:
        env[LIBRARY_ENV] = str(library)
    found: list[Finding] = environment.variable_findings(env, root)
    if environment.sysroot_finding(env) is not None:
        # Nothing under that root can be read: the variable is the finding.
        return Report(found, [], {"found": False}, {"jax-rocm7-plugin": PLUGIN_VERSION}, str(root))
    found.extend(environment.platforms_findings(env))

    probed = probe_within_deadline(root)
    state = probed if isinstance(probed, MachineState) else unknown_state(root)
    found.extend(machine_findings(state) if isinstance(probed, MachineState) else [probed])
    _, visible = environment.visible_selection(env, state.topology.gpus)
    found.extend(environment.visible_device_findings(env, state.topology.gpus))

    choice = locate_library(env)
    library = choice if isinstance(choice, LibraryChoice) else None
    if isinstance(choice, Finding):
        found.append(choice)
    library_info: dict[str, Any] = _library(library) if library is not None else {"found": False}

    jaxlib = installed_version("jaxlib")
    pjrt_version = library.pjrt_version if library is not None else None
    found.extend(versions.version_findings(PLUGIN_VERSION, jaxlib, pjrt_version))
    found.extend(client_options.env_findings(env))

    targets = library_info.get("amdgpu_targets")
    found.extend(coverage.gpu_findings(env, state, targets, root))

    runtime = runtime_checks.runtime_state(
        library.path if library is not None else None,
        library.dynamic.needed if library is not None and library.dynamic is not None else None,
        runtime_checks.extension_modules(),
        root,
        env,
    )
    found.extend(runtime.findings)
    installs, dependencies = runtime.installs, runtime.dependencies
    if dependencies is not None:
        library_info["missing_dependencies"] = dependencies.missing_names
    found.extend(_pip_rocm_findings(env))
    if library is not None and dependencies is not None and not dependencies.missing:
        from jax_rocm7_plugin import library_probe

        # The loader's own test, in a child process (cached): does the library survive being loaded?
        refused = library_probe.verdict_finding(library.path, library_probe.probe(library.path, "pjrt", env))
        found.extend([refused] if refused is not None else [])

    found.extend(packages.plugin_findings(packages.inventory()))

    rocm: dict[str, Any] = {"installs": [_install_json(i) for i in installs], "hip": None}
    if deep:
        rocm["hip"] = _deep(found, installs, dependencies, library)

    report_packages = {
        "jax-rocm7-plugin": PLUGIN_VERSION,
        "jax-rocm7-pjrt": installed_version("jax-rocm7-pjrt"),
        "jax": installed_version("jax"),
        "jaxlib": jaxlib,
    }
    gpus = _gpus(state, visible, targets, env)
    modules = _extensions(runtime.extensions)
    return Report(most_severe_first(found), gpus, library_info, report_packages, str(root), rocm, modules)


def _extensions(modules: tuple[runtime_checks.ExtensionState, ...]) -> list[dict[str, Any]]:
    """The ROCm extension modules the plugin carries: what each gives, where it came from, if it loads."""
    from jax_rocm7_plugin.extensions import CAPABILITIES, build_info

    recorded = (build_info() or {}).get("modules", {})
    return [
        {
            "module": m.module,
            "capability": CAPABILITIES.get(m.module, m.module),
            "available": not m.missing,
            "missing": list(m.missing),
            "source": recorded.get(m.module),
        }
        for m in modules
    ]


def internal_error(error: Exception, root: Path) -> Report:
    """The report when a probe fails in a way none of the findings foresee."""
    finding = Finding(
        "doctor-internal-error",
        "error",
        f"the doctor failed unexpectedly ({type(error).__name__}: {error})",
        "report this at the project's issue tracker with the command you ran",
    )
    return Report([finding], [], {"found": False}, {"jax-rocm7-plugin": PLUGIN_VERSION}, str(root))


def _library(choice: LibraryChoice) -> dict[str, Any]:
    """The report's `library` object; locate_library has checked it is a readable PJRT plugin."""
    assert choice.dynamic is not None
    return {
        "found": True,
        "path": str(choice.path),
        "source": choice.source,
        "version": choice.pjrt_version,
        "needed": list(choice.dynamic.needed),
        "runpath": list(choice.dynamic.runpath),
        "exports": list(choice.dynamic.exports),
        "amdgpu_targets": library_targets(choice),
    }


def _pip_rocm_findings(env: Mapping[str, str]) -> list[Finding]:
    from jax_rocm7_plugin import rocm_pip

    pip_rocm = rocm_pip.pip_rocm_used(env)
    return rocm_pip.bitcode_findings(pip_rocm) if pip_rocm is not None else []


def _install_json(install: RocmInstall) -> dict[str, Any]:
    return {
        "location": install.location,
        "source": install.source,
        "version": install.version,
        "major": install.major,
        "hip_runtimes": [str(p) for p in install.hip_runtimes],
    }


def _deep(
    found: list[Finding],
    installs: list[RocmInstall],
    dependencies: DependencyReport | None,
    choice: LibraryChoice | None,
) -> dict[str, Any]:
    from jax_rocm7_plugin import hip_probe

    runtime = dependencies.found.get(HIP_SONAME) if dependencies is not None else None
    if runtime is None:  # not the library's runtime: the newest one installed, to say what it is
        candidates = sorted((p for i in installs for p in i.hip_runtimes), key=lambda p: p.name, reverse=True)
        runtime = candidates[0] if candidates else None
    if runtime is None:
        return {"probed": False, "why": "no HIP runtime to load"}
    library = choice.path if choice is not None and dependencies is not None and not dependencies.missing else None
    probe = hip_probe.run_probe(runtime, library)
    found.extend(_deep_findings(probe))
    found[:] = _merge_same_ids(found)  # diagnose() orders them
    return {"probed": True, **probe.to_json()}


def _deep_findings(probe: Any) -> list[Finding]:
    results: list[Finding] = []
    hip = probe.hip
    where = f"deep probe of {probe.runtime}"
    if not hip.get("loaded", False):
        why = hip.get("error") or probe.failure or "no answer"
        return [catalog.hip_probe_failed(f"the HIP runtime {probe.runtime} could not be started", (why,))]
    runtime_version = hip.get("runtime_version", {})
    text = runtime_version.get("text")
    if runtime_version.get("code") == 0 and text and not text.startswith("7."):
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


def _merge_same_ids(found: list[Finding]) -> list[Finding]:
    """One finding per id: evidence of later duplicates (from the deep probe) joins the first."""
    merged: dict[str, Finding] = {}
    for finding in found:
        first = merged.get(finding.id)
        if first is None:
            merged[finding.id] = finding
        else:
            merged[finding.id] = first._replace(evidence=first.evidence + finding.evidence)
    return list(merged.values())


def _gpus(
    state: MachineState, visible: list[int], targets: list[str] | None, env: Mapping[str, str]
) -> list[dict[str, Any]]:
    usable = {g.node_index for g in state.usable_gpus}
    nodes = state.topology.gpus
    covered = {
        c.node_index: c.covered_by
        for c in coverage.gpu_coverage([(i, n.index, n.gfx_target) for i, n in enumerate(nodes)], targets or (), env)
    }
    return [
        {
            "kfd_node": g.node_index,
            "gfx_target": g.gfx_target,
            "product": product_name(g.gfx_target),
            "render_node": str(g.render_node.path) if g.render_node else None,
            "usable": g.node_index in usable,
            "visible": position in visible,
            "library_code": covered.get(g.node_index) if targets else None,
        }
        for position, g in enumerate(state.gpus)
    ]


def render_text(report: Report) -> str:
    usable = [g for g in report.gpus if g["usable"] and g["visible"]]
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
    for gpu in report.gpus:
        product = f" {gpu['product']}" if gpu["product"] else ""
        lines.append(f"  gpu: KFD node {gpu['kfd_node']} {gpu['gfx_target'] or 'unknown'}{product}")
    for install in (report.rocm or {}).get("installs", []):
        runtimes = ", ".join(Path(p).name for p in install["hip_runtimes"]) or "no HIP runtime"
        lines.append(f"  rocm: {install['location']} ({install['source']}): {install['version'] or runtimes}")
    lines.append("  packages: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in report.packages.items()))
    if report.library.get("found"):
        lines.append(f"  library: {report.library['path']} (from {report.library['source']})")
    if not report.extensions:
        lines.append(
            "  extension modules: none in this wheel (ROCm custom calls: linalg, sparse, PRNG ... unavailable)"
        )
    for module in report.extensions or []:
        state = "available" if module["available"] else f"unavailable: {', '.join(module['missing'])} not found"
        source = module["source"] or {}
        origin = f" (from {source['wheel']})" if source.get("wheel") else f" ({source['kind']})" if source else ""
        lines.append(f"  extension: {module['module']}{origin}: {module['capability']} {state}")
    return "\n".join(lines)


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)
