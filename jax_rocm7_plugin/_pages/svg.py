"""Inline SVG, drawn by hand: a few shapes, text, scales, and an axis. Every picture carries a <title> (its text
alternative) and every shape that means something a <title> of its own (the hover text, and what a screen
reader says)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from jax_rocm7_plugin._pages.html import esc


class Look(NamedTuple):
    """How a shape shows beyond its fill."""

    title: str = ""  # the hover text, and what a screen reader says
    stroke: str = "none"
    stroke_width: float = 0
    attrs: str = ""  # more attributes, formatted: ' class="cell" data-marked="true"'


class Svg:
    """One picture, built element by element."""

    def __init__(self, width: float, height: float, title: str, svg_id: str) -> None:
        self.width, self.height, self.title, self.id = width, height, title, svg_id
        self.parts: list[str] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def shape(self, tag: str, geometry: str, fill: str, look: Look | None = None) -> None:
        """A filled shape (`geometry`: its own attributes, already formatted) with its look: hover title, outline,
        and extra attributes (classes, data-*)."""
        look = look or Look()
        tip = f"<title>{esc(look.title)}</title>" if look.title else ""
        self.add(
            f'<{tag} {geometry} fill="{fill}" stroke="{look.stroke}" stroke-width="{look.stroke_width:g}"'
            f"{look.attrs}>{tip}</{tag}>"
        )

    def rect(self, x: float, y: float, w: float, h: float, fill: str, **look: Any) -> None:
        """A rectangle; `look`: Look's fields (title, stroke, stroke_width, attrs)."""
        self.shape("rect", f'x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"', fill, Look(**look))

    def circle(self, x: float, y: float, r: float, fill: str, **look: Any) -> None:
        """A circle; `look` as for rect."""
        self.shape("circle", f'cx="{x:.1f}" cy="{y:.1f}" r="{r:g}"', fill, Look(**look))

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 1, dash: str = "") -> None:
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
            f'stroke-width="{width:g}"{dashed}/>'
        )

    def text(
        self,
        x: float,
        y: float,
        words: str,
        *,
        size: float = 11,
        anchor: str = "start",
        fill: str = "#222",
        weight: str = "normal",
        attrs: str = "",
    ) -> None:
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}" fill="{fill}" '
            f'font-weight="{weight}"{attrs}>{esc(words)}</text>'
        )

    def polyline(self, points: Sequence[tuple[float, float]], stroke: str, width: float = 2, title: str = "") -> None:
        tip = f"<title>{esc(title)}</title>" if title else ""
        coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.add(
            f'<polyline points="{coordinates}" fill="none" stroke="{stroke}" stroke-width="{width:g}">{tip}</polyline>'
        )

    def render(self) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" id="{esc(self.id)}" viewBox="0 0 {self.width:.0f} '
            f'{self.height:.0f}" width="{self.width:.0f}" height="{self.height:.0f}" role="img" '
            f'aria-labelledby="{esc(self.id)}-title"><title id="{esc(self.id)}-title">{esc(self.title)}</title>'
            + "".join(self.parts)
            + "</svg>"
        )


class Scale:
    """A value range onto a pixel range, linear or logarithmic (base 2)."""

    def __init__(self, low: float, high: float, start: float, end: float, *, log: bool = False) -> None:
        if log:
            low, high = math.log2(max(low, 1e-12)), math.log2(max(high, 1e-12))
        if high <= low:
            high = low + 1
        self.low, self.high, self.start, self.end, self.log = low, high, start, end, log

    def __call__(self, value: float) -> float:
        v = math.log2(max(value, 1e-12)) if self.log else value
        return self.start + (v - self.low) / (self.high - self.low) * (self.end - self.start)


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `high`."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(high / step) + 1)]


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "\u2026"


def size_text(size: int) -> str:
    """A byte count as the axes and the preflight's tables write it: the largest binary unit it is a whole
    number of (8 B, 2 KiB, 3 MiB)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"
