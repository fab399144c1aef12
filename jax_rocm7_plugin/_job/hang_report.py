"""The hang report (_job/hang.py's watchers find the hang; this says it): every process's answer, grouped by where
its main thread is, the one line that names who holds the job up, and the stacks file and timeline page beside
it. Imported only by the process that reports a hang, never while a job starts."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._names import PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._record import NamedTuple


class Answer(NamedTuple):
    process: int
    host: str
    place: str
    in_jax: bool
    seconds: float
    frames: tuple[str, ...]
    moved: tuple[str, ...] = ()  # what its host's GPU counters did since the watcher started (_gpu_counters_moved)
    network: str = ""  # the network RCCL would use between hosts from this host ("" where no fabric says)
    # Where its main thread was before: (seconds before the answer it came there, place, in_jax), oldest first.
    trail: tuple[tuple[float, str, bool], ...] = ()


def report(answers: Mapping[int, Answer], count: int, hosts: Mapping[int, str]) -> tuple[str, str]:
    """(level, the one-line report) for what the processes answered; processes not among `answers` did not."""
    silent = [p for p in range(count) if p not in answers]
    groups = _groups(answers)
    moved = _moved(answers)
    if not silent and len(groups) == 1:
        (place, in_jax), members = next(iter(groups.items()))
        seconds = min(a.seconds for a in members)
        where = f"in jax ({place})" if in_jax else f"in {place}"
        if moved:  # everyone waits in one place, and one GPU's counters moved meanwhile: that GPU is the lead
            return "warning", (
                f"all {count} processes have been {where} for {seconds:.0f} s, and meanwhile {moved}: the job "
                "likely waits on that GPU"
            )
        return "info", (
            f"all {count} processes have been {where} for {seconds:.0f} s: a long step, compile or checkpoint "
            "is in one place everywhere, which is no process holding the others up"
        )
    (place, in_jax), members = _main(groups)
    seconds = min(a.seconds for a in members)
    parts = [f"{len(members)} of {count} processes wait {'in jax ' if in_jax else 'in '}({place}) for {seconds:.0f} s"]
    for (other_place, other_jax), others in groups.items():
        if (other_place, other_jax) == (place, in_jax):
            continue
        names = ", ".join(f"process {a.process} ({a.host})" for a in others)
        verb = "is" if len(others) == 1 else "are"
        where = f"in jax ({other_place})" if other_jax else f"in {other_place}"
        parts.append(f"{names} {verb} {where}: {'it holds' if len(others) == 1 else 'they hold'} the job up")
    for process in silent:
        host = hosts.get(process, "host unknown")
        parts.append(f"process {process} ({host}) does not answer: frozen, dead, or its main thread holds the GIL")
    if moved:
        parts.append(f"meanwhile {moved}")
    networks = sorted({f"{a.host}: {a.network}" for a in answers.values() if a.network})
    if networks and in_jax:  # where the collectives that wait go between hosts, said where a fabric says it
        parts.append(f"between hosts RCCL would use {'; '.join(networks[:4])}")
    return "warning", "; ".join(parts)


def _groups(answers: Mapping[int, Answer]) -> dict[tuple[str, bool], list[Answer]]:
    groups: dict[tuple[str, bool], list[Answer]] = {}
    for answer in sorted(answers.values()):
        groups.setdefault((answer.place, answer.in_jax), []).append(answer)
    return groups


def _main(groups: dict[tuple[str, bool], list[Answer]]) -> tuple[tuple[str, bool], list[Answer]]:
    """The group the others are measured against: the largest that waits in jax (else the largest)."""
    waiting = [g for g in groups.items() if g[0][1]]
    return max(waiting, key=lambda g: len(g[1])) if waiting else max(groups.items(), key=lambda g: len(g[1]))


def held_up_by(answers: Mapping[int, Answer], count: int) -> list[int]:
    """The processes the report names as holding the job up: outside the main group, or silent."""
    silent = [p for p in range(count) if p not in answers]
    groups = _groups(answers)
    if not groups or (not silent and len(groups) == 1):
        return silent
    main = {a.process for a in _main(groups)[1]}
    return sorted([p for p in answers if p not in main] + silent)


def _moved(answers: Mapping[int, Answer]) -> str:
    """What the hosts' GPU counters did during the job, each host said once (its processes read the same GPUs)."""
    said: dict[tuple[str, str], None] = {}
    for answer in sorted(answers.values()):
        for line in answer.moved:
            said[(answer.host, line)] = None
    return "; ".join(f"on {host}, {line}" for host, line in said)


# What of a peer's answer is kept: its size before it is parsed, and what it lists (a stack far deeper than any
# program's, a trail of a day's samples, a host or frame the length of a book make a huge file and page).
MAX_ANSWER_BYTES = 256 * 1024
MAX_FRAMES = 64
MAX_TRAIL = 64
MAX_TEXT = 300


def answer_of(process: int, data: Mapping[str, Any]) -> Answer:
    """A process's answer as it published it (hang.Watcher._record's JSON, decoded): every text printable and cut,
    every list cut, every number finite (_job/peer.py); ValueError, KeyError or TypeError where it is none."""
    from jax_rocm7_plugin._job.peer import finite_number, printable

    def text(value: object) -> str:
        if not isinstance(value, str):
            raise TypeError(f"{value!r} where text belongs")
        return printable(value, MAX_TEXT)

    return Answer(
        process,
        text(data["host"]),
        text(data["place"]),
        bool(data["in_jax"]),
        finite_number(data["seconds"]),
        tuple(text(frame) for frame in list(data["frames"])[:MAX_FRAMES]),
        tuple(text(line) for line in list(data.get("moved", ()))[:MAX_FRAMES]),
        text(data.get("network", "")),
        tuple((finite_number(t[0]), text(t[1]), bool(t[2])) for t in list(data.get("trail", ()))[-MAX_TRAIL:]),
    )


def write_page(path: str, level: str, line: str, answers: Mapping[int, Answer], count: int) -> bool:
    """The page beside the stacks; False where it could not be written (the text report stands alone, and names no
    page)."""
    from jax_rocm7_plugin._pages import hang
    from jax_rocm7_plugin._pages.output import write

    try:
        page = hang.render(level, line, answers, count, held_up_by(answers, count))
        return write(Path(path), page, force=False, mode=0o600) is None  # in the shared temporary folder: ours alone
    except Exception:  # noqa: BLE001 - never a reason for the report not to be said
        return False


def write_stacks(answers: Mapping[int, Answer], count: int) -> str:
    """Every process's stack in one file in the temporary folder: its path, or why it was not written."""
    import tempfile

    name = f"{PLUGIN_DISTRIBUTION.removesuffix('-plugin')}-hang-{os.getpid()}-{int(time.time())}.txt"
    path = os.path.join(tempfile.gettempdir(), name)
    lines = []
    for process in range(count):
        answer = answers.get(process)
        if answer is None:
            lines.append(f"process {process}: no answer\n")
            continue
        lines.append(f"process {process} ({answer.host}), there for {answer.seconds:.0f} s:\n")
        lines.extend(f"    {frame}\n" for frame in answer.frames)
    from jax_rocm7_plugin._pages.output import write

    # The temporary folder is every user's: the file is claimed beside its name and published whole (a link another
    # user planted at the next pid's name is never followed), readable by this user alone.
    failed = write(Path(path), "".join(lines), force=False, mode=0o600)
    return path if failed is None else f"not written ({failed})"
