"""The doctor's report as text: a verdict line, each finding with its fix and evidence, then the facts."""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin._doctor.report import Report


def render_text(report: Report) -> str:
    usable = [g for g in report.gpus if g.usable and g.visible]
    if report.ok:
        targets = ", ".join(sorted({g.gfx_target or "unknown" for g in usable})) or "none"
        verdict = f"ROCm backend: available ({len(usable)} usable GPU(s): {targets})"
    else:
        verdict = "ROCm backend: unavailable; jax will use CPU"
    lines = [verdict]
    for finding in report.findings:
        lines.append(f"  [{finding.severity}] {finding.id}: {finding.summary}")
        lines.append(f"      fix: {finding.fix}")
        lines.extend(f"      evidence: {e}" for e in finding.evidence)
    for gpu in report.gpus:
        product = f" {gpu.product}" if gpu.product else ""
        lines.append(f"  gpu: KFD node {gpu.kfd_node} {gpu.gfx_target or 'unknown'}{product}")
    for install in report.installs or ():
        runtimes = ", ".join(Path(p).name for p in install.hip_runtimes) or "no HIP runtime"
        lines.append(f"  rocm: {install.location} ({install.source}): {install.version or runtimes}")
    lines.append("  packages: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in report.packages))
    if report.library is not None:
        lines.append(f"  library: {report.library.path} (from {report.library.source})")
    if not report.extensions:
        lines.append(
            "  extension modules: none in this wheel (ROCm custom calls: linalg, sparse, PRNG ... unavailable)"
        )
    for module in report.extensions:
        state = "available" if module.available else f"unavailable: {', '.join(module.missing)} not found"
        source = module.source or {}
        origin = f" (from {source['wheel']})" if source.get("wheel") else f" ({source['kind']})" if source else ""
        lines.append(f"  extension: {module.module}{origin}: {module.capability} {state}")
    return "\n".join(lines)
