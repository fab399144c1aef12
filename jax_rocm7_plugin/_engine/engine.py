"""The engine every check runs on: readers that touch the machine and give facts, rules that decide and give
findings, and refining rules that work on the findings made. Each declares what it reads; the engine derives the
order from those declarations and runs only what the rules asked for need.

- A **reader** (phase "read") gives one named fact (`gives`) from the facts it reads: a file tree, a library, the
  loader's checks. It is the only kind that touches the machine, each under its own deadline and bound.
- A **rule** (phase "find") is a pure function of the facts it reads: it returns the findings it makes.
- A **refining rule** (phase "refine") gets the facts it reads and every finding made so far, and returns the list
  as it should be: a consequence folded under its cause, a finding a later observation withdraws, a fix checked.
  Refining rules run after every rule, each after the refining rules it names in `after`. One that observes
  something of its own (the first jit it ran) also gives it as a fact, for the report: no rule reads it.

A rule sees only the facts it declared (a mapping that refuses any other name), so a declaration cannot fall
behind its code. A reader may give several facts at once (`gives` a tuple, its result one value each). A rule may
end the run (`Stop`): where nothing after it can be read (a sysroot that is none). `iterate` runs a set lazily,
finding by finding: a caller that stops reading (the loader, at the first finding that refuses the backend) runs
no reader nobody has read yet.

Findings keep the order of the rules that made them, which is the order the rules are declared in wherever no
dependency decides otherwise: the order in which a report lists them is the declaration's, the order in which they
run is the dependencies'. Stdlib only; it imports nothing of the plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, Literal

from jax_rocm7_plugin._record import NamedTuple

Phase = Literal["read", "find", "refine"]


class Rule(NamedTuple):
    name: str
    run: Callable[..., Any]  # read: (facts) -> fact; find: (facts) -> findings; refine: (facts, findings) -> findings
    phase: Phase
    reads: tuple[str, ...] = ()  # the facts it takes: given to the engine, or given by readers
    gives: str | tuple[str, ...] | None = None  # the fact(s) a reader gives (a refining rule may give one: its outcome)
    after: tuple[str, ...] = ()  # refining rules that must have refined first


class Stop(NamedTuple):
    """What a rule returns to end the run after its findings: nothing after it can be read."""

    findings: tuple[Any, ...] = ()


class EngineError(Exception):
    """A rule set that cannot run: a fact nobody gives, two readers of one fact, a cycle, an unknown rule."""


class _Facts(Mapping[str, Any]):
    """The facts one rule declared, and only those: reading another is an error of the declaration."""

    __slots__ = ("_allowed", "_facts", "_rule")

    def __init__(self, facts: Mapping[str, Any], rule: Rule) -> None:
        self._facts, self._rule, self._allowed = facts, rule, rule.reads

    def __getitem__(self, name: str) -> Any:
        if name not in self._allowed:
            raise EngineError(f"rule {self._rule.name!r} reads {name!r}, which it does not declare")
        return self._facts[name]

    def __iter__(self) -> Any:
        return iter(self._allowed)

    def __len__(self) -> int:
        return len(self._allowed)


class RuleSet:
    """Rules in the order they were declared (`rule` as a decorator, or `add`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rules: list[Rule] = []

    def add(self, rule: Rule) -> Rule:
        if any(r.name == rule.name for r in self.rules):
            raise EngineError(f"{self.name}: two rules named {rule.name!r}")
        self.rules.append(rule)
        return rule

    def rule(
        self,
        phase: Phase,
        *,
        reads: Iterable[str] = (),
        gives: str | tuple[str, ...] | None = None,
        after: Iterable[str] = (),
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare the decorated function a rule of this set, named after it (`_` becomes `-`, leading ones go)."""

        def declare(run: Callable[..., Any]) -> Callable[..., Any]:
            if (phase == "read" and gives is None) or (phase == "find" and gives is not None):
                raise EngineError(f"{run.__name__}: a reader gives a fact, a rule gives findings")
            name = run.__name__.lstrip("_").replace("_", "-")
            self.add(Rule(name, run, phase, tuple(reads), gives, tuple(after)))
            return run

        return declare

    def __add__(self, other: RuleSet) -> RuleSet:
        joined = RuleSet(f"{self.name}+{other.name}")
        for rule in (*self.rules, *other.rules):
            joined.add(rule)
        return joined


def plan(rules: Sequence[Rule], given: Iterable[str] = ()) -> list[Rule]:
    """The rules to run, in order: the readers the others need (each before what reads it, and only those some rule
    needs), then the rules, then the refining rules, each group in declaration order where no dependency decides.
    `given`: the facts the caller supplies."""
    supplied = set(given)
    readers: dict[str, Rule] = {}
    for rule in rules:
        if rule.phase == "read":
            for fact in _given(rule):
                if fact in readers or fact in supplied:
                    raise EngineError(f"two sources of the fact {fact!r}")
                readers[fact] = rule
    position = {rule.name: n for n, rule in enumerate(rules)}
    ordered: list[Rule] = []
    done: set[str] = set()
    visiting: set[str] = set()

    def need(fact: str, by: str) -> None:
        if fact in supplied:
            return
        reader = readers.get(fact)
        if reader is None:
            raise EngineError(f"rule {by!r} reads {fact!r}, which nothing gives")
        visit(reader)

    def visit(rule: Rule) -> None:
        if rule.name in done:
            return
        if rule.name in visiting:
            raise EngineError(f"rules read each other's facts in a circle through {rule.name!r}")
        visiting.add(rule.name)
        for fact in rule.reads:
            need(fact, rule.name)
        for name in rule.after:
            if name not in position:
                raise EngineError(f"rule {rule.name!r} runs after {name!r}, which is not in the set")
            visit(rules[position[name]])
        visiting.discard(rule.name)
        done.add(rule.name)
        ordered.append(rule)

    for phase in ("find", "refine"):
        for rule in rules:
            if rule.phase == phase:
                if phase == "find" and rule.after:
                    raise EngineError(f"rule {rule.name!r}: only refining rules run after others")
                visit(rule)
    return ordered


def _given(rule: Rule) -> tuple[str, ...]:
    return rule.gives if isinstance(rule.gives, tuple) else (rule.gives,) if rule.gives is not None else ()


def _read(rule: Rule, facts: MutableMapping[str, Any]) -> None:
    value = rule.run(_Facts(facts, rule))
    names = _given(rule)
    if isinstance(rule.gives, tuple):
        if len(value) != len(names):
            raise EngineError(f"reader {rule.name!r} gives {names}, but returned {len(value)} value(s)")
        for name, each in zip(names, value, strict=True):
            facts[name] = each
    else:
        facts[names[0]] = value


def run(rules: Sequence[Rule], given: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Run the plan of `rules` with the facts `given`: (the findings, every fact read)."""
    facts: dict[str, Any] = dict(given)
    findings: list[Any] = []
    for rule in plan(rules, given):
        view = _Facts(facts, rule)
        if rule.phase == "read":
            _read(rule, facts)
        elif rule.phase == "find":
            made = rule.run(view)
            if isinstance(made, Stop):
                findings.extend(made.findings)
                break
            findings.extend(made)
        elif rule.gives is not None:  # a refining rule with an outcome of its own (read by no rule: reported)
            refined, facts[_given(rule)[0]] = rule.run(view, findings)
            findings = list(refined)
        else:
            findings = list(rule.run(view, findings))
    return findings, facts


def iterate(rules: Sequence[Rule], given: Iterable[str], facts: MutableMapping[str, Any]) -> Iterator[Any]:
    """The findings of `rules`, each as soon as its rule made it; readers run when a rule first needs them, so a
    caller that stops reading leaves the rest of the machine unread. `facts` holds the facts `given` and takes
    every fact read. Refining rules need every finding: a set with one is run with `run`."""
    ordered = plan(rules, given)
    refining = [r.name for r in ordered if r.phase == "refine"]
    if refining:
        raise EngineError(f"iterate runs no refining rule ({', '.join(refining)}): they need every finding")
    for rule in ordered:
        if rule.phase == "read":
            _read(rule, facts)
            continue
        made = rule.run(_Facts(facts, rule))
        if isinstance(made, Stop):
            yield from made.findings
            return
        yield from made
