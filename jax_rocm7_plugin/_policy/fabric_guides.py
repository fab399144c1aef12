"""What the sites' and vendors' guides require of RCCL's and libfabric's variables on a fabric, or mark harmful
(data: fabric_guides.json, each rule with its guides). Stdlib only; the doctor's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._environment import listed
from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "fabric_guides.json"


class GuideProblem(NamedTuple):
    variable: str
    value: str | None  # as set (None: unset)
    what: str
    setting: str  # the value the guides set
    note: str | None  # what the guides add to it ("(or kdreg2 where the site provides it)")
    severity: str
    sources: tuple[str, ...]

    @property
    def fix(self) -> str:
        return f"{self.variable}={self.setting}" + (f" {self.note}" if self.note else "")


@cache
def _rules() -> tuple[dict[str, Any], ...]:
    rules = json.loads(DATA.read_text(encoding="utf-8"))["rules"]
    for rule in rules:
        if not rule.get("sources") or not all(s.startswith("https://") for s in rule["sources"]):
            raise ValueError(f"fabric guide rule {rule.get('variable')!r}: cite the guides")
        if not isinstance(rule.get("set"), str) or not rule["set"]:
            raise ValueError(f"fabric guide rule {rule.get('variable')!r}: 'set' is the value the guides set")
    return tuple(rules)


def problems(fabric: str, environ: Mapping[str, str]) -> list[GuideProblem]:
    """The guides' rules for `fabric` ("Slingshot") that this environment breaks."""
    rules = [r for r in _rules() if r["fabric"] == fabric]
    values = dict(listed({r["variable"] for r in rules}, environ))
    found = []
    for rule in rules:
        name, value = rule["variable"], values.get(rule["variable"])
        if value is not None and value.strip().lower() in {h.lower() for h in rule.get("harmful", ())}:
            what = f"{name}={value}: {rule['why']}"
        elif _missing(rule, value):
            what = f"{name} is {'unset' if value is None else repr(value)}: {rule['why']}"
        else:
            continue
        sources = tuple(rule["sources"])
        found.append(GuideProblem(name, value, what, rule["set"], rule.get("note"), rule["severity"], sources))
    return found


def _missing(rule: Mapping[str, Any], value: str | None) -> bool:
    """The rule requires a value (or a prefix of one) that `value` is not."""
    text = (value or "").strip()
    if "required" in rule:
        return text.lower() != str(rule["required"]).lower()
    return "required_prefix" in rule and not text.lstrip("=^").startswith(rule["required_prefix"])
