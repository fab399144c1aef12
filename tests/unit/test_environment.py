"""One home for the environment (_environment.py): every variable the plugin reads is declared there with its
meaning, grammar and default, read through its reader, and nothing reads the environment around it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._environment import UndeclaredVariable, declared, declared_variables, problems, setting, switch
from tests.support.environment import REPO

PLUGIN = REPO / "jax_rocm7_plugin"
# Receivers that hold an environment mapping: os.environ itself, or a parameter or attribute of these names.
ENVIRONMENT_NAMES = {"environ", "env", "environment"}
READERS = {"read", "is_set", "setting", "switch"}


def _is_environment(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in ENVIRONMENT_NAMES
    return isinstance(node, ast.Name) and node.id in ENVIRONMENT_NAMES


def bypassing_reads(source: str) -> list[str]:
    """Reads of an environment mapping that do not go through _environment: .get/.items/.keys/.values, a
    subscript (not a slice), `in`, os.getenv."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, node.func.value
            if (method in ("get", "items", "keys", "values") and _is_environment(receiver)) or method == "getenv":
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
            if not isinstance(node.slice, ast.Slice):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
            and any(_is_environment(c) for c in node.comparators)
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def product_sources() -> list[Path]:
    files = [p for p in PLUGIN.rglob("*.py") if p.name != "_environment.py"]
    return sorted([*files, REPO / "jax_plugins" / "rocm7" / "__init__.py"])


def test_the_scan_finds_every_kind_of_bypassing_read() -> None:
    source = (
        "import os\n"
        "a = os.environ.get('X')\nb = environ['Y']\nc = 'Z' in self.environ\nd = os.getenv('W')\n"
        "e = sorted(env.items())\nf = record.environment[:3]\n"
    )
    assert len(bypassing_reads(source)) == 5  # the slice of a recorded tuple is no read


@pytest.mark.parametrize("path", product_sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_nothing_reads_the_environment_around_the_declarations(path: Path) -> None:
    assert bypassing_reads(path.read_text()) == []


def _literal_reads(source: str) -> set[str]:
    """Every string literal (or _environment constant) passed as the name to one of the readers."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            first = node.args[0]
            if called in READERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
    return names


def test_every_name_read_by_literal_is_declared() -> None:
    names = set().union(*(_literal_reads(p.read_text()) for p in product_sources()))
    assert names, "the scan found no read at all: it is broken"
    assert sorted(n for n in names if not declared(n)) == []


def test_an_undeclared_name_cannot_be_read() -> None:
    with pytest.raises(UndeclaredVariable):
        _environment.read("SOME_UNDECLARED_NAME", {"SOME_UNDECLARED_NAME": "1"})
    with pytest.raises(UndeclaredVariable):
        _environment.read("JAX_ROCM_NOT_A_VARIABLE", {})  # the plugin's own family holds only what it declares
    with pytest.raises(UndeclaredVariable):
        _environment.matching(("SOME_",), {})


def test_every_variable_named_by_policy_data_is_declared() -> None:
    """The names the data of _policy reads (known issues' workarounds, stack variables, math libraries' folder
    variables, launchers, the cluster's steering variables) all fall under a declaration."""
    policy = PLUGIN / "_policy"
    names: set[str] = set()
    names |= {v["name"] for v in json.loads((policy / "stack_variables.json").read_text())["variables"]}
    libraries = json.loads((policy / "math_libraries.json").read_text())["libraries"]
    names |= {lib["variable"] for lib in libraries if lib.get("variable")}
    for launcher in json.loads((policy / "launchers.json").read_text())["launchers"]:
        names |= {*launcher.get("all", ()), *launcher.get("any", ()), *launcher.get("none", ())}
    steering = json.loads((policy / "cluster_policy.json").read_text())["steering_variables"]
    names |= set(steering["names"])
    for issue in json.loads((policy / "known_issues.json").read_text())["issues"]:
        names |= set((issue.get("workaround") or {}).get("variables") or {})
    assert len(names) > 40
    assert sorted(n for n in names if not declared(n)) == []
    _environment.matching(tuple(steering["prefixes"]), {})  # raises for a prefix no family holds


def test_every_declaration_says_what_it_means() -> None:
    for variable in declared_variables().values():
        assert variable.meaning and variable.grammar, variable
        if variable.grammar == "choice":
            assert variable.default in variable.choices, variable


@pytest.mark.parametrize(
    ("value", "on"),
    [("0", False), ("false", False), ("FALSE", False), (" no ", False), ("off", False), ("Off", False),
     ("1", True), ("true", True), ("Yes", True), ("on", True), ("", True), (None, True)],
)  # fmt: skip
def test_switches_take_the_usual_words(value: str | None, on: bool) -> None:
    environ = {} if value is None else {_environment.WARM: value}
    assert switch(_environment.WARM, environ) is on
    assert setting(_environment.WARM, environ).problem is None


def test_a_switch_set_to_something_else_stays_on_and_says_why() -> None:
    found = setting(_environment.WORKAROUNDS, {_environment.WORKAROUNDS: "nah"})
    assert found.value is True
    assert found.problem is not None and "'nah'" in found.problem and "off" in found.problem


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        (_environment.HANG_TIMEOUT, "off", None),
        (_environment.HANG_TIMEOUT, "2.5", 2.5),
        (_environment.HANG_TIMEOUT, "-3", _environment.DEFAULT_HANG_TIMEOUT),
        (_environment.HANG_TIMEOUT, "nan", _environment.DEFAULT_HANG_TIMEOUT),
        (_environment.JOB_CHECK, " Warn ", "warn"),
        (_environment.JOB_CHECK, "strict", "error"),
        (_environment.JOB_CHECK_TIMEOUT, "inf", _environment.DEFAULT_JOB_CHECK_TIMEOUT),
        (_environment.HANG_PLATFORMS, "cpu, ROCM", frozenset({"cpu", "rocm"})),
        (_environment.XDIST_GPUS, "0", None),
    ],
)
def test_each_grammar_reads_its_values(name: str, value: str, expected: object) -> None:
    assert setting(name, {name: value}).value == expected


def test_the_doctor_is_told_every_unknown_or_invalid_own_variable() -> None:
    environ = {
        "JAX_ROCM_WARMM": "0",  # a typo of JAX_ROCM_WARM
        "JAX_ROCM_FOO": "1",  # nothing near
        "JAX_ROCM_HANG_ACTION": "kill",
        "JAX_ROCM_WARM": "no",  # valid
        "JAX_ROCM_SYSROOT": "relative",  # the settings check it themselves (with the filesystem)
        "JAX_ROCM_BUILD_CACHE": "/tmp/x",  # the build's: known, never flagged
        "HSA_XNACK": "whatever",  # not ours: the stack-variable check's
    }
    found = {p.name: p for p in problems(environ, skip=(_environment.SYSROOT,))}
    assert sorted(found) == ["JAX_ROCM_FOO", "JAX_ROCM_HANG_ACTION", "JAX_ROCM_WARMM"]
    assert "did you mean JAX_ROCM_WARM?" in found["JAX_ROCM_WARMM"].problem
    assert found["JAX_ROCM_WARMM"].fix == "spell it JAX_ROCM_WARM"
    assert "JAX_ROCM_COURIER_PARENT" not in found["JAX_ROCM_FOO"].fix  # internal: never offered to users
    assert "report, exit" in found["JAX_ROCM_HANG_ACTION"].fix


def test_the_cache_root_follows_xdg_then_home() -> None:
    assert _environment.cache_root({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/jax-rocm7-plugin")
    assert _environment.cache_root({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/jax-rocm7-plugin")
    assert _environment.cache_root({"HOME": "rel"}) is None
