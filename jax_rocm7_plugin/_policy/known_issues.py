"""Public bugs of the versions a machine runs, as data (known_issues.json), matched against what the checks learned.

An entry applies to a `Situation` -- the ROCm the library loads, the library's release, jaxlib, the GPUs
HIP will use, the platform, the job's hosts, the environment -- when every condition under its
`affects` holds and the variables under its workaround do not already avoid it. The doctor turns each
match into a `known-issue` finding (its severity from the entry's effect); the cluster preflight
matches the multi-host ones across the job; the loader applies the workarounds marked `safe` (variables
only) before the library loads, unless the user set that variable or JAX_ROCM_WORKAROUNDS=0.

Facts a situation could not learn are None: a condition on an unknown fact does not match (the doctor
never claims a bug it cannot see). Stdlib only, read on first use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._findings import Finding, Remedy, Severity
from jax_rocm7_plugin._policy.grammar import loose_version
from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "known_issues.json"
WORKAROUNDS_VARIABLE = _environment.WORKAROUNDS  # off turns the loader's safe workarounds off
ROCM_PLACEHOLDER = "{rocm}"  # in a workaround value: the root of the ROCm install the library loads
AFFECTS_KEYS = frozenset(
    {
        "rocm",
        "releases",
        "jaxlib",
        "gfx",
        "platform",
        "multi_host",
        "min_gpus",
        "max_gpus",
        "hsa_override",
        "amdgpu_driver",
        "mes_firmware",
        "rocm_layout",
        "other_plugins",
        "gc_ip",
        "gfx_all",
    }
)
PLATFORMS = frozenset({"wsl"})
LAYOUTS = frozenset({"therock", "amd"})
# (major, minor, patch) from '7.2.0-43', '7.2.0.70200-43', '7.13.0a20260415', '0.10.2.post1'; None if none.
version_tuple = loose_version


class Range(NamedTuple):
    low: tuple[int, int, int] | None  # inclusive
    below: tuple[int, int, int] | None  # exclusive

    def holds(self, version: tuple[int, int, int]) -> bool:
        return (self.low is None or version >= self.low) and (self.below is None or version < self.below)

    def describe(self) -> str:
        def text(v: tuple[int, int, int]) -> str:
            return ".".join(map(str, v))

        if self.low and self.below:
            return f"{text(self.low)} up to (not including) {text(self.below)}"
        return f"{text(self.low)} or later" if self.low else f"before {text(self.below)}" if self.below else "any"


class Workaround(NamedTuple):
    text: str
    variables: tuple[tuple[str, str], ...]  # NAME, value ("{rocm}" stands for the install's root)
    xla_flags: tuple[tuple[str, str], ...]  # --flag, value
    safe: bool
    documented_by: str | None


class Confirmed(NamedTuple):
    """Where the sources confirm the bug: `where` narrows `affects` (the same keys); `seen` says it in words.
    A machine `affects` covers but `where` does not gets the entry as info, naming where it was seen."""

    where: Mapping[str, Any]
    seen: str | None
    still_present: str | None  # a source saying the bug is still there, for a ROCm range without an end


class KnownIssue(NamedTuple):
    id: str
    title: str
    sources: tuple[str, ...]
    affects: Mapping[str, Any]
    effect_kind: str
    effect: str
    workaround: Workaround
    fixed_in: Mapping[str, str] | None
    severity: Severity
    confirmed: Confirmed = Confirmed({}, None, None)

    @property
    def multi_host(self) -> bool:
        return bool(self.affects.get("multi_host"))

    def fixed_text(self) -> str | None:
        if not self.fixed_in:
            return None
        if "text" in self.fixed_in:
            return self.fixed_in["text"]
        what, version = next(iter(self.fixed_in.items()))
        names = {"rocm": "ROCm", "release": "jax", "amdgpu_driver": "amdgpu driver"}
        return f"fixed in {names.get(what, what)} {version}"


class Situation(NamedTuple):
    """What the checks learned that known issues depend on; None where it is not known."""

    rocm: str | None = None  # version of the ROCm install the library loads ("7.2.0-43")
    rocm_root: str | None = None  # its root, as the user knows it
    rocm_layout: str | None = None  # "therock" (bitcode and LLD under lib/llvm) or "amd"
    release: str | None = None  # the PJRT library's jax release (X.Y.Z)
    jaxlib: str | None = None
    gfx: tuple[str, ...] = ()  # of the GPUs HIP will use
    gpu_count: int | None = None  # GPUs HIP will use
    wsl: bool = False
    hosts: int | None = None  # hosts the job spans, where a launcher says (1: a single host)
    environment: tuple[tuple[str, str], ...] = ()  # the variables workarounds name, as set
    hsa_override: str | None = None
    amdgpu_driver: str | None = None  # /sys/module/amdgpu/version (DKMS builds)
    mes_firmware: tuple[tuple[str, str], ...] = ()  # (gfx, "0x83") per GPU where the driver says
    gc_ip: tuple[tuple[str, str], ...] = ()  # (gfx, "11.5.1"): each GPU's graphics-compute IP version
    other_plugins: tuple[str, ...] = ()  # other jax plugin distributions installed

    def variable(self, name: str) -> str | None:
        return next((value for key, value in self.environment if key == name), None)

    def xla_flag(self, flag: str) -> str | None:
        """The value XLA_FLAGS gives `flag` (the last one wins, as in XLA); None when absent."""
        found = None
        for token in (self.variable("XLA_FLAGS") or "").split():
            name, _, value = token.partition("=")
            if name == flag:
                found = value
        return found


class Match(NamedTuple):
    issue: KnownIssue
    evidence: tuple[str, ...]  # why it applies here
    confirmed: bool = True  # the sources confirm it for this configuration (else: info, where it was seen)

    @property
    def severity(self) -> Severity:
        return self.issue.severity if self.confirmed else "info"

    def applied_by_loader(self, situation: Situation) -> tuple[tuple[str, str], ...]:
        """The variables the loader sets for this match (none unless safe, opted in and unset by the user)."""
        if not self.issue.workaround.safe or not _environment.switch(WORKAROUNDS_VARIABLE, dict(situation.environment)):
            return ()
        wanted = [(name, _expand(value, situation)) for name, value in self.issue.workaround.variables]
        if any(situation.variable(name) not in (None, value) for name, value in wanted):
            return ()  # the user chose another value of their own: theirs stands, and nothing else is half-applied
        # Applied whole: a variable already holding the wanted value counts as set, the others are filled in.
        return tuple((name, value) for name, value in wanted if situation.variable(name) is None)


def _range(spec: Mapping[str, str]) -> Range:
    return Range(version_tuple(spec.get("from")), version_tuple(spec.get("below")))


def _ranges(spec: Any) -> tuple[Range, ...]:
    return tuple(_range(s) for s in (spec if isinstance(spec, list) else [spec]))


def _expand(value: str, situation: Situation | None) -> str:
    """`value` with the install's root for "{rocm}" ("<ROCm root>" where it is not known)."""
    root = situation.rocm_root if situation is not None and situation.rocm_root else "<ROCm root>"
    return value.replace(ROCM_PLACEHOLDER, root)


@cache
def entries() -> tuple[KnownIssue, ...]:
    """Every entry of known_issues.json, validated (ValueError names the entry and what is wrong)."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    severities: dict[str, Severity] = data["effects"]
    found = []
    seen: set[str] = set()
    for raw in data["issues"]:
        entry = _entry(raw, severities)
        if entry.id in seen:
            raise ValueError(f"known issue {entry.id!r} appears twice")
        seen.add(entry.id)
        found.append(entry)
    return tuple(found)


def _entry(raw: Mapping[str, Any], severities: Mapping[str, Severity]) -> KnownIssue:
    ident = raw.get("id", "?")

    def fail(problem: str) -> ValueError:
        return ValueError(f"known issue {ident!r}: {problem}")

    if not re.fullmatch(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", str(ident)):
        raise fail("the id must be kebab-case")
    affects = raw.get("affects") or {}
    unknown = set(affects) - AFFECTS_KEYS
    if unknown or not affects:
        raise fail(f"'affects' needs conditions among {sorted(AFFECTS_KEYS)} (got {sorted(affects)})")
    if "platform" in affects and affects["platform"] not in PLATFORMS:
        raise fail(f"platform {affects['platform']!r} is not one of {sorted(PLATFORMS)}")
    if "rocm_layout" in affects and affects["rocm_layout"] not in LAYOUTS:
        raise fail(f"rocm_layout {affects['rocm_layout']!r} is not one of {sorted(LAYOUTS)}")
    for key in ("rocm", "jaxlib", "amdgpu_driver"):
        if key in affects and not all(r.low or r.below for r in _ranges(affects[key])):
            raise fail(f"'{key}' needs 'from' and/or 'below' versions")
    confirmed = _confirmed(raw.get("confirmed"), affects, fail)
    sources = tuple(raw.get("sources") or ())
    if not sources or not all(s.startswith("https://github.com/") for s in sources):
        raise fail("every entry cites its public threads (https://github.com/...)")
    kind = raw["effect"]["kind"]
    if kind not in severities:
        raise fail(f"effect kind {kind!r} is not one of {sorted(severities)}")
    spec = raw["workaround"]
    workaround = Workaround(
        spec["text"],
        tuple((spec.get("variables") or {}).items()),
        tuple((spec.get("xla_flags") or {}).items()),
        bool(spec.get("safe")),
        spec.get("documented_by"),
    )
    if workaround.safe and (workaround.xla_flags or not workaround.variables or not workaround.documented_by):
        raise fail("a safe workaround sets variables only, and names who documents them")
    if workaround.safe and any(ROCM_PLACEHOLDER in value for _, value in workaround.variables):
        raise fail("a safe workaround's values do not depend on the machine")
    return KnownIssue(
        ident,
        raw["title"],
        sources,
        affects,
        kind,
        raw["effect"]["what"],
        workaround,
        raw.get("fixed_in"),
        severities[kind],
        confirmed,
    )


def _confirmed(raw: Mapping[str, Any] | None, affects: Mapping[str, Any], fail: Any) -> Confirmed:
    """The confirmed scope, checked: only keys of `affects`, with words for it, and no ROCm range left open
    (a bug seen on one release is not assumed in every later one) unless a source says it is still there."""
    raw = raw or {}
    where = raw.get("where") or {}
    if set(where) - AFFECTS_KEYS:
        raise fail(f"'confirmed.where' has unknown conditions {sorted(set(where) - AFFECTS_KEYS)}")
    if where and not raw.get("seen"):
        raise fail("'confirmed' narrows 'affects', so it says where the sources saw the bug ('seen')")
    still = raw.get("still_present")
    if still is not None and not str(still).startswith("https://github.com/"):
        raise fail("'confirmed.still_present' cites a public thread (https://github.com/...)")
    rocm = where.get("rocm", affects.get("rocm"))
    if rocm is not None and any(r.below is None for r in _ranges(rocm)) and still is None:
        raise fail(
            "its ROCm range has no end: bound it in 'confirmed.where' to the releases the sources saw, "
            "or cite a source that says the bug is still there ('confirmed.still_present')"
        )
    return Confirmed(where, raw.get("seen"), still)


def variables() -> frozenset[str]:
    """Every variable a workaround names (the situation reads these), XLA_FLAGS and the opt-out."""
    names = {name for e in entries() for name, _ in e.workaround.variables}
    return frozenset({*names, "XLA_FLAGS", WORKAROUNDS_VARIABLE})


def matches(
    situation: Situation, *, multi_host: bool | None = None, assume: frozenset[str] = frozenset()
) -> Iterator[Match]:
    """The entries that apply, in the data's order. `multi_host`: only entries that are (True) or are not
    (False) about jobs spanning hosts; None: both (a multi-host entry still needs `situation.hosts` > 1).
    `assume`: conditions taken as holding (the loader's first, cheap pass, before it looks for ROCm).
    A machine where HIP would use no GPU (and that is not WSL, where KFD lists none) has none of them."""
    if situation.gpu_count == 0 and not situation.wsl:
        return
    for entry in entries():
        if multi_host is not None and entry.multi_host != multi_host:
            continue
        evidence = _applies(entry, situation, assume)
        if evidence is not None and not _avoided(entry, situation):
            yield Match(entry, evidence, _holds(entry.confirmed.where, situation, assume))


ROCM_CONDITIONS = frozenset({"rocm", "rocm_layout"})  # what needs the ROCm install found


def _applies(entry: KnownIssue, s: Situation, assume: frozenset[str] = frozenset()) -> tuple[str, ...] | None:
    """Why `entry` applies to `s`, one line per condition; None when a condition fails or is unknown."""
    why: list[str] = []
    for key, spec in entry.affects.items():
        if key in assume:
            continue
        line = _condition(key, spec, s)
        if line is None:
            return None
        why.append(line)
    return tuple(why)


def _holds(conditions: Mapping[str, Any], s: Situation, assume: frozenset[str]) -> bool:
    return all(key in assume or _condition(key, spec, s) is not None for key, spec in conditions.items())


def _condition(key: str, spec: Any, s: Situation) -> str | None:
    if key == "rocm":
        version = version_tuple(s.rocm)
        if version is None or not any(r.holds(version) for r in _ranges(spec)):
            return None
        return f"ROCm {s.rocm}" + (f" at {s.rocm_root}" if s.rocm_root else "")
    if key == "jaxlib":
        version = version_tuple(s.jaxlib)
        return f"jaxlib {s.jaxlib}" if version and any(r.holds(version) for r in _ranges(spec)) else None
    if key == "amdgpu_driver":
        version = version_tuple(s.amdgpu_driver)
        ok = version is not None and any(r.holds(version) for r in _ranges(spec))
        return f"amdgpu driver {s.amdgpu_driver} (/sys/module/amdgpu/version)" if ok else None
    if key == "releases":
        return f"the PJRT library of jax {s.release}" if s.release in spec else None
    if key == "gfx":
        hit = sorted({g for g in s.gfx if g in spec})
        return f"GPU {', '.join(hit)}" if hit else None
    if key == "gfx_all":
        present = set(s.gfx)
        return f"GPUs {' and '.join(spec)} together" if all(g in present for g in spec) else None
    if key == "gc_ip":
        hit = sorted({f"{gfx} (graphics IP {ip})" for gfx, ip in s.gc_ip if any(_ip_in(ip, f) for f in spec)})
        return f"GPU {', '.join(hit)}" if hit else None
    if key == "platform":
        return "WSL (/dev/dxg)" if spec == "wsl" and s.wsl else None
    if key == "multi_host":
        return f"the job spans {s.hosts} hosts" if spec and s.hosts is not None and s.hosts > 1 else None
    if key == "min_gpus":
        return f"{s.gpu_count} GPUs" if s.gpu_count is not None and s.gpu_count >= spec else None
    if key == "max_gpus":
        return f"{s.gpu_count} GPU" if s.gpu_count is not None and 0 < s.gpu_count <= spec else None
    if key == "hsa_override":
        value = (s.hsa_override or "").strip()
        return f"HSA_OVERRIDE_GFX_VERSION={value}" if any(value.startswith(p + ".") for p in spec) else None
    if key == "mes_firmware":
        wanted = {_firmware(f) for f in spec}
        hit = [f"{gfx} MES firmware {fw}" for gfx, fw in s.mes_firmware if _firmware(fw) in wanted]
        return "; ".join(hit) if hit else None
    if key == "rocm_layout":
        return f"ROCm laid out as {spec} ({s.rocm_root})" if s.rocm_layout == spec else None
    if key == "other_plugins":
        hit = sorted(set(s.other_plugins) & set(spec))
        return f"{', '.join(hit)} installed" if hit else None
    return None


def _ip_in(version: str, family: str) -> bool:
    """'11.5.1' is in the family '11.5' (and in '11.5.1'), not in '11.50'."""
    return version == family or version.startswith(family + ".")


def _firmware(text: str) -> int | None:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def _avoided(entry: KnownIssue, s: Situation) -> bool:
    """The workaround is already in place: every variable and XLA flag it names holds its value."""
    workaround = entry.workaround
    if not workaround.variables and not workaround.xla_flags:
        return False
    for name, value in workaround.variables:
        actual = s.variable(name)
        if actual is None or (ROCM_PLACEHOLDER not in value and actual != value) or not actual:
            return False
    return all(s.xla_flag(flag) == value for flag, value in workaround.xla_flags)


def safe_workarounds(
    situation: Situation, *, assume: frozenset[str] = frozenset()
) -> list[tuple[Match, tuple[tuple[str, str], ...]]]:
    """The matches whose workaround the loader applies here, each with the variables it sets. `assume`: as for
    `matches` (the loader's cheap first pass, assuming ROCM_CONDITIONS: a machine none could apply to never
    looks for ROCm, nor does one where none depends on the ROCm release)."""
    found = []
    for match in matches(situation, multi_host=False, assume=assume):
        applied = match.applied_by_loader(situation)
        if applied:
            found.append((match, applied))
    return found


def finding(match: Match, situation: Situation) -> Finding:
    """The doctor's `known-issue` finding for a match: the bug, its source, and the workaround."""
    from jax_rocm7_plugin._findings import known_issue

    issue = match.issue
    applied = match.applied_by_loader(situation)
    fix = fix_text(issue, situation)
    if applied:
        settings = ", ".join(f"{name}={value}" for name, value in applied)
        summary = f"{issue.title}; the loader sets {settings} in the process to avoid it ({issue.sources[0]})"
        return known_issue(
            issue.id,
            "info",
            summary,
            f"nothing to do ({WORKAROUNDS_VARIABLE}=0 turns it off); else: {fix}",
            match.evidence,
        )
    # The conditions that combine here go in the summary, not only in the evidence: they are the cause.
    summary = f"{issue.title} ({issue.sources[0]}); here: {', '.join(match.evidence)}"
    if not match.confirmed:
        seen = issue.confirmed.seen or "elsewhere"
        summary = f"{summary}; confirmed only {seen}, not for this machine's configuration"
    return known_issue(issue.id, match.severity, summary, fix, match.evidence, _remedy(issue, situation))


def _remedy(issue: KnownIssue, situation: Situation) -> Remedy | None:
    """The workaround as a change of variables the doctor can check: its variables, and its XLA flags added to the
    XLA_FLAGS already set (None where it is no such change, or names the install's root)."""

    workaround = issue.workaround
    if not workaround.variables and not workaround.xla_flags:
        return None
    if any(ROCM_PLACEHOLDER in value for _, value in workaround.variables):
        return None
    environment: list[tuple[str, str | None]] = list(workaround.variables)
    if workaround.xla_flags:
        flags = " ".join(f"{flag}={value}" for flag, value in workaround.xla_flags)
        current = situation.variable("XLA_FLAGS") or ""
        environment.append(("XLA_FLAGS", f"{current} {flags}".strip()))
    return Remedy(environment=tuple(environment))


def fix_text(issue: KnownIssue, situation: Situation | None = None) -> str:
    """The workaround, with the install's root where it names one, and where the bug is fixed."""
    text = _expand(issue.workaround.text, situation)
    fixed = issue.fixed_text()
    return f"{text}{f' ({fixed})' if fixed and fixed not in text else ''}"


def readme_rows(issues: Iterable[KnownIssue] | None = None) -> list[str]:
    """The known-issue table of _policy/README.md, one Markdown row an entry (a test keeps the file equal to it)."""
    rows = [
        "| id | affects | warns where (else info) | effect | workaround | source |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for issue in issues if issues is not None else entries():
        safe = " (the loader applies it)" if issue.workaround.safe else ""
        where = issue.confirmed.where
        warns = f"{_affects_text(where)} (seen {issue.confirmed.seen})" if where else "everywhere it applies"
        if issue.workaround.safe:
            warns = f"with the loader's workaround off: {warns}"
        if issue.severity == "info":
            warns = "never (an info)"
        rows.append(
            f"| `{issue.id}` | {_affects_text(issue.affects)} | {warns} | {issue.effect_kind}: {issue.effect} | "
            f"{_expand(issue.workaround.text, None)}{safe} | {', '.join(_short(s) for s in issue.sources)} |"
        )
    return rows


def _short(url: str) -> str:
    """https://github.com/ROCm/TheRock/issues/6301 -> ROCm/TheRock#6301."""
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)", url)
    return f"[{match.group(1)}#{match.group(2)}]({url})" if match else url


def _affects_text(affects: Mapping[str, Any]) -> str:
    parts = []
    for key, spec in affects.items():
        if key in ("rocm", "jaxlib", "amdgpu_driver"):
            name = {"rocm": "ROCm", "jaxlib": "jaxlib", "amdgpu_driver": "amdgpu driver"}[key]
            parts.append(f"{name} {' or '.join(r.describe() for r in _ranges(spec))}")
        elif key == "releases":
            parts.append(f"library of jax {', '.join(spec)}")
        elif key == "gfx":
            parts.append(", ".join(spec))
        elif key == "gfx_all":
            parts.append(" with ".join(spec) + " in one process")
        elif key == "gc_ip":
            parts.append(f"graphics IP {'/'.join(spec)}.x")
        elif key == "multi_host":
            parts.append("jobs across hosts")
        elif key in ("min_gpus", "max_gpus"):
            parts.append(f"{'at least' if key == 'min_gpus' else 'at most'} {spec} GPU(s)")
        elif key == "hsa_override":
            parts.append(f"HSA_OVERRIDE_GFX_VERSION={'/'.join(spec)}.x")
        elif key == "mes_firmware":
            parts.append(f"MES firmware {', '.join(spec)}")
        elif key == "rocm_layout":
            parts.append(f"{spec} layout of ROCm")
        elif key == "other_plugins":
            parts.append(f"with {', '.join(spec)}")
        else:
            parts.append(str(spec).upper() if key == "platform" else f"{key} {spec}")
    return "; ".join(parts)
