"""How many processes and hosts read as a few words: "processes 0-135, 144-511", "gpu-17 and 2 more hosts"."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
HOSTS_NAMED = 3  # a group on more hosts than this is counted, not listed


def ranges(numbers: Iterable[int]) -> str:
    """0,1,2,3,5,7,8 -> "0-3, 5, 7-8" (sorted, each once)."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = previous = None
    for number in ordered:
        if previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
        start = previous = number
    if start is not None:
        parts.append(f"{start}" if start == previous else f"{start}-{previous}")
    return ", ".join(parts)


def processes_phrase(numbers: Sequence[int]) -> str:
    text = ranges(numbers)
    return f"process {text}" if len(set(numbers)) == 1 else f"processes {text}"


def hosts_phrase(hosts: Sequence[str]) -> str:
    """Up to HOSTS_NAMED names, else a count: "gpu-17", "gpu-1, gpu-2", "63 hosts"."""
    unique = sorted(set(hosts))
    if len(unique) <= HOSTS_NAMED:
        return ", ".join(unique)
    return f"{len(unique)} hosts"


def largest_first(groups: dict[K, list[int]]) -> list[tuple[K, list[int]]]:
    """Groups by size, largest first; among equals, the one holding the lowest process id first."""
    return sorted(groups.items(), key=lambda item: (-len(item[1]), min(item[1])))


def describe_groups(groups: dict[K, list[int]], host_of: dict[int, str], label: dict[K, str]) -> str:
    """ "7.2.0 on 63 hosts (processes 0-135, 144-511); 7.1.1 on gpu-17 (processes 136-143)"."""
    parts = []
    for key, members in largest_first(groups):
        where = hosts_phrase([host_of[p] for p in members])
        parts.append(f"{label[key]} on {where} ({processes_phrase(members)})")
    return "; ".join(parts)


def outside_largest(groups: dict[K, list[int]]) -> list[int]:
    """The processes outside the largest group: the odd ones a mismatch concerns."""
    ordered = largest_first(groups)
    return sorted(p for _, members in ordered[1:] for p in members)


def clipped(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at a word (never inside one) with an ellipsis where it was cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    if not text[len(cut)].isspace():  # the cut falls inside a word: back to the word's start, if not too far
        space = cut.rfind(" ")
        cut = cut[:space] if space > limit // 2 else cut
    return cut.rstrip(" ,;:") + "..."
