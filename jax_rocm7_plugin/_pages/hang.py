"""The hang watcher's page: a timeline per process of where its main thread was at each sample, up to the report,
and the one that holds the others up marked. Drawn from the answers the processes gave (`_job/hang_report.py`'s
Answer and each one's trail of places)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from jax_rocm7_plugin._pages import html
from jax_rocm7_plugin._pages.html import MARK
from jax_rocm7_plugin._pages.svg import Scale, Svg, shorten

_PALETTE = ("#6b8fb8", "#e08e0b", "#1b9e77", "#a6761d", "#7570b3", "#e7298a", "#66a61e", "#666666")


def render(level: str, line: str, answers: Mapping[int, Any], count: int, odd: Sequence[int]) -> str:
    """`line` is the watcher's one-line report at `level`; `answers` by process (host, place, in_jax, seconds,
    frames, trail: ((seconds before the report it began, place, in_jax), ...)); `odd`: the processes it names."""
    body = ["<h1>A hung job</h1>", html.verdict("warning" if level == "warning" else "info", line)]
    body.append(
        html.figure(
            timeline_svg(answers, count, set(odd)),
            "Where each process's main thread was, up to the report (right edge).",
            "timeline-figure",
        )
    )
    rows = []
    for process in range(count):
        answer = answers.get(process)
        if answer is None:
            rows.append(([process, "?", "no answer", "", ""], True))
            continue
        rows.append(
            (
                [process, answer.host, answer.place, f"{answer.seconds:.0f} s", "\n".join(answer.frames[-6:])],
                process in odd,
            )
        )
    body.append("<h2>Every process</h2>")
    body.append(
        html.table(
            "processes",
            ["process", "host", "place", "there for", "innermost frames"],
            rows,
            filtered=count > 16,
            code=(4,),
        )
    )
    return html.document("A hung job", body, scripted=count > 16)


def timeline_svg(answers: Mapping[int, Any], count: int, odd: set[int]) -> str:
    shown = list(range(count)) if count <= 64 else sorted({*odd, *range(64 - min(len(odd), 32))})[:64]
    window = max([a.seconds for a in answers.values()] + [t[0] for a in answers.values() for t in a.trail] + [1.0])
    places = Counter([a.place for a in answers.values()] + [t[1] for a in answers.values() for t in a.trail])
    colour = {place: _PALETTE[i % len(_PALETTE)] for i, (place, _) in enumerate(places.most_common())}
    left, right, row_h, top = 170, 20, 18, 24
    width = 1100
    svg = Svg(
        width,
        top + row_h * len(shown) + 48,
        "Each process's place over time; the ones holding the job up marked",
        "timeline",
    )
    x = Scale(-window, 0, left, width - right)
    for t in range(0, int(window) + 1, max(1, int(window) // 8)):
        svg.line(x(-t), top - 4, x(-t), top + row_h * len(shown), "#eee")
        svg.text(x(-t), top - 8, f"-{t} s" if t else "now", size=9, anchor="middle")
    for row, process in enumerate(shown):
        y0 = top + row * row_h
        answer = answers.get(process)
        marked = process in odd or answer is None
        label = f"process {process} ({answer.host})" if answer is not None else f"process {process}: no answer"
        svg.text(
            left - 6,
            y0 + 12,
            ("\u25b2 " if marked else "") + shorten(label, 28),
            size=10,
            anchor="end",
            weight="bold" if marked else "normal",
            fill=MARK if marked else "#222",
        )
        svg.add(
            f'<g class="process{" marked" if marked else ""}" data-process="{process}" '
            f'data-marked="{str(marked).lower()}">'
        )
        if answer is None:
            svg.rect(
                x(-window),
                y0,
                x(0) - x(-window),
                row_h - 4,
                "#f3f3f3",
                stroke=MARK,
                stroke_width=2,
                title=f"process {process} did not answer: frozen, dead, or its main thread holds the GIL",
            )
        else:
            trail = sorted(answer.trail or ((answer.seconds, answer.place, answer.in_jax),), key=lambda t: -t[0])
            for n, (began, place, in_jax) in enumerate(trail):
                ended = trail[n + 1][0] if n + 1 < len(trail) else 0.0
                svg.rect(
                    x(-began),
                    y0,
                    max(1.0, x(-ended) - x(-began)),
                    row_h - 4,
                    colour.get(place, "#bbb"),
                    title=f"process {process}: {'in jax ' if in_jax else ''}{place}, from -{began:.0f} s to "
                    f"-{ended:.0f} s",
                    stroke=MARK if marked and n == len(trail) - 1 else "none",
                    stroke_width=2 if marked else 0,
                )
        svg.add("</g>")
    y = top + row_h * len(shown) + 14
    for i, (place, _) in enumerate(places.most_common(4)):
        svg.rect(left + i * 230, y, 10, 10, colour[place])
        svg.text(left + i * 230 + 14, y + 9, shorten(place, 36), size=9)
    return svg.render()
