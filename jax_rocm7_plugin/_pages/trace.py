"""`cluster --deep --trace FILE`: the deep steps as Chrome trace-event JSON (the JSON object format), which
Perfetto's UI and chrome://tracing open: one track per process, the run as one slice and each step a slice
inside it, with the step's size and the job's bandwidth for it as arguments.

Times are each process's own wall clock (time.time() around the step), shown from the earliest step of the job:
hosts whose clocks disagree show shifted, never reordered within a process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jax_rocm7_plugin._names import PLUGIN_DISTRIBUTION


def trace_events(
    steps: Sequence[Mapping[str, Any]], figures: Sequence[Mapping[str, Any]], host_of: Mapping[int, str]
) -> dict[str, Any]:
    """The trace of the gathered steps (each with every process's outcome: began, ended, seconds, ok ...)."""
    outcomes = [
        (str(step.get("name")), step, int(p), o)
        for step in steps
        for p, o in step.get("outcomes", {}).items()
        if isinstance(o, Mapping) and o.get("began") is not None and o.get("ended") is not None
    ]
    if not outcomes:
        return {"traceEvents": [], "displayTimeUnit": "ms"}
    zero = min(float(o["began"]) for _, _, _, o in outcomes)
    figure_of = {(str(f.get("op")), int(f.get("bytes", 0)), str(f.get("group", "job"))): f for f in figures}
    events: list[dict[str, Any]] = []
    processes = sorted({p for _, _, p, _ in outcomes})
    for p in processes:
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": p,
                "tid": 0,
                "ts": 0,
                "args": {"name": f"process {p} ({host_of.get(p, 'host unknown')})"},
            }
        )
        events.append({"ph": "M", "name": "process_sort_index", "pid": p, "tid": 0, "ts": 0, "args": {"sort_index": p}})
        events.append(
            {"ph": "M", "name": "thread_name", "pid": p, "tid": 0, "ts": 0, "args": {"name": "cluster --deep"}}
        )
        mine = [(name, step, o) for name, step, q, o in outcomes if q == p]
        began = min(float(o["began"]) for _, _, o in mine)
        ended = max(float(o["ended"]) for _, _, o in mine)
        events.append(
            {
                "ph": "X",
                "name": "cluster --deep",
                "cat": "run",
                "pid": p,
                "tid": 0,
                "ts": _us(began - zero),
                "dur": max(_us(ended - zero) - _us(began - zero), 1.0),
                "args": {"steps": len(mine)},
            }
        )
        for name, step, o in sorted(mine, key=lambda m: float(m[2]["began"])):
            args: dict[str, Any] = {"ok": bool(o.get("ok")), "seconds": o.get("seconds")}
            if "op" in step:
                args.update(op=step["op"], bytes=int(step["bytes"]))
                group = str(o.get("group", "job"))
                args["group"] = group
                figure = figure_of.get((str(step["op"]), int(step["bytes"]), group))
                if figure is not None:
                    args.update(algbw_gbps=figure.get("algbw_gbps"), busbw_gbps=figure.get("busbw_gbps"))
            if o.get("error"):
                args["error"] = str(o["error"])[:300]
            if o.get("gflops") is not None:
                args["gflops"] = o["gflops"]
            start = float(o["began"])
            events.append(
                {
                    "ph": "X",
                    "name": name,
                    "cat": "collective" if "op" in step else "setup",
                    "pid": p,
                    "tid": 0,
                    "ts": _us(start - zero),
                    # Both ends from the one zero, so that a step ends where its run does; a wall clock stepped
                    # back during the step (NTP) would make it negative.
                    "dur": max(_us(float(o["ended"]) - zero) - _us(start - zero), 0.0),
                    "args": args,
                }
            )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"tool": f"{PLUGIN_DISTRIBUTION} cluster --deep", "clock": "each process's wall clock"},
    }


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def render(steps: Sequence[Mapping[str, Any]], figures: Sequence[Mapping[str, Any]], host_of: Mapping[int, str]) -> str:
    return json.dumps(trace_events(steps, figures, host_of), indent=None, separators=(",", ":")) + "\n"
