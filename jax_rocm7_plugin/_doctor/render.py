"""The doctor's report as text: the verdict, then the findings (the first error first, findings that share a
cause and a fix as one entry listing what they concern, findings that follow from another folded under it), then
the facts.

Kept to one screen where nothing can work: evidence is cut to a few lines per entry, and extension
module details are shown only where they can matter (a usable GPU) unless `verbose`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._pages.html import folded_lead, folded_phrase

EVIDENCE_LINES = 3  # per entry, unless verbose


def group_findings(findings: Iterable[Finding]) -> list[list[Finding]]:
    """Findings with the same id and fix together, in the order of each group's first finding."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.id, finding.fix), []).append(finding)
    return list(groups.values())


def fold(findings: Iterable[Finding]) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """The findings to show, and per cause the findings that follow from it (`Finding.follows`, present): without
    --verbose they fold into the cause's entry as one line (--json keeps every finding, each saying what it follows
    from)."""
    found = list(findings)
    present = {f.id for f in found}
    folded: dict[str, list[Finding]] = {}
    shown = []
    for finding in found:
        if finding.follows is not None and finding.follows in present:
            folded.setdefault(finding.follows, []).append(finding)
        else:
            shown.append(finding)
    return shown, folded


def _folded_line(folded: list[Finding], report: Report) -> str:
    missing = report.library.missing_dependencies if report.library is not None else None
    ids = [f.id for f in folded]
    return f"      {folded_lead(ids)}: {folded_phrase(ids, len(missing or ()))} (--verbose lists them)"


def _entry(group: list[Finding], verbose: bool) -> Iterator[str]:
    first = group[0]
    evidence = [line for finding in group for line in finding.evidence]
    if len(group) == 1:
        name = f"{first.id} {first.known_issue}" if first.known_issue else first.id
        yield f"  [{first.severity}] {name}: {first.summary}"
    else:
        yield f"  [{first.severity}] {first.id} ({len(group)}):"
        yield from (f"      - {finding.summary}" for finding in group)
    yield f"      fix: {first.checked_fix()}"
    shown = evidence if verbose else evidence[:EVIDENCE_LINES]
    yield from (f"      evidence: {line}" for line in shown)
    if len(shown) < len(evidence):
        yield f"      evidence: ... {len(evidence) - len(shown)} more (--verbose)"


def render_text(report: Report, *, verbose: bool = False) -> str:
    usable = [g for g in report.gpus if g.usable and g.visible]
    from jax_rocm7_plugin._findings import PROGRAMS_ABORT

    targets = ", ".join(sorted({g.gfx_target or "unknown" for g in usable})) or "none"
    errors = [f for f in report.findings if f.blocks_rocm]
    if report.ok:
        verdict = f"ROCm backend: available ({len(usable)} usable GPU(s): {targets})"
    elif all(f.id in PROGRAMS_ABORT for f in errors):
        verdict = f"ROCm backend: comes up ({len(usable)} GPU(s): {targets}), but programs will not run: see the error"
    else:
        verdict = "ROCm backend: unavailable; jax will use CPU"
    lines = [verdict]
    shown, folded = (list(report.findings), {}) if verbose else fold(report.findings)
    for group in group_findings(shown):
        lines.extend(_entry(group, verbose))
        if group[0].id in folded:
            lines.append(_folded_line(folded[group[0].id], report))
    for gpu in report.gpus:
        product = f" {gpu.product}" if gpu.product else ""
        memory = ""
        if gpu.memory_bytes is not None:
            from jax_rocm7_plugin._machine.memory import gib

            memory = f", {'APU, VRAM carve-out' if gpu.apu else 'VRAM'} {gib(gpu.memory_bytes)}"
        lines.append(f"  gpu: KFD node {gpu.kfd_node} {gpu.gfx_target or 'unknown'}{product}{memory}")
    for install in report.installs or ():
        runtimes = ", ".join(Path(p).name for p in install.hip_runtimes) or "no HIP runtime"
        lines.append(f"  rocm: {install.location} ({install.source}): {install.version or runtimes}")
    if report.first_jit is not None and report.first_jit.get("ok"):
        from jax_rocm7_plugin._doctor.first_jit import FirstJit, summary_lines

        lines.extend(summary_lines(FirstJit(**report.first_jit)))
    lines.append("  packages: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in report.packages))
    if report.library is not None:
        lines.append(f"  library: {report.library.path} (from {report.library.source})")
    lines.extend(_extension_lines(report, verbose or bool(usable)))
    return "\n".join(lines)


def _extension_lines(report: Report, detailed: bool) -> list[str]:
    if not report.extensions:
        return ["  extension modules: none in this wheel (ROCm custom calls: linalg, sparse, PRNG ... unavailable)"]
    if not detailed:
        loading = sum(1 for m in report.extensions if m.available)
        return [f"  extension modules: {len(report.extensions)} in this wheel, {loading} would load (--verbose)"]
    lines = []
    for module in report.extensions:
        state = "available" if module.available else f"unavailable: {', '.join(module.missing)} not found"
        source = module.source or {}
        origin = f" (from {source['wheel']})" if source.get("wheel") else f" ({source['kind']})" if source else ""
        lines.append(f"  extension: {module.module}{origin}: {module.capability} {state}")
    return lines


def render_html(report: Report) -> str:
    """The doctor's page (`doctor --html`, the report bundle's index): the verdict as the text's first line says
    it, the findings, and the node's GPUs as read (_pages/doctor.py)."""
    from jax_rocm7_plugin._pages import doctor

    headline = render_text(report).splitlines()[0]
    health = report.health
    numa = {g.ordinal: g.numa_node for g in health.gpus} if health is not None else {}
    return doctor.render(report.to_json(), headline, health, numa)
