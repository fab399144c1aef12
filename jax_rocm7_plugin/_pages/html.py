"""The page's frame: escaping, the inline style sheet, the verdict and the findings with their fixes.

Self-contained by construction: the style is inline, every picture is inline SVG, and the one script (a filter
for the long tables) is inline and optional; nothing names a URL but the page's own anchors and, in a bundle's
index, files beside it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Severity, worst first; the colour of each (colour-blind safe pairs, and never colour alone: every marked
# element also carries a label or an outline).
SEVERITIES = ("error", "warning", "info", "ok", "unknown")
COLOURS = {
    "error": "#c0392b",
    "warning": "#e08e0b",
    "info": "#2f6fb0",
    "ok": "#3a8d4f",
    "unknown": "#9a9a9a",
}
MARK = "#111111"  # the outline of a marked (odd) element

_STYLE = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
  padding: 16px 20px; color: #1c1c1c; background: #fff; max-width: 100%; }
main { max-width: 1360px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 20px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 2px; }
.verdict { font-size: 16px; padding: 8px 12px; border-left: 6px solid; margin: 8px 0 12px; background: #f6f6f6; }
.verdict.error { border-color: #c0392b; } .verdict.warning { border-color: #e08e0b; }
.verdict.ok { border-color: #3a8d4f; } .verdict.info { border-color: #2f6fb0; }
.meta { color: #555; font-size: 12px; }
ol.findings { padding-left: 22px; margin: 4px 0; }
ol.findings li { margin: 6px 0; overflow-wrap: anywhere; }
.sev { display: inline-block; min-width: 62px; padding: 0 6px; border-radius: 3px; color: #fff; font-size: 12px;
  text-align: center; margin-right: 6px; }
.sev.error { background: #c0392b; } .sev.warning { background: #b36b00; } .sev.info { background: #2f6fb0; }
.sev.ok { background: #3a8d4f; } .sev.unknown { background: #777; }
.fix { margin-left: 74px; } .fix b { color: #333; }
.id { color: #666; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
.findings details { margin-left: 74px; font-size: 12px; color: #444; }
figure { margin: 8px 0; max-width: 100%; } figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 12px; color: #444; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; max-width: 100%; }
.table-wrap { max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; overflow-wrap: break-word; }
td.code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; word-break: break-all;
  min-width: 24em; }
th { background: #f0f0f0; } tr.marked td { background: #fff2d6; font-weight: 600; }
.marks { margin: 4px 0; padding-left: 20px; } .marks li { overflow-wrap: anywhere; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f7f7f7; padding: 6px; }
input.filter { margin: 4px 0; padding: 2px 6px; font-size: 12px; width: 260px; }
svg text { font-family: system-ui, "DejaVu Sans", sans-serif; }
@page { size: A4; margin: 12mm; }
@media print { body { padding: 0; font-size: 11px; } main { max-width: none; } input.filter { display: none; }
  figure, table { break-inside: avoid; } }
"""

# Optional: a filter box for the long tables. The page reads the same without it (JavaScript off).
_SCRIPT = """
document.querySelectorAll("input.filter").forEach(function (box) {
  box.hidden = false;
  var table = document.getElementById(box.dataset.table);
  box.addEventListener("input", function () {
    var words = box.value.toLowerCase();
    table.querySelectorAll("tbody tr").forEach(function (row) {
      row.hidden = words !== "" && row.textContent.toLowerCase().indexOf(words) < 0;
    });
  });
});
"""


def esc(value: object) -> str:
    """Text for HTML and SVG content and attributes."""
    return html.escape(str(value), quote=True)


def natural(text: str) -> tuple[object, ...]:
    """A sort key that puts node-2 before node-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def worst(severities: Iterable[str]) -> str:
    """The worst of these severities ("ok" for none)."""
    ranks = [SEVERITIES.index(s) for s in severities if s in SEVERITIES]
    return SEVERITIES[min(ranks)] if ranks else "ok"


def document(title: str, body: Sequence[str], *, scripted: bool = False) -> str:
    """A whole page: the head with its inline style, then the body's parts."""
    script = f"<script>{_SCRIPT}</script>" if scripted else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No fetch of any kind: a page opened on an air-gapped cluster must not try one.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head>\n<body><main>\n"
        + "\n".join(body)
        + f"\n</main>{script}</body></html>\n"
    )


def verdict(level: str, text: str, meta: str = "") -> str:
    """The first thing on every page: one sentence, coloured and labelled by its level."""
    line = (
        f'<div class="verdict {esc(level)}" id="verdict" role="status"><b>{esc(level.upper())}</b>: {esc(text)}</div>'
    )
    return line + (f'<p class="meta">{esc(meta)}</p>' if meta else "")


# Consequences that are things missing (the libraries and modules a missing ROCm takes with it).
MISSING_KINDS = ("library-dependency-missing", "extension-module-unavailable")


def folded_lead(consequences: Sequence[str]) -> str:
    """The words before the folded phrase: "also missing for this reason" where every consequence is missing."""
    return "also missing for this reason" if all(c in MISSING_KINDS for c in consequences) else "also for this reason"


def folded_phrase(consequences: Sequence[str], missing_libraries: int) -> str:
    """What is folded under a cause, as one phrase, the text report's and the pages' words alike: "11 libraries the
    PJRT library needs and 8 extension module(s) jax imports" (`consequences`: their ids; `missing_libraries`: how
    many the library's dependency walk missed)."""
    libraries = missing_libraries if "library-dependency-missing" in consequences else 0
    modules = sum(1 for c in consequences if c == "extension-module-unavailable")
    parts = [f"{libraries} librar{'y' if libraries == 1 else 'ies'} the PJRT library needs"] if libraries else []
    parts += [f"{modules} extension module(s) jax imports"] if modules else []
    others = [c for c in consequences if c not in MISSING_KINDS]
    parts += [", ".join(dict.fromkeys(others))] if others else []
    return " and ".join(parts)


def findings(items: Sequence[Mapping[str, Any]], *, limit_evidence: int = 12, missing_libraries: int = 0) -> str:
    """The findings (as their commands' JSON gives them), each with its fix and, where the doctor says, whether
    the fix was checked; evidence folded. A finding that follows from another one listed (`follows`) is folded into
    its cause's entry, as the text report folds it (`missing_libraries`: how many the library's walk missed)."""
    if not items:
        return '<h2>Findings</h2><p id="findings">None.</p>'
    present = {str(item.get("id")) for item in items}
    folded: dict[str, list[str]] = {}
    for item in items:
        if item.get("follows") in present:
            folded.setdefault(str(item["follows"]), []).append(str(item.get("id")))
    rows = []
    for item in items:
        if item.get("follows") in present:
            continue
        severity = str(item.get("severity", "unknown"))
        parts = [
            f'<li class="finding {esc(severity)}" data-id="{esc(item.get("id", ""))}">',
            f'<span class="sev {esc(severity)}">{esc(severity)}</span>{esc(item.get("summary", ""))} ',
            f'<span class="id">[{esc(item.get("id", ""))}]</span>',
        ]
        if item.get("fix"):
            checked = item.get("fix_check")
            note = f' <span class="id">(fix {esc(checked)})</span>' if checked else ""
            parts.append(f'<div class="fix"><b>Fix:</b> {esc(item["fix"])}{note}</div>')
        concerns = [
            *(f"process {p}" for p in list(item.get("processes", ()))[:16]),
            *(str(h) for h in list(item.get("hosts", ()))[:16]),
        ]
        if concerns:
            parts.append(f'<div class="fix"><b>Concerns:</b> {esc(", ".join(concerns))}</div>')
        consequences = folded.pop(str(item.get("id")), None)  # under the first entry of its cause
        if consequences:
            phrase = folded_phrase(consequences, missing_libraries)
            label = folded_lead(consequences).capitalize() + ":"
            parts.append(f'<div class="fix folded"><b>{label}</b> {esc(phrase)}</div>')
        evidence = list(item.get("evidence", ()))
        if evidence:
            shown = "".join(f"<li>{esc(line)}</li>" for line in evidence[:limit_evidence])
            more = f"<li>... {len(evidence) - limit_evidence} more</li>" if len(evidence) > limit_evidence else ""
            parts.append(f"<details><summary>Evidence ({len(evidence)})</summary><ul>{shown}{more}</ul></details>")
        parts.append("</li>")
        rows.append("".join(parts))
    return f'<h2>Findings</h2><ol class="findings" id="findings">{"".join(rows)}</ol>'


def table(
    table_id: str,
    head: Sequence[str],
    rows: Iterable[tuple[Sequence[object], bool]],
    *,
    filtered: bool,
    code: Sequence[int] = (),
) -> str:
    """A table; rows whose flag is set are marked (bold, shaded). `filtered`: a filter box (script only). `code`:
    the columns that hold paths and stacks (monospace, broken anywhere, lines kept)."""
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join(
        f"<tr{' class=marked' if marked else ''}>"
        + "".join(f"<td{' class=code' if n in code else ''}>{esc(cell)}</td>" for n, cell in enumerate(cells))
        + "</tr>"
        for cells, marked in rows
    )
    box = (
        f'<input class="filter" type="search" hidden data-table="{esc(table_id)}" placeholder="filter rows" '
        'aria-label="filter rows">'
        if filtered
        else ""
    )
    return (
        f'{box}<div class="table-wrap"><table id="{esc(table_id)}"><thead><tr>{header}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def figure(svg: str, caption: str, figure_id: str) -> str:
    return f'<figure id="{esc(figure_id)}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'
