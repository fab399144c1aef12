"""`doctor --html`: this machine's GPUs. The verdict and the findings with their fixes (and whether the doctor
checked each fix) first; then the topology: each GPU with its gfx target, PCI address, NUMA node and partition
mode, its XGMI links to its peers and its PCIe link to the host drawn with their state. A GPU is marked by the
findings that name it (a degraded link, a GPU outside its hive, a capped GPU ...), never by a rule of the page's.

Drawn from the doctor's report (its JSON), its first line of text (the verdict, said once) and the node's health
as the doctor read it (`_machine/gpu_health.py`'s NodeHealth, read by attribute).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from jax_rocm7_plugin._pages import html
from jax_rocm7_plugin._pages.html import COLOURS, MARK, esc
from jax_rocm7_plugin._pages.svg import Svg, shorten


class GpuMark(NamedTuple):
    ordinal: int
    why: tuple[str, ...]  # the ids of the findings that name it; empty: none
    severity: str  # the worst of them ("ok": none)

    @property
    def link_degraded(self) -> bool:
        return LINK_DEGRADED in self.why


LINK_DEGRADED = "pcie-link-degraded"  # the node-health finding whose GPU's PCIe line is drawn red


def marks(report: Mapping[str, Any], health: Any) -> list[GpuMark]:
    """Each GPU with the findings that concern it (their `concerns.gpus`, by PCI address, else by ordinal: a link
    below what both ends can do, a GPU out of its hive, a cap below its default, ...). The page decides nothing of
    its own, and reads no finding's words."""
    found = []
    for gpu in list(health.gpus) if health is not None else []:
        named = [
            f
            for f in report.get("findings", ())
            if any(_is(gpu, ref) for ref in (f.get("concerns") or {}).get("gpus", ()))
        ]
        severity = html.worst(str(f.get("severity")) for f in named) if named else "ok"
        found.append(GpuMark(gpu.ordinal, tuple(dict.fromkeys(str(f.get("id")) for f in named)), severity))
    return found


def _is(gpu: Any, ref: Mapping[str, Any]) -> bool:
    """Whether a finding's GpuRef (its JSON) is this GPU of the node's health."""
    if ref.get("pci") is not None and gpu.pci is not None:
        return bool(ref["pci"] == gpu.pci)
    return ref.get("ordinal") == gpu.ordinal


def _link_text(link: Any, degraded: bool) -> str:
    if link is None or link.speed is None:
        return "PCIe link not read"
    best = f" (can do {link.best_speed:g} GT/s x{link.best_width})" if degraded else ""
    return f"{link.speed:g} GT/s x{link.width}{best}"


def topology_svg(health: Any, gpu_marks: Sequence[GpuMark], numa: Mapping[int, int | None]) -> str:
    """The GPUs in a row (two rows past eight), XGMI links as arcs above, each PCIe link a line down to its NUMA
    node's bar; degraded ones red and dashed, marked GPUs outlined and labelled."""
    gpus = list(health.gpus)
    per_row = 8 if len(gpus) > 8 else max(len(gpus), 1)
    box_w, box_h, gap = 132, 92, 14
    rows = -(-len(gpus) // per_row)
    arc_room = 70 if any(g.xgmi_peers for g in gpus) else 12
    host_room = 70
    width = max(per_row * (box_w + gap) + 20, 480)
    row_h = box_h + host_room + arc_room
    svg = Svg(
        width,
        rows * row_h + 10,
        "This machine's GPUs: XGMI links above, PCIe links to the host below; marked GPUs outlined",
        "topology",
    )
    position: dict[int, tuple[float, float]] = {}
    for n, gpu in enumerate(gpus):
        x0 = 10 + (n % per_row) * (box_w + gap)
        y0 = (n // per_row) * row_h + arc_room
        position[gpu.ordinal] = (x0, y0)
    mark_of = {m.ordinal: m for m in gpu_marks}
    drawn: set[tuple[int, int]] = set()
    for gpu in gpus:  # XGMI: an arc per pair of peers, drawn once
        for peer in gpu.xgmi_peers:
            pair = (min(gpu.ordinal, peer), max(gpu.ordinal, peer))
            if pair in drawn or peer not in position:
                continue
            drawn.add(pair)
            (ax, ay), (bx, by) = position[pair[0]], position[pair[1]]
            if ay != by:
                svg.line(ax + box_w / 2, ay, bx + box_w / 2, by, "#6a3d9a", 1, "2 2")
                continue
            x1, x2 = ax + box_w / 2, bx + box_w / 2
            lift = min(arc_room - 8, 10 + abs(x2 - x1) / 14)
            svg.add(
                f'<path d="M{x1:.1f},{ay:.1f} Q{(x1 + x2) / 2:.1f},{ay - 2 * lift:.1f} {x2:.1f},{ay:.1f}" '
                f'fill="none" stroke="#6a3d9a" stroke-width="1.2" stroke-opacity="0.55" class="xgmi" '
                f'data-pair="{pair[0]}-{pair[1]}"><title>XGMI link: GPU {pair[0]} - GPU {pair[1]}</title></path>'
            )
    for gpu in gpus:
        x0, y0 = position[gpu.ordinal]
        mark = mark_of.get(gpu.ordinal, GpuMark(gpu.ordinal, (), "ok"))
        marked = bool(mark.why) and mark.severity in ("error", "warning")
        degraded = mark.link_degraded
        # The PCIe link, down to its NUMA node's bar.
        bottom = y0 + box_h + host_room - 22
        svg.line(
            x0 + box_w / 2,
            y0 + box_h,
            x0 + box_w / 2,
            bottom,
            "#c0392b" if degraded else "#777",
            3 if degraded else 1.5,
            "5 3" if degraded else "",
        )
        svg.text(
            x0 + box_w / 2 + 4,
            y0 + box_h + 18,
            (f"{gpu.link.speed:g} GT/s x{gpu.link.width}" if gpu.link and gpu.link.speed else "link ?")
            + (" \u25bc" if degraded else ""),
            size=9,
            fill="#c0392b" if degraded else "#444",
            weight="bold" if degraded else "normal",
        )
        node = numa.get(gpu.ordinal)
        svg.rect(x0, bottom, box_w, 18, "#eceff3", title=f"the host: NUMA node {node if node is not None else '?'}")
        svg.text(
            x0 + box_w / 2, bottom + 13, f"CPU, NUMA node {node if node is not None else '?'}", size=9, anchor="middle"
        )
        lines = [
            f"GPU {gpu.ordinal}  {gpu.target or '?'}",
            gpu.pci or "(no PCI address)",
            f"{gpu.compute_partition or '?'}/{gpu.memory_partition or '?'}",
            "hive " + (f"{gpu.hive:x}"[-6:] if gpu.hive else "none") + f" \u00b7 {len(gpu.xgmi_peers)} peers",
            f"cap {gpu.power_cap_watts:g} W" if gpu.power_cap_watts is not None else "cap ?",
        ]
        tip = "\n".join([*lines, _link_text(gpu.link, degraded), *(f"marked: {w}" for w in mark.why)])
        svg.add(
            f'<g class="gpu{" marked" if marked else ""}" data-gpu="{gpu.ordinal}" '
            f'data-pci="{esc(gpu.pci or "")}" data-marked="{str(marked).lower()}">'
        )
        svg.rect(
            x0,
            y0,
            box_w,
            box_h,
            "#fff4dc" if marked else "#f7f9fc",
            title=tip,
            stroke=MARK if marked else COLOURS[mark.severity] if mark.why else "#9aa5b1",
            stroke_width=3 if marked else 1.2,
        )
        svg.rect(x0, y0, 6, box_h, COLOURS[mark.severity])
        for i, text in enumerate(lines):
            svg.text(x0 + 12, y0 + 16 + i * 15, text, size=10 if i else 11, weight="bold" if i == 0 else "normal")
        if mark.why:
            svg.text(
                x0 + 2,
                y0 + box_h + 32,
                "\u25b2 " + shorten(mark.why[0], 26),
                size=9,
                weight="bold",
                fill=MARK,
            )
        svg.add("</g>")
    return svg.render()


def render(report: Mapping[str, Any], headline: str, health: Any, numa: Mapping[int, int | None]) -> str:
    """The page of one doctor run: `report` as `doctor --json` prints it, `headline` its first line of text,
    `health` the node's health (None: not read), `numa` each GPU's NUMA node by ordinal."""
    level = "ok" if report.get("ok") else "error"
    warned = [f for f in report.get("findings", ()) if f.get("severity") == "warning"]
    if level == "ok" and warned:
        level = "warning"
    body = ["<h1>ROCm doctor</h1>", html.verdict(level, headline, f"sysroot {report.get('sysroot', '/')}")]
    missing = (report.get("library") or {}).get("missing_dependencies") or ()
    body.append(html.findings(list(report.get("findings", ())), missing_libraries=len(missing)))
    if health is not None and health.gpus:
        gpu_marks = marks(report, health)
        body.append(f"<h2>GPUs: {len(health.gpus)}</h2>")
        body.append(
            html.figure(
                topology_svg(health, gpu_marks, numa),
                "Each box a GPU; arcs: XGMI links; lines down: PCIe links to the host.",
                "topology-figure",
            )
        )
        marked = [m for m in gpu_marks if m.why]
        if marked:
            body.append(
                '<ul class="marks" id="marked">'
                + "".join(
                    f'<li data-gpu="{m.ordinal}">\u25b2 <b>GPU {m.ordinal}</b>: {esc("; ".join(m.why))}</li>'
                    for m in marked
                )
                + "</ul>"
            )
        rows = [
            (
                [
                    g.ordinal,
                    g.pci or "",
                    g.target or "",
                    "" if numa.get(g.ordinal) is None else numa[g.ordinal],
                    f"{g.compute_partition or '?'}/{g.memory_partition or '?'}",
                    _link_text(g.link, m.link_degraded),
                    f"{g.hive:x}" if g.hive else "none",
                    ", ".join(map(str, g.xgmi_peers)),
                    "" if g.power_cap_watts is None else f"{g.power_cap_watts:g} W",
                    "; ".join(m.why),
                ],
                bool(m.why) and m.severity in ("error", "warning"),
            )
            for g, m in zip(health.gpus, gpu_marks, strict=True)
        ]
        head = ["GPU", "PCI", "gfx", "NUMA", "partition", "PCIe link", "hive", "XGMI peers", "power cap", "marked"]
        body.append(html.table("gpus", head, rows, filtered=False))
    else:
        gpus = report.get("gpus", ())
        body.append(f"<h2>GPUs: {len(gpus)}</h2>")
        rows = [
            (
                [
                    g.get("kfd_node"),
                    g.get("gfx_target") or "",
                    g.get("product") or "",
                    g.get("usable"),
                    g.get("visible"),
                ],
                not g.get("usable"),
            )
            for g in gpus
        ]
        body.append(html.table("gpus", ["KFD node", "gfx", "product", "usable", "visible"], rows, filtered=False))
    library = report.get("library", {})
    if library.get("found"):
        body.append("<h2>Library</h2>")
        body.append(
            f"<p><code>{esc(library.get('path'))}</code> ({esc(library.get('source'))}), targets: "
            f"{esc(', '.join(library.get('amdgpu_targets') or []) or 'not known')}</p>"
        )
    return html.document("ROCm doctor", body)
