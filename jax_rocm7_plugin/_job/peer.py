"""What another process of the job wrote, decoded as data: bounded before it is parsed, its types checked, its text
made printable before any of it reaches a terminal or a log.

jax's key-value store authenticates nobody: every process of the job, and whoever reaches the coordinator's port,
can write any key. So a peer's text is never trusted to be what it claims: a line meant for a log loses its control
characters (an ANSI sequence would rewrite the user's terminal) and is cut to a length a line can have.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_LINE = 2000  # characters of a peer's line that are printed
MAX_JSON_BYTES = 4 * 1024 * 1024  # a verdict, an answer or an ask; records have their own bound (store.py)
MAX_DEPTH = 32
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Malformed(ValueError):
    """What a peer wrote is not what it claims to be (size, depth, type or value)."""


def printable(text: object, limit: int = MAX_LINE) -> str:
    """`text` as one printable line: control characters (C0, DEL, C1: terminal escapes, line breaks) removed, cut
    to `limit` characters with the cut said."""
    line = _CONTROL.sub("", str(text))
    return line if len(line) <= limit else f"{line[:limit]}... ({len(line) - limit} more characters)"


def loads(text: str | bytes, limit: int = MAX_JSON_BYTES) -> Any:
    """JSON from a peer: at most `limit` bytes, nested at most MAX_DEPTH deep, finite numbers only."""
    if len(text) > limit:
        raise Malformed(f"{len(text)} bytes, over the {limit} a peer may write here")
    depth = 0
    for char in text if isinstance(text, str) else text.decode("utf-8", "replace"):
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise Malformed(f"nested over {MAX_DEPTH} deep")
        elif char in "]}":
            depth -= 1

    def finite(value: str) -> float:
        raise Malformed(f"{value} is no finite number")

    try:
        return json.loads(text, parse_constant=finite)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise Malformed(f"not JSON: {error}") from None


def integer(value: object, low: int = 0, high: int = 1 << 31) -> int:
    """An int a peer stated (not a bool, not a float, within [low, high))."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise Malformed(f"{value!r} is not a whole number from {low} to {high - 1}")
    return value


def finite_number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Malformed(f"{value!r} is not a finite number")
    return float(value)
