"""The Chrome trace-event format's rules that `cluster --deep --trace` must keep (test support, never shipped),
after the format's own document ("Trace Event Format", the JSON object form): every event has ph, ts, pid and
tid; a complete event ("X") has a dur; within one track (pid, tid) slices are either disjoint or nested."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def problems(trace: Mapping[str, Any]) -> list[str]:
    found = []
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        return ["no traceEvents list"]
    tracks: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    for n, event in enumerate(events):
        missing = [key for key in ("ph", "ts", "pid", "tid") if key not in event]
        if missing:
            found.append(f"event {n} lacks {missing}")
            continue
        if event["ph"] == "X":
            if not isinstance(event.get("dur"), int | float) or event["dur"] < 0:
                found.append(f"event {n} ({event.get('name')}): no duration")
                continue
            tracks.setdefault((event["pid"], event["tid"]), []).append(
                (float(event["ts"]), float(event["ts"]) + float(event["dur"]), str(event.get("name")))
            )
    for track, slices in tracks.items():
        open_slices: list[tuple[float, float, str]] = []
        for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_slices and open_slices[-1][1] <= start:
                open_slices.pop()
            if open_slices and end > open_slices[-1][1] + 1e-3:
                found.append(f"track {track}: {name} overlaps {open_slices[-1][2]} without nesting")
            open_slices.append((start, end, name))
    return found


def slices(trace: Mapping[str, Any]) -> dict[int, list[str]]:
    """Each process's slice names, in time order (an enclosing slice before what it holds)."""
    by_process: dict[int, list[tuple[float, float, str]]] = {}
    for event in trace["traceEvents"]:
        if event["ph"] == "X":
            start, length = float(event["ts"]), float(event["dur"])
            by_process.setdefault(int(event["pid"]), []).append((start, -length, str(event["name"])))
    return {p: [name for _, _, name in sorted(names)] for p, names in by_process.items()}
