"""The engine derives the order from what rules declare, runs only the readers the asked rules need, and holds every
rule to its declaration."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import pytest

from jax_rocm7_plugin._engine import EngineError, Rule, RuleSet, plan, run
from tests.support.environment import REPO


def _rules() -> tuple[RuleSet, list[str]]:
    ran: list[str] = []
    rules = RuleSet("test")

    @rules.rule("find", reads=("gpus", "driver"))
    def gpu_rule(facts: Mapping[str, Any]) -> list[str]:
        ran.append("gpu-rule")
        return [f"{facts['driver']}: {n}" for n in facts["gpus"]]

    @rules.rule("read", reads=("root",), gives="gpus")
    def read_gpus(facts: Mapping[str, Any]) -> list[int]:
        ran.append("read-gpus")
        return [0, 1]

    @rules.rule("read", reads=("root",), gives="driver")
    def read_driver(facts: Mapping[str, Any]) -> str:
        ran.append("read-driver")
        return f"amdgpu under {facts['root']}"

    @rules.rule("read", gives="unused")
    def read_unused(facts: Mapping[str, Any]) -> str:
        ran.append("read-unused")
        return "never"

    @rules.rule("find")
    def first_declared(facts: Mapping[str, Any]) -> list[str]:
        ran.append("first-declared")
        return ["second finding"]

    @rules.rule("refine", after=("drop-second",))
    def upper(facts: Mapping[str, Any], found: list[str]) -> list[str]:
        return [f.upper() for f in found]

    @rules.rule("refine")
    def drop_second(facts: Mapping[str, Any], found: list[str]) -> list[str]:
        return [f for f in found if "second" not in f]

    return rules, ran


def test_readers_run_before_what_reads_them_and_only_where_needed() -> None:
    rules, ran = _rules()
    found, facts = run(rules.rules, {"root": "/sysroot"})
    assert ran == ["read-gpus", "read-driver", "gpu-rule", "first-declared"]  # read-unused never ran
    assert "unused" not in facts and facts["gpus"] == [0, 1]
    # The rules' findings in declaration order, then refined: drop-second before upper (its `after`).
    assert found == ["AMDGPU UNDER /SYSROOT: 0", "AMDGPU UNDER /SYSROOT: 1"]


def test_the_order_is_derived_not_listed() -> None:
    rules, _ = _rules()
    names = [r.name for r in plan(rules.rules, {"root"})]
    assert names == ["read-gpus", "read-driver", "gpu-rule", "first-declared", "drop-second", "upper"]


def test_a_rule_reads_only_what_it_declares() -> None:
    rules = RuleSet("sneaky")

    @rules.rule("find", reads=("a",))
    def sneaky(facts: Mapping[str, Any]) -> list[str]:
        return [facts["b"]]

    with pytest.raises(EngineError, match="reads 'b', which it does not declare"):
        run(rules.rules, {"a": 1, "b": 2})


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([Rule("r", lambda f: [], "find", ("missing",))], "reads 'missing', which nothing gives"),
        (
            [Rule("a", lambda f: 1, "read", ("y",), "x"), Rule("b", lambda f: 1, "read", ("x",), "y"),
             Rule("c", lambda f: [], "find", ("x",))],
            "in a circle",
        ),
        ([Rule("a", lambda f: 1, "read", (), "x"), Rule("b", lambda f: 2, "read", (), "x")], "two sources"),
        ([Rule("r", lambda f, found: found, "refine", (), None, ("nobody",))], "not in the set"),
        ([Rule("r", lambda f: [], "find", (), None, ("other",)), Rule("other", lambda f: [], "find")], "only refining"),
    ],
)  # fmt: skip
def test_a_rule_set_that_cannot_run_says_why(rules: list[Rule], message: str) -> None:
    with pytest.raises(EngineError, match=message):
        plan(rules)


def test_the_doctor_lists_no_checks_it_asks_the_engine() -> None:
    """_doctor/diagnose.py calls no check: every finding comes from a rule of _doctor/rules.py, run by the engine.
    Its imports are the engine, the rule set, the report's records and what names the packages."""
    from jax_rocm7_plugin._doctor.rules import DOCTOR, GIVEN

    tree = ast.parse((REPO / "jax_rocm7_plugin" / "_doctor" / "diagnose.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    checks = {m for m in imported if m and m.startswith(("jax_rocm7_plugin._machine.", "jax_rocm7_plugin._policy"))}
    # What the report's records read besides the rules' facts: installed versions, memory sizes, the build record of
    # the extension modules, product names. None of them gives a finding.
    report_only = {"packages", "memory", "native_modules", "gfx_targets"}
    assert {m.rsplit(".", 1)[1] for m in checks} <= report_only, checks
    ordered = plan(DOCTOR.rules, GIVEN)
    assert {r.name for r in ordered} == {r.name for r in DOCTOR.rules}  # every reader is needed by some rule
    assert next(r.name for r in ordered if r.phase == "find") == "loader-checks"  # the loader's first error first


def test_iterate_runs_a_reader_only_when_a_rule_first_needs_it_and_stops_where_its_caller_stops() -> None:
    """The loader's quick path: it reads findings until the first that refuses, and the readers of later rules
    never touch the machine."""
    from jax_rocm7_plugin._engine import RuleSet, Stop, iterate

    ran: list[str] = []
    rules = RuleSet("lazy")

    @rules.rule("read", gives="cheap")
    def _cheap(facts: object) -> int:
        ran.append("cheap")
        return 1

    @rules.rule("read", gives=("costly", "also"))
    def _costly(facts: object) -> tuple[int, int]:
        ran.append("costly")
        return 2, 3

    @rules.rule("find", reads=("cheap",))
    def _first(facts: Mapping[str, int]) -> list[str]:
        return ["refuses"]

    @rules.rule("find", reads=("costly", "also"))
    def _second(facts: Mapping[str, int]) -> list[str]:
        return [f"costly {facts['costly']} {facts['also']}"]

    found = iterate(rules.rules, (), {})
    assert next(found) == "refuses" and ran == ["cheap"]
    store: dict[str, object] = {}
    assert list(iterate(rules.rules, (), store)) == ["refuses", "costly 2 3"] and store["also"] == 3

    stopping = RuleSet("stop")

    @stopping.rule("find")
    def _unreadable(facts: object) -> Stop:
        return Stop(("no root",))

    @stopping.rule("read", gives="tree")
    def _tree(facts: object) -> int:
        ran.append("tree")
        return 0

    @stopping.rule("find", reads=("tree",))
    def _later(facts: object) -> list[str]:
        return ["later"]

    ran.clear()
    assert list(iterate(stopping.rules, (), {})) == ["no root"] and ran == []
