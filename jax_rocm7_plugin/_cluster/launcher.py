"""What the launcher tells about processes that never reported: Slurm's node list and tasks per node.

Slurm writes the step's hosts as a host list (`gpu-[01-03,07],login1`) and its tasks per node
as counts with repeats (`8(x63),4`); with its default block distribution, process ids fill the
nodes in order. Pure functions of the variables; None where they are absent or do not parse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jax_rocm7_plugin._environment import read

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_COUNT = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")
MAX_EXPANDED = 100_000  # a host list that expands past this is not a real job's


def expand_hostlist(text: str) -> list[str] | None:
    """Slurm's compact host list as names; None when it does not parse."""
    names: list[str] = []
    for part in _split_top_level(text):
        expanded = _expand_one(part.strip())
        if expanded is None:
            return None
        names.extend(expanded)
        if len(names) > MAX_EXPANDED:
            return None
    return names or None


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p]


def _expand_one(name: str) -> list[str] | None:
    match = _BRACKET.search(name)
    if match is None:
        return [name] if name and "[" not in name and "]" not in name else None
    head, tail = name[: match.start()], name[match.end() :]
    rests = _expand_one(tail) if tail else [""]
    if rests is None:
        return None
    found: list[str] = []
    for item in match.group(1).split(","):
        low, _, high = item.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return None
        width = len(low)
        end = int(high) if high else int(low)
        if end < int(low) or end - int(low) > MAX_EXPANDED:
            return None
        found.extend(f"{head}{number:0{width}d}{rest}" for number in range(int(low), end + 1) for rest in rests)
    return found


def tasks_per_node(text: str) -> list[int] | None:
    """`8(x63),4` -> [8] * 63 + [4]; None when it does not parse."""
    counts: list[int] = []
    for part in text.split(","):
        match = _COUNT.match(part.strip())
        if match is None:
            return None
        repeat = int(match.group(2) or 1)
        if repeat > MAX_EXPANDED:
            return None
        counts.extend([int(match.group(1))] * repeat)
    return counts or None


def slurm_hosts(environ: Mapping[str, str], num_processes: int) -> dict[int, str] | None:
    """Process id -> host by Slurm's block distribution, when its variables say so."""
    hosts = expand_hostlist(read("SLURM_STEP_NODELIST", environ) or read("SLURM_JOB_NODELIST", environ) or "")
    counts = tasks_per_node(read("SLURM_STEP_TASKS_PER_NODE", environ) or read("SLURM_TASKS_PER_NODE", environ) or "")
    if hosts is None:
        return None
    if counts is None and len(hosts) == 1:  # one node: every task is there
        counts = [num_processes]
    if counts is None or len(counts) != len(hosts):
        return None
    mapping: dict[int, str] = {}
    for host, count in zip(hosts, counts, strict=True):
        for _ in range(count):
            mapping[len(mapping)] = host
    return mapping
