"""`cluster --html`: the job at a glance. The verdict and its findings first; then a host x GPU grid, one cell per
GPU of every host, coloured by the worst finding that concerns it, the odd ones outlined and labelled; with
--deep, the collectives (bus bandwidth against size, the host and pair steps, each process's local work).

Drawn from process 0's report (its JSON) and the records the processes published (`_job/record.py`'s
ProcessRecord, read by attribute): which GPU a finding concerns is what the finding says as data (its `concerns`:
GPUs by host and PCI address; else its processes, else its hosts), never decided again and never read from words.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from jax_rocm7_plugin._pages import html
from jax_rocm7_plugin._pages.html import COLOURS, MARK, esc
from jax_rocm7_plugin._pages.svg import Scale, Svg, nice_ticks, shorten, size_text

# Above this many hosts the grid folds hosts that are alike into one tile (and one table row).
FOLD_HOSTS = 128
GRID_WIDTH = 1220  # fits a 1280 px window with the page's margins
CELL = 14
TABLE_OPEN_ROWS = 64  # a longer table starts folded


class Cell(NamedTuple):
    host: str
    ordinal: int
    pci: str | None
    gfx: str | None
    modes: str | None
    link: str | None
    power_cap: int | None
    level: str | None
    errors: int | None
    processes: tuple[int, ...]
    job_check: str  # "ok", the first error's id, or "no process"
    severity: str
    findings: tuple[str, ...]  # the ids of the findings that concern it
    marked: bool


class GpuSeen(Protocol):
    """A GPU as a process's record saw it (_job/record.GpuFact): what the page reads of it."""

    @property
    def node(self) -> int: ...
    @property
    def gfx(self) -> str | None: ...
    @property
    def pci_bus(self) -> str | None: ...


class GpuHealthSeen(Protocol):
    """A physical GPU's health in a record (_job/record.GpuHealthFact)."""

    @property
    def ordinal(self) -> int: ...
    @property
    def pci(self) -> str | None: ...
    @property
    def uncorrectable(self) -> int | None: ...
    @property
    def modes(self) -> str | None: ...
    @property
    def link(self) -> str | None: ...
    @property
    def power_cap(self) -> int | None: ...
    @property
    def level(self) -> str | None: ...


class HealthSeen(Protocol):
    @property
    def gpus(self) -> Sequence[GpuHealthSeen]: ...


class RecordSeen(Protocol):
    """What the page reads of a process's record (_job/record.ProcessRecord; this layer draws, it imports no
    record)."""

    @property
    def host(self) -> str: ...
    @property
    def process_id(self) -> int: ...
    @property
    def gpus(self) -> Sequence[GpuSeen]: ...
    @property
    def used_gpus(self) -> Sequence[int] | None: ...
    @property
    def ok(self) -> bool: ...
    @property
    def first_error(self) -> Sequence[str] | None: ...
    @property
    def health(self) -> HealthSeen | None: ...


def cells_of(report: Mapping[str, Any], records: Mapping[int, RecordSeen]) -> list[Cell]:
    """Every GPU of every host that reported, with what concerns it."""
    hosts: dict[str, list[int]] = {}
    for pid in sorted(records):
        hosts.setdefault(records[pid].host, []).append(pid)
    base: list[dict[str, Any]] = []
    for host, members in sorted(hosts.items(), key=lambda item: html.natural(item[0])):
        base.extend(_host_gpus(host, [records[p] for p in members]))
    concerns: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for finding in report.get("findings", ()):
        if finding.get("severity") == "info":
            continue
        for key in _concerned(finding, base, records):
            concerns.setdefault(key, []).append(finding)
    cells = []
    for gpu in base:
        said = concerns.get((gpu["host"], gpu["ordinal"]), [])
        severity = html.worst(str(f.get("severity")) for f in said) if said else "ok"
        if not said and not gpu["processes"]:
            severity = "unknown"
        cells.append(
            Cell(
                **gpu,
                severity=severity,
                findings=tuple(dict.fromkeys(str(f.get("id")) for f in said)),
                marked=bool(said),
            )
        )
    return cells


def _host_gpus(host: str, members: Sequence[RecordSeen]) -> list[dict[str, Any]]:
    """A host's physical GPUs: from its health where read, else from the GPUs its processes saw. A GPU is known
    by its PCI address (the partitions of one share it) or, where KFD gives none, by its place in KFD order
    (each such node is a GPU of its own, as the health read counts them)."""
    key_of_node: dict[int, str] = {}
    gfx_of: dict[str, str | None] = {}
    for record in members:
        for index, g in enumerate(record.gpus):
            key = g.pci_bus or f"#{index}"
            key_of_node.setdefault(g.node, key)
            gfx_of.setdefault(key, g.gfx)
    users: dict[str, list[int]] = {}
    checks: dict[str, list[str]] = {}
    for record in members:
        for node in record.used_gpus or ():
            key = key_of_node.get(node, f"node {node}")
            users.setdefault(key, []).append(record.process_id)
            checks.setdefault(key, []).append("ok" if record.ok else _first_id(record))
    health = next((r.health for r in members if r.health is not None), None)
    rows: list[tuple[str, int, str | None, str | None, str | None, int | None, str | None, int | None]] = []
    if health is not None and health.gpus:
        for h in health.gpus:
            key = h.pci or f"#{h.ordinal}"
            rows.append((key, h.ordinal, h.pci, h.modes, h.link, h.power_cap, h.level, h.uncorrectable))
    else:
        keys = list(dict.fromkeys(key_of_node.values()))
        rows = [
            (key, i, None if key.startswith("#") else key, None, None, None, None, None) for i, key in enumerate(keys)
        ]
    found = []
    for key, ordinal, pci, modes, link, cap, level, errors in rows:
        said = checks.get(key, [])
        bad = [c for c in said if c != "ok"]
        found.append(
            {
                "host": host,
                "ordinal": ordinal,
                "pci": pci,
                "gfx": gfx_of.get(key),
                "modes": modes,
                "link": link,
                "power_cap": cap,
                "level": level,
                "errors": errors,
                "processes": tuple(sorted(users.get(key, ()))),
                "job_check": bad[0] if bad else ("ok" if said else "no process"),
            }
        )
    return found


def _first_id(record: RecordSeen) -> str:
    return str(record.first_error[0]) if record.first_error else "not ok"


def _concerned(
    finding: Mapping[str, Any], gpus: list[dict[str, Any]], records: Mapping[int, RecordSeen]
) -> list[tuple[str, int]]:
    """The (host, GPU ordinal) cells a finding concerns, as it says: its GPUs (`concerns.gpus`, each by host and PCI
    address, else ordinal), else its processes' GPUs, else its hosts' GPUs."""
    refs = (finding.get("concerns") or {}).get("gpus", ())
    if refs:
        return [(g["host"], g["ordinal"]) for g in gpus if any(_is(g, ref) for ref in refs)]
    processes = {int(p) for p in finding.get("processes", ()) if int(p) in records}
    if processes:
        cells = [(g["host"], g["ordinal"]) for g in gpus if set(g["processes"]) & processes]
        # A process that uses no GPU known (none visible, bad ids): its whole host.
        unplaced = {records[p].host for p in processes} - {h for h, _ in cells}
        return cells + [(g["host"], g["ordinal"]) for g in gpus if g["host"] in unplaced]
    named_hosts = {str(h) for h in finding.get("hosts", ())}
    return [(g["host"], g["ordinal"]) for g in gpus if g["host"] in named_hosts]


def _is(gpu: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    """Whether a finding's GpuRef (its JSON) is this cell's GPU: the same host, and the same PCI address (else
    ordinal)."""
    if ref.get("host") != gpu["host"]:
        return False
    if ref.get("pci") is not None and gpu["pci"] is not None:
        return bool(ref["pci"] == gpu["pci"])
    return ref.get("ordinal") == gpu["ordinal"]


# --- the grid ------------------------------------------------------------------------------------------------


class Tile(NamedTuple):
    hosts: tuple[str, ...]  # one, or the hosts folded into it
    cells: tuple[Cell, ...]  # the first host's


def tiles_of(cells: Sequence[Cell], fold: bool) -> list[Tile]:
    by_host: dict[str, list[Cell]] = {}
    for cell in cells:
        by_host.setdefault(cell.host, []).append(cell)
    if not fold:
        return [Tile((host,), tuple(c)) for host, c in by_host.items()]
    groups: dict[tuple[Any, ...], list[str]] = {}
    for host, host_cells in by_host.items():
        signature = tuple(c._replace(host="", processes=(len(c.processes),)) for c in host_cells)
        groups.setdefault(signature, []).append(host)
    return [Tile(tuple(hosts), tuple(by_host[hosts[0]])) for hosts in groups.values()]


def _tile_label(tile: Tile) -> str:
    return tile.hosts[0] if len(tile.hosts) == 1 else f"{len(tile.hosts)} hosts"


def _alike(tile: Tile) -> str:
    return f"{len(tile.hosts)} hosts alike ({tile.hosts[0]} ... {tile.hosts[-1]})"


def _cell_title(cell: Cell, tile: Tile) -> str:
    where = cell.host if len(tile.hosts) == 1 else _alike(tile)
    lines = [
        f"{where} GPU {cell.ordinal} {cell.pci or '(no PCI address)'} {cell.gfx or ''}".rstrip(),
        f"partition {cell.modes or '?'}, link {cell.link or '?'}, power cap "
        f"{f'{cell.power_cap} W' if cell.power_cap is not None else '?'}, level {cell.level or '?'}, "
        f"uncorrectable errors {cell.errors if cell.errors is not None else '?'}",
        f"processes {', '.join(map(str, cell.processes)) or 'none'}; job check: {cell.job_check}",
    ]
    if cell.findings:
        lines.append("findings: " + ", ".join(cell.findings))
    return "\n".join(lines)


def grid_svg(tiles: Sequence[Tile]) -> str:
    per_host = max((len(t.cells) for t in tiles), default=1)
    columns = min(per_host, 4) if per_host > 4 else max(per_host, 1)
    rows = math.ceil(per_host / columns)
    tile_w, tile_h = columns * CELL + 8, rows * CELL + 18
    gap = 6
    per_row = max(1, (GRID_WIDTH + gap) // (tile_w + gap))
    lines = math.ceil(len(tiles) / per_row) if tiles else 1
    svg = Svg(
        min(GRID_WIDTH, per_row * (tile_w + gap)),
        lines * (tile_h + gap) + 4,
        f"{sum(len(t.hosts) for t in tiles)} hosts, each a tile of its GPUs coloured by the worst finding that "
        "concerns it; marked GPUs outlined",
        "grid",
    )
    chars = max(3, int(tile_w / 5.6))
    for index, tile in enumerate(tiles):
        x0 = (index % per_row) * (tile_w + gap)
        y0 = (index // per_row) * (tile_h + gap)
        marked = any(c.marked for c in tile.cells)
        label = _tile_label(tile)
        svg.add(
            f'<g class="host{" marked" if marked else ""}" data-host="{esc(",".join(tile.hosts[:64]))}"'
            f' data-hosts="{len(tile.hosts)}" data-marked="{str(marked).lower()}">'
        )
        svg.rect(
            x0,
            y0,
            tile_w,
            tile_h,
            "#fafafa" if not marked else "#fff4dc",
            stroke=MARK if marked else "#cfcfcf",
            stroke_width=2.5 if marked else 1,
            title=f"{label}: {', '.join(tile.hosts[:8])}{' ...' if len(tile.hosts) > 8 else ''}",
        )
        for n, cell in enumerate(tile.cells):
            cx = x0 + 4 + (n % columns) * CELL
            cy = y0 + 4 + (n // columns) * CELL
            svg.rect(
                cx,
                cy,
                CELL - 2,
                CELL - 2,
                COLOURS[cell.severity],
                title=_cell_title(cell, tile),
                stroke=MARK if cell.marked else "none",
                stroke_width=2 if cell.marked else 0,
                attrs=f' class="cell" data-host="{esc(cell.host)}" data-gpu="{cell.ordinal}"'
                f' data-severity="{cell.severity}" data-marked="{str(cell.marked).lower()}"',
            )
        svg.text(
            x0 + tile_w / 2,
            y0 + tile_h - 5,
            ("\u25b2 " if marked else "") + shorten(label, chars - (2 if marked else 0)),
            size=9,
            anchor="middle",
            weight="bold" if marked else "normal",
            fill=MARK if marked else "#444",
        )
        svg.add("</g>")
    return svg.render()


def _legend() -> str:
    names = {"error": "error", "warning": "warning", "ok": "no finding", "unknown": "no process uses it"}
    items = "".join(
        f'<span style="display:inline-block;width:10px;height:10px;background:{COLOURS[s]};margin:0 3px 0 10px">'
        f"</span>{esc(text)}"
        for s, text in names.items()
    )
    return f'<p class="meta">{items}; outlined and \u25b2: marked by a finding</p>'


def _table_rows(tiles: Sequence[Tile]) -> list[tuple[list[object], bool]]:
    rows: list[tuple[list[object], bool]] = []
    for tile in tiles:
        where = tile.hosts[0] if len(tile.hosts) == 1 else _alike(tile)
        for c in tile.cells:
            rows.append(
                (
                    [
                        where,
                        c.ordinal,
                        c.pci or "",
                        c.gfx or "",
                        c.modes or "",
                        c.link or "",
                        "" if c.power_cap is None else f"{c.power_cap} W",
                        c.level or "",
                        "" if c.errors is None else c.errors,
                        ", ".join(map(str, c.processes[:16])) + (" ..." if len(c.processes) > 16 else ""),
                        c.job_check,
                        ", ".join(c.findings),
                    ],
                    c.marked,
                )
            )
    return rows


# --- --deep --------------------------------------------------------------------------------------------------


def _slow_groups(report: Mapping[str, Any]) -> set[str]:
    """The groups (host:..., pair:...) the cluster-link-slow findings concern."""
    named: set[str] = set()
    for finding in report.get("findings", ()):
        if finding.get("id") == "cluster-link-slow":
            named.update(str(g) for g in (finding.get("concerns") or {}).get("groups", ()))
    return named


def bandwidth_svg(figures: Sequence[Mapping[str, Any]], slow: set[str]) -> str:
    """Bus bandwidth (GB/s) against message size (log scale): a line per operation for the whole job; each host
    and pair step a point at its size, their median and quartiles a band; the slow ones outlined and named."""
    width, height, left, right, top, bottom = 1100, 380, 64, 180, 20, 44
    usable = [f for f in figures if f.get("busbw_gbps") is not None]
    sizes = [int(f["bytes"]) for f in figures] or [1]
    top_value = max((float(f["busbw_gbps"]) for f in usable), default=1.0) or 1.0
    ticks = nice_ticks(top_value)
    x = Scale(min(sizes), max(sizes) if max(sizes) > min(sizes) else min(sizes) * 4, left, width - right, log=True)
    y = Scale(0, ticks[-1], height - bottom, top)
    svg = Svg(
        width,
        height,
        "Bus bandwidth against message size: the job's collectives as lines, each host and "
        "pair step as a point, the slow ones outlined",
        "bandwidth",
    )
    for t in ticks:
        svg.line(left, y(t), width - right, y(t), "#e6e6e6")
        svg.text(left - 6, y(t) + 4, f"{t:g}", size=10, anchor="end")
    for size in sorted(set(sizes)):
        svg.line(x(size), height - bottom, x(size), height - bottom + 4, "#888")
        svg.text(x(size), height - bottom + 16, size_text(size), size=9, anchor="middle")
    svg.text(left + (width - right - left) / 2, height - 6, "message size (log scale)", size=11, anchor="middle")
    svg.text(
        14,
        top + (height - top - bottom) / 2,
        "bus bandwidth, GB/s",
        size=11,
        anchor="middle",
        attrs=f' transform="rotate(-90 14 {top + (height - top - bottom) / 2:.0f})"',
    )
    groups = [f for f in usable if f.get("group", "job") != "job"]
    if len(groups) >= 2:
        values = sorted(float(f["busbw_gbps"]) for f in groups)
        q1, median, q3 = _quartiles(values)
        svg.rect(
            left,
            y(q3),
            width - right - left,
            max(1.0, y(q1) - y(q3)),
            "#2f6fb0",
            attrs=' fill-opacity="0.12"',
            title=f"host and pair steps: median {median:.3g} GB/s, quartiles {q1:.3g} to {q3:.3g} GB/s",
        )
        svg.line(left, y(median), width - right, y(median), "#2f6fb0", 1, "4 3")
        svg.text(width - right + 6, y(median) + 4, f"median of steps {median:.3g}", size=10, fill="#2f6fb0")
    palette = {"all-reduce": "#6a3d9a", "all-gather": "#1b9e77"}
    legend_y = top + 10
    for op, colour in palette.items():
        line = sorted(
            (int(f["bytes"]), float(f["busbw_gbps"]))
            for f in usable
            if f.get("group", "job") == "job" and f.get("op") == op
        )
        if not line:
            continue
        svg.polyline([(x(s), y(v)) for s, v in line], colour, 2, title=f"{op}, the whole job")
        for s, v in line:
            svg.circle(x(s), y(v), 2.5, colour, title=f"{op} {size_text(s)}: {v:.3g} GB/s (job)")
        svg.line(width - right + 6, legend_y, width - right + 24, legend_y, colour, 2)
        svg.text(width - right + 28, legend_y + 4, f"{op} (job)", size=10)
        legend_y += 16
    for f in groups:
        group, value, size = str(f["group"]), float(f["busbw_gbps"]), int(f["bytes"])
        is_slow = group in slow
        marked = str(is_slow).lower()
        attrs = f' class="point{" slow" if is_slow else ""}" data-group="{esc(group)}" data-marked="{marked}"'
        svg.circle(
            x(size),
            y(value),
            5 if is_slow else 3.5,
            COLOURS["warning"] if is_slow else "#2f6fb0",
            title=f"{group}: {value:.3g} GB/s at {size_text(size)}",
            stroke=MARK if is_slow else "#fff",
            stroke_width=2 if is_slow else 1,
            attrs=attrs,
        )
    for n, f in enumerate(f for f in groups if str(f["group"]) in slow):
        svg.text(
            x(int(f["bytes"])) + 9,
            y(float(f["busbw_gbps"])) + 4 + 13 * n,
            f"\u25b2 slow: {f['group']}",
            size=11,
            weight="bold",
            fill=MARK,
        )
    return svg.render()


def heatmap_svg(figures: Sequence[Mapping[str, Any]], slow: set[str]) -> str:
    """The host and pair steps: a row per host, its own step (within the host) and the pair it starts; each cell
    coloured by its bandwidth against the median of its kind, slow ones outlined."""
    within = {str(f["group"])[5:]: f for f in figures if str(f.get("group", "")).startswith("host:")}
    pairs = {str(f["group"])[5:].split(",")[0]: f for f in figures if str(f.get("group", "")).startswith("pair:")}
    hosts = sorted({*within, *pairs})
    if not hosts:
        return ""
    rows_shown = hosts if len(hosts) <= 64 else _worst_rows(hosts, within, pairs, slow, 48)
    row_h, label_w, cell_w = 16, 200, 190
    svg = Svg(
        label_w + 2 * cell_w + 160,
        24 + row_h * len(rows_shown) + 8,
        "The host and pair steps: each host's step within it and with its neighbour, coloured by bandwidth "
        "against the median of its kind; slow ones outlined",
        "heatmap",
    )
    svg.text(label_w + cell_w / 2, 14, "within the host", size=11, anchor="middle", weight="bold")
    svg.text(label_w + cell_w * 1.5, 14, "to the next host", size=11, anchor="middle", weight="bold")
    medians = {
        kind: statistics.median(v)
        if (v := [float(f["busbw_gbps"]) for f in group.values() if f.get("busbw_gbps")])
        else None
        for kind, group in (("host", within), ("pair", pairs))
    }
    for row, host in enumerate(rows_shown):
        y0 = 22 + row * row_h
        svg.text(label_w - 6, y0 + 12, shorten(host, 32), size=10, anchor="end")
        for col, (kind, group) in enumerate((("host", within), ("pair", pairs))):
            f = group.get(host)
            x0 = label_w + col * cell_w
            if f is None or f.get("busbw_gbps") is None:
                svg.rect(x0, y0, cell_w - 2, row_h - 2, "#f0f0f0", title=f"{host}: no {kind} step")
                continue
            value, median = float(f["busbw_gbps"]), medians[kind] or 1.0
            name = str(f["group"])
            is_slow = name in slow
            svg.rect(
                x0,
                y0,
                cell_w - 2,
                row_h - 2,
                _ramp(value / median if median else 1.0),
                title=f"{name}: {value:.3g} GB/s ({value / median:.0%} of the median)",
                stroke=MARK if is_slow else "none",
                stroke_width=2.5 if is_slow else 0,
                attrs=f' class="step" data-group="{esc(name)}" data-marked="{str(is_slow).lower()}"',
            )
            svg.text(
                x0 + 6,
                y0 + 11,
                ("\u25b2 " if is_slow else "") + f"{value:.3g} GB/s" + (f" {name[5:]}" if kind == "pair" else ""),
                size=9,
                weight="bold" if is_slow else "normal",
            )
    return svg.render()


def _worst_rows(
    hosts: list[str], within: Mapping[str, Any], pairs: Mapping[str, Any], slow: set[str], count: int
) -> list[str]:
    def lowest(host: str) -> float:
        values = [float(f["busbw_gbps"]) for f in (within.get(host), pairs.get(host)) if f and f.get("busbw_gbps")]
        return min(values, default=math.inf)

    named = [h for h in hosts if f"host:{h}" in slow or any(g.startswith(f"pair:{h},") for g in slow)]
    rest = sorted((h for h in hosts if h not in named), key=lowest)
    return sorted([*named, *rest][:count])


def bars_svg(rates: Mapping[int, float], slow: set[int]) -> str:
    """Each process's local work (GFLOP/s), sorted, slowest first; the named slow ones coloured and labelled."""
    if not rates:
        return ""
    order = sorted(rates, key=lambda p: (rates[p], p))
    width, height, left, top, bottom = 1100, 200, 64, 16, 30
    bar = max(1.0, min(24.0, (width - left - 10) / len(order)))
    high = max(rates.values()) or 1.0
    ticks = nice_ticks(high, 4)
    y = Scale(0, ticks[-1], height - bottom, top)
    svg = Svg(width, height, "Each process's local work in GFLOP/s, slowest first; slow ones marked", "localwork")
    for t in ticks:
        svg.line(left, y(t), width - 10, y(t), "#e6e6e6")
        svg.text(left - 6, y(t) + 4, f"{t:g}", size=10, anchor="end")
    median = statistics.median(rates.values())
    for n, pid in enumerate(order):
        is_slow = pid in slow
        svg.rect(
            left + n * bar,
            y(rates[pid]),
            max(bar - (1 if bar > 3 else 0), 0.8),
            y(0) - y(rates[pid]),
            COLOURS["warning"] if is_slow else "#6b8fb8",
            title=f"process {pid}: {rates[pid]:.3g} GFLOP/s",
            stroke=MARK if is_slow else "none",
            stroke_width=1.5 if is_slow else 0,
            attrs=f' class="bar" data-process="{pid}" data-marked="{str(is_slow).lower()}"',
        )
    svg.line(left, y(median), width - 10, y(median), "#2f6fb0", 1, "4 3")
    svg.text(width - 12, y(median) - 4, f"median {median:.3g}", size=10, anchor="end", fill="#2f6fb0")
    for n, pid in enumerate(p for p in order if p in slow):
        if n >= 8:
            break
        svg.text(
            left + order.index(pid) * bar + bar + 3,
            y(rates[pid]) - 4 - 12 * n,
            f"\u25b2 slow: process {pid}",
            size=11,
            weight="bold",
            fill=MARK,
        )
    svg.text(left, height - 8, f"{len(order)} processes, slowest first", size=10)
    return svg.render()


def _slow_processes(report: Mapping[str, Any]) -> set[int]:
    return {
        int(p)
        for f in report.get("findings", ())
        if f.get("id") == "cluster-process-slow"
        for p in f.get("processes", ())
    }


def _ramp(ratio: float) -> str:
    """Red (far below the median) through amber to green (at or above it)."""
    r = max(0.0, min(1.0, ratio))
    if r < 0.5:
        return "#c0392b"
    if r < 0.8:
        return "#e08e0b"
    return "#7fbf7b" if r < 0.95 else "#3a8d4f"


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 4:
        return min(values), statistics.median(values), max(values)
    q = statistics.quantiles(values, n=4)
    return q[0], q[1], q[2]


# --- the page ------------------------------------------------------------------------------------------------


def render(report: Mapping[str, Any], records: Mapping[int, RecordSeen]) -> str:
    """The page of one preflight: `report` as `cluster --json` prints it, `records` by process id."""
    problems = [f for f in report.get("findings", ()) if f.get("severity") in ("error", "warning")]
    # The verdict's level: the exit code decides; the worst problem says how bad (a usage error has no problem).
    level = "ok" if report.get("exit_code") == 0 else html.worst(str(f.get("severity")) for f in problems)
    if report.get("exit_code") != 0 and level == "ok":
        level = "error"
    count = len(report.get("reported", ()))
    expected = report.get("processes") or "?"
    hosts = report.get("hosts", ())
    sentence = (
        f"{report.get('verdict', '?')}: {count} of {expected} processes on {len(hosts)} host(s) reported"
        + (f" via {report['method']}" if report.get("method") else "")
        + (f"; {len(problems)} problem(s)" if problems else "")
    )
    meta = "; ".join(
        part
        for part in (
            f"coordinator {report['coordinator']}" if report.get("coordinator") else "",
            f"{report['elapsed_s']:g} s" if report.get("elapsed_s") is not None else "",
            f"missing: processes {', '.join(map(str, report['missing'][:32]))}" if report.get("missing") else "",
        )
        if part
    )
    body = [
        "<h1>Cluster preflight</h1>",
        html.verdict(level, sentence, meta),
        html.findings(list(report.get("findings", ()))),
    ]
    cells = cells_of(report, records)
    if cells:
        host_count = len({c.host for c in cells})
        fold = host_count > FOLD_HOSTS
        tiles = tiles_of(cells, fold)
        marked = [c for c in cells if c.marked]
        body.append(f"<h2>GPUs: {host_count} hosts, {len(cells)} GPUs</h2>")
        if fold:
            body.append(
                f'<p class="meta">{host_count} hosts folded into {len(tiles)} tiles: hosts whose GPUs are '
                "alike in every detail below share one tile.</p>"
            )
        body.append(
            html.figure(
                grid_svg(tiles), "Each tile is a host (or hosts alike); each square one of its GPUs.", "gpu-grid"
            )
        )
        body.append(_legend())
        if marked:
            listed = "".join(
                f'<li data-host="{esc(c.host)}" data-gpu="{c.ordinal}">\u25b2 <b>{esc(c.host)}</b> GPU {c.ordinal}'
                f" {esc(c.pci or '')}: {esc(', '.join(c.findings))}</li>"
                for c in marked[:64]
            )
            more = f"<li>... {len(marked) - 64} more</li>" if len(marked) > 64 else ""
            body.append(f'<ul class="marks" id="marked">{listed}{more}</ul>')
        head = [
            "host",
            "GPU",
            "PCI",
            "gfx",
            "partition",
            "link",
            "power cap",
            "level",
            "uncorrectable",
            "processes",
            "job check",
            "findings",
        ]
        rows = _table_rows(tiles)
        table = html.table("gpus", head, rows, filtered=True)
        if len(rows) > TABLE_OPEN_ROWS:  # folded: the grid above is the overview, this the lookup
            table = f"<details><summary>{len(rows)} rows</summary>{table}</details>"
        body.append("<h2>Every GPU</h2>")
        body.append(table)
    if "collectives" in report:
        body.extend(_deep_sections(report))
    return html.document("Cluster preflight", body, scripted=bool(cells))


def _deep_sections(report: Mapping[str, Any]) -> list[str]:
    figures = list(report.get("collectives", ()))
    rates = {int(p): float(r) for p, r in report.get("local_work_gflops", {}).items()}
    slow = _slow_groups(report)
    parts = ["<h2>Collectives (--deep)</h2>"]
    if not figures:
        parts.append("<p>No collective ran to the end: see the findings above.</p>")
    else:
        parts.append(
            html.figure(
                bandwidth_svg(figures, slow),
                "Bus bandwidth (nccl-tests' definition) against message size.",
                "bandwidth-figure",
            )
        )
        heat = heatmap_svg(figures, slow)
        if heat:
            parts.append(html.figure(heat, "The host and pair steps.", "steps-figure"))
    bars = bars_svg(rates, _slow_processes(report))
    if bars:
        parts.append(html.figure(bars, "Each process's local work.", "localwork-figure"))
    return parts
