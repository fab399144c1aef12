"""The variables the stack under jax reads (ROCr, HIP, the ROCm libraries, RCCL, XLA, jax), with their grammar and
what the reader does with an empty or malformed value (data: stack_variables.json, each entry with its source).

The doctor checks every one that is set (`problems`); the loader reads none of this. Stdlib only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jax_rocm7_plugin._environment import read
from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "stack_variables.json"
Kind = Literal["bool01", "int", "gfx-version", "xla-flags", "path", "path-list", "enum", "enum-exact", "indices"]
KINDS = ("bool01", "int", "gfx-version", "xla-flags", "path", "path-list", "enum", "enum-exact", "indices")
Severity = Literal["error", "warning"]
# An XLA flag as XLA's parser takes it: --name or --name=value (tensorflow/tsl's command-line flags).
_XLA_FLAG = re.compile(r"--[A-Za-z0-9_]+(=.*)?")
# Dashes a word processor or a web page puts where two hyphens were typed.
_LOOKALIKE_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"


class StackVariable(NamedTuple):
    name: str
    reader: str  # who reads it: ROCr, HIP, RCCL, XLA, jax, rocBLAS, ...
    kind: Kind
    example: str  # a valid value
    empty: str | None  # what the reader does with an empty value (None: it is ignored, nothing to say)
    empty_severity: Severity
    malformed: str  # what the reader does with a value outside the grammar
    malformed_severity: Severity
    values: tuple[str, ...]  # for "enum"
    source: str


class Problem(NamedTuple):
    """A set variable whose value the reader cannot use as meant."""

    variable: StackVariable
    value: str
    what: str  # what is wrong with it
    effect: str  # what the reader does with it
    severity: Severity
    corrected: str | None  # a valid value that keeps what the user meant (None: unset it)


@cache
def variables() -> tuple[StackVariable, ...]:
    """Every entry of stack_variables.json, validated (ValueError names the entry and what is wrong)."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    return tuple(_entry(raw) for raw in data["variables"])


def _entry(raw: dict[str, Any]) -> StackVariable:
    name = raw.get("name", "?")
    if raw.get("kind") not in KINDS:
        raise ValueError(f"stack variable {name!r}: 'kind' is one of {KINDS}")
    if not str(raw.get("source", "")).startswith("https://"):
        raise ValueError(f"stack variable {name!r}: cite where its reader's behaviour is shown")
    for key in ("empty_severity", "malformed_severity"):
        if raw.get(key, "warning") not in ("error", "warning"):
            raise ValueError(f"stack variable {name!r}: {key!r} is error or warning")
    if raw["kind"].startswith("enum") and not raw.get("values"):
        raise ValueError(f"stack variable {name!r}: an enum lists its values")
    return StackVariable(
        name=name,
        reader=raw["reader"],
        kind=raw["kind"],
        example=raw["example"],
        empty=raw.get("empty"),
        empty_severity=raw.get("empty_severity", "warning"),
        malformed=raw["malformed"],
        malformed_severity=raw.get("malformed_severity", "warning"),
        values=tuple(raw.get("values", ())),
        source=raw["source"],
    )


def problems(environ: Mapping[str, str]) -> list[Problem]:
    """The problem of each declared variable that is set in `environ`, in the data's order."""
    found = []
    for variable in variables():
        value = read(variable.name, environ)
        if value is None:
            continue
        problem = _check(variable, value)
        if problem is not None:
            found.append(problem)
    return found


def _check(variable: StackVariable, value: str) -> Problem | None:
    if variable.kind == "xla-flags":
        return _xla_flags(variable, value)
    if not value.strip():
        if variable.empty is None:
            return None
        return Problem(variable, value, "is set but empty", variable.empty, variable.empty_severity, None)
    what = _malformed(variable, value)
    if what is None:
        return None
    return Problem(variable, value, what, variable.malformed, variable.malformed_severity, _corrected(variable, value))


def _malformed(variable: StackVariable, value: str) -> str | None:
    """What is wrong with a non-empty value (None: nothing)."""
    text = value.strip()
    kind = variable.kind
    if kind == "bool01" and text not in ("0", "1"):
        return "is not 0 or 1"
    if kind == "int" and not re.fullmatch(r"-?\d+", text):
        return "is not an integer"
    if kind == "gfx-version" and not re.fullmatch(r"\d+\.\d+\.\d+", text):
        return "is not of the form X.Y.Z (three numbers, e.g. 11.0.0)"
    if kind == "enum" and text.lower() not in {v.lower() for v in variable.values}:
        return f"is not one of {', '.join(variable.values)}"
    if kind == "enum-exact" and text not in variable.values:
        return f"is not one of {', '.join(variable.values)} (as written, in capitals)"
    if kind == "indices" and not all(re.fullmatch(r"\d+|GPU-[0-9A-Fa-f]+", t.strip()) for t in text.split(",")):
        return "is not a comma-separated list of device indices (or GPU-<uuid>)"
    if kind in ("path", "path-list"):
        entries = text.split(":") if kind == "path-list" else [text]
        relative = [e for e in entries if e and not e.startswith("/")]
        if relative:
            return f"holds a relative path ({relative[0]}), read against whatever the working directory is"
    return None


def _xla_flags(variable: StackVariable, value: str) -> Problem | None:
    """XLA's reading (parse_flags_from_env.cc): empty is nothing; a value not starting with '-' (blank included) is a
    file name, and one that cannot be opened ends the process; a word not starting with '-' ends the flags (the rest
    is ignored); a word that is no flag XLA knows ends the process. Flag names are not checked here (XLA has
    hundreds, per release): only their form."""
    if value == "":
        return None
    corrected = _corrected(variable, value)
    if not value.lstrip().startswith("-") or not value.strip():
        what = "does not start with a hyphen" if value.strip() else "is only blanks"
        effect = "XLA takes the value for a file name of flags and ends the process when it cannot open it"
        return Problem(variable, value, what, effect, "error", corrected)
    tokens = value.split()
    stop = next((i for i, t in enumerate(tokens) if not t.startswith("-")), None)
    bad = next((t for t in tokens[:stop] if not _XLA_FLAG.fullmatch(t)), None)
    if bad is not None:
        what = f"holds {bad!r}, which is not an XLA flag (--name or --name=value)"
        return Problem(variable, value, what, variable.malformed, "error", corrected)
    if stop is not None:
        what = f"holds {tokens[stop]!r}, which does not start with a hyphen"
        effect = f"XLA stops reading there: {' '.join(tokens[stop:])} is ignored"
        return Problem(variable, value, what, effect, "warning", corrected)
    return None


_YES, _NO = ("true", "yes", "on", "y", "t"), ("false", "no", "off", "n", "f")


def _corrected(variable: StackVariable, value: str) -> str | None:
    """A valid value that keeps what the user meant, where one is plain: a yes/no word for a 0/1 switch, a level in
    the wrong case, XLA flags typed with a dash that is not two hyphens (an en dash pasted from a page), or with
    one hyphen. None: no such value (unset it)."""
    text = value.strip()
    if variable.kind == "bool01":
        return "1" if text.lower() in _YES else "0" if text.lower() in _NO else None
    if variable.kind == "enum-exact":
        return text.upper() if text.upper() in variable.values else None
    if variable.kind != "xla-flags":
        return None
    tokens = []
    for token in value.split():
        stripped = token.lstrip("-" + _LOOKALIKE_DASHES)
        fixed = f"--{stripped}" if stripped and token[0] in "-" + _LOOKALIKE_DASHES else token
        if not _XLA_FLAG.fullmatch(fixed):
            return None
        tokens.append(fixed)
    return " ".join(tokens) or None
