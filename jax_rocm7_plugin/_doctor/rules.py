"""The doctor's rules: what it reads and what it decides, each declared with the facts it reads (_engine.py).

The engine derives the order from the declarations; a report lists findings in the order the rules are declared
here (the loader's checks first: the loader's warning is the doctor's first error), the most severe first.

To add a check: write a rule here (or in a module of its own, registered into DOCTOR) that reads the facts it
needs and returns findings whose words come from the catalogue (`_findings.py`), and a test that fails without
it. A fact no reader gives yet gets a reader: bounded, under a deadline, through the sysroot, returning a typed
record (never a sentence). The README beside this file shows a real rule added this way.

Facts given by the caller: `settings` (Settings), `deep` (True, False, or None: where the machine has a usable
GPU), `prove` (check each fix the doctor can make), `rerun` (the plain diagnosis of changed settings, for that).
"""

from __future__ import annotations

import os
import site
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin import (
    _environment,
    version,  # its release read at each run: a build stamps it, tests set it
)
from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._doctor import invariants
from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._findings import Finding, Remedy
from jax_rocm7_plugin._machine import host_path, packages, root_owned, unrooted
from jax_rocm7_plugin._machine.gpu_kernels import kernel_findings, library_kernels
from jax_rocm7_plugin._machine.identity import read_identity
from jax_rocm7_plugin._machine.ld_resolve import resolve_opened
from jax_rocm7_plugin._machine.memory import gpu_memory, memory_findings
from jax_rocm7_plugin._machine.packages import OUR_DISTRIBUTIONS
from jax_rocm7_plugin._machine.rocm_install import loaded_install
from jax_rocm7_plugin._machine.toolchain import toolchain_findings
from jax_rocm7_plugin._machine.transport import read_transport
from jax_rocm7_plugin._names import HIP_SONAME, ROCM_MAJOR
from jax_rocm7_plugin._pipeline import Facts, checks, library_release, rocm_install, situation, used_gpus
from jax_rocm7_plugin._policy import known_issues, releases
from jax_rocm7_plugin._policy.gfx_targets import override_target
from jax_rocm7_plugin._policy.known_issues import version_tuple
from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import Deadline, with_deadline
from jax_rocm7_plugin._settings import PJRT_LIBRARY, SYSROOT, Settings

if TYPE_CHECKING:
    from jax_rocm7_plugin._machine.gpu_health import NodeHealth
    from jax_rocm7_plugin._machine.memory import GpuMemory
    from jax_rocm7_plugin._machine.packages import PluginInventory

DOCTOR = RuleSet("doctor")
GIVEN = ("settings", "deep", "prove", "rerun")  # the facts the caller supplies


class Checked(NamedTuple):
    """The loader's checks, run whole (thorough): what they learned, and their findings in order."""

    facts: Facts
    findings: tuple[Finding, ...]


class Health(NamedTuple):
    """The node's health as first read (None: no GPU to read; a Finding: the read hung), and when."""

    read: NodeHealth | Finding | None
    at: float


# --- readers ---------------------------------------------------------------------------------------------------


@DOCTOR.rule("read", reads=("settings",), gives="checked")
def _loader_checks_read(facts: Mapping[str, Any]) -> Checked:
    state = Facts(facts["settings"])
    return Checked(state, tuple(checks(state, thorough=True)))


@DOCTOR.rule("read", gives="plugins")
def _installed_plugins(facts: Mapping[str, Any]) -> PluginInventory:

    return packages.inventory()


@DOCTOR.rule("read", reads=("checked",), gives="memories")
def _gpu_memories(facts: Mapping[str, Any]) -> list[GpuMemory]:
    return _memory(facts["checked"].facts)


@DOCTOR.rule("read", reads=("checked",), gives="health")
def _node_health_read(facts: Mapping[str, Any]) -> Health:
    return Health(*_read_health(facts["checked"].facts))


@DOCTOR.rule("read", reads=("checked",), gives="math")
def _math_library_kernels(facts: Mapping[str, Any]) -> tuple[list[Finding], set[str]]:
    return _math_libraries(facts["checked"].facts)


@DOCTOR.rule("read", reads=("checked", "deep"), gives="deep-wanted")
def _deep_wanted(facts: Mapping[str, Any]) -> bool:
    """--deep as asked; None: where this machine has a usable GPU (the report bundle's choice)."""
    if facts["deep"] is not None:
        return bool(facts["deep"])
    machine = facts["checked"].facts.machine
    return machine is not None and bool(machine.usable_gpus)


# --- rules, in the order a report lists their findings ---------------------------------------------------------


@DOCTOR.rule("find", reads=("checked",))
def _loader_checks(facts: Mapping[str, Any]) -> Sequence[Finding]:
    return facts["checked"].findings


@DOCTOR.rule("find", reads=("plugins",))
def _other_plugins(facts: Mapping[str, Any]) -> list[Finding]:

    return packages.plugin_findings(facts["plugins"])


@DOCTOR.rule("find", reads=("checked", "plugins"))
def _known_issues_here(facts: Mapping[str, Any]) -> list[Finding]:
    return _known_issues(facts["checked"].facts, facts["plugins"])


@DOCTOR.rule("find", reads=("checked",))
def _libraries_opened_by_name(facts: Mapping[str, Any]) -> list[Finding]:
    return _opened_libraries(facts["checked"].facts)


@DOCTOR.rule("find", reads=("checked", "memories"))
def _gpu_memory(facts: Mapping[str, Any]) -> list[Finding]:

    used = {node.index for _, node in used_gpus(facts["checked"].facts)}  # a hidden GPU gets no finding of its own
    return memory_findings([m for m in facts["memories"] if m.node_index in used])


@DOCTOR.rule("find", reads=("health",))
def _node_health(facts: Mapping[str, Any]) -> list[Finding]:
    health = facts["health"].read
    if isinstance(health, Finding):
        return [health]
    if health is None:
        return []
    from jax_rocm7_plugin._machine.health_findings import health_findings

    return health_findings(health)


@DOCTOR.rule("find", reads=("checked",))
def _first_compile_toolchain(facts: Mapping[str, Any]) -> list[Finding]:
    checked = facts["checked"]
    return _toolchain(checked.facts, list(checked.findings))


@DOCTOR.rule("find", reads=("checked",))
def _one_rocm_per_process(facts: Mapping[str, Any]) -> list[Finding]:

    return invariants.mixed_rocm(facts["checked"].facts)


@DOCTOR.rule("find", reads=("settings", "checked"))
def _variables(facts: Mapping[str, Any]) -> list[Finding]:

    return invariants.variable_findings(facts["settings"], _release_or_none(facts["checked"].facts))


@DOCTOR.rule("find", reads=("checked",))
def _running_kernel(facts: Mapping[str, Any]) -> list[Finding]:

    return invariants.kernel_findings(facts["checked"].facts)


@DOCTOR.rule("find", reads=("checked",))
def _rccl_transport(facts: Mapping[str, Any]) -> list[Finding]:
    return _transport(facts["checked"].facts)


@DOCTOR.rule("find", reads=("math",))
def _math_library_gpus(facts: Mapping[str, Any]) -> list[Finding]:
    return facts["math"][0]


# --- refining rules --------------------------------------------------------------------------------------------


@DOCTOR.rule("refine", reads=("checked",))
def _rocm_found_elsewhere(facts: Mapping[str, Any], found: list[Finding]) -> list[Finding]:
    return _rocm_elsewhere(facts["checked"].facts, found)


@DOCTOR.rule("refine", reads=("checked",))
def _package_step(facts: Mapping[str, Any], found: list[Finding]) -> list[Finding]:
    return _missing_package(facts["checked"].facts, found)


@DOCTOR.rule("refine", reads=("checked", "math"))
def _hide_unserved(facts: Mapping[str, Any], found: list[Finding]) -> list[Finding]:
    """What only a GPU no library serves causes is said once, by the finding that names that GPU."""
    state = facts["checked"].facts
    return invariants.hide_unserved(state, found, {*facts["math"][1], *_uncovered(state)})


@DOCTOR.rule("refine", reads=("checked",), after=("hide-unserved",))
def _unneeded_override(facts: Mapping[str, Any], found: list[Finding]) -> list[Finding]:

    return invariants.unneeded_override(facts["checked"].facts, found)


@DOCTOR.rule("refine", reads=("settings", "prove", "rerun"), after=("unneeded-override", "package-step"))
def _check_fixes(facts: Mapping[str, Any], found: list[Finding]) -> list[Finding]:
    """Each fix the doctor can make, checked by diagnosing again with it made (_doctor/proof.py)."""
    if not facts["prove"] or not any(f.remedy is not None for f in found):
        return found
    from jax_rocm7_plugin._doctor.proof import prove

    return prove(found, facts["settings"], facts["rerun"])


@DOCTOR.rule("refine", reads=("checked", "deep-wanted"), gives="hip", after=("check-fixes",))
def _hip_runtime(facts: Mapping[str, Any], found: list[Finding]) -> tuple[list[Finding], dict[str, object] | None]:
    """--deep: the HIP runtime started in a child, and a fresh load test; the same finding found twice said once."""
    if not facts["deep-wanted"]:
        return found, None
    hip, deeper = _deep(facts["checked"].facts)  # looked up at each run: a test may stand in for the children
    return _merge_same_ids([*found, *deeper]), hip


@DOCTOR.rule("refine", reads=("checked", "health", "deep-wanted"), after=("hip-runtime",))
def _health_since_probes(facts: Mapping[str, Any], found: list[Finding]) -> list[Finding]:
    """--deep: the counters read again after the probes ran: what rose meanwhile."""
    if not facts["deep-wanted"]:
        return found
    health = facts["health"]
    return [*found, *_health_since(facts["checked"].facts, health.read, health.at)]


@DOCTOR.rule("refine", reads=("settings", "deep-wanted"), gives="first-jit", after=("health-since-probes",))
def _first_jit(facts: Mapping[str, Any], found: list[Finding]) -> tuple[list[Finding], dict[str, object] | None]:
    """--deep, where the backend will come up: does its first jit work? One that ran withdraws the predictions it
    disproved."""
    if not facts["deep-wanted"] or any(f.blocks_rocm for f in found):
        return found, None
    from jax_rocm7_plugin._doctor.first_jit import jit_findings, run_first_jit

    first = run_first_jit(_child_environment(facts["settings"]))
    found = [*found, *jit_findings(first)]
    if first.ok:
        found = [withdrawn_by_first_jit(f) for f in found]
    return found, first.to_json()


@DOCTOR.rule("refine", after=("first-jit",))
def _consequences(facts: Mapping[str, Any], found: list[Finding]) -> list[Finding]:
    """Each finding that follows from another one present (_findings.FOLLOWS) says so: the text, the JSON and the
    page fold it under its cause alike."""
    return catalog.with_causes(found)


# --- what the rules call ---------------------------------------------------------------------------------------


def _rocm_elsewhere(facts: Facts, found: list[Finding]) -> list[Finding]:
    """rocm-not-found told with the ROCm that is on this machine where the loader does not look, and the step that
    makes it seen (_machine/rocm_elsewhere.py); the search runs only when the loader found none."""
    missing = next((f for f in found if f.id == "rocm-not-found"), None)
    if missing is None:
        return found
    from jax_rocm7_plugin._machine.rocm_elsewhere import refine, search

    settings = facts.settings
    known = [p for i in (facts.runtime.installs if facts.runtime is not None else []) for p in i.hip_runtimes]
    machine = facts.machine
    identity = (machine.identity if machine is not None else None) or read_identity(settings.sysroot)
    who = (identity.uid, identity.gids[0] if identity.gids else identity.uid)
    try:  # a stale network mount under /home must not hang the doctor
        elsewhere = with_deadline(lambda: search(settings.sysroot, known, who), 5.0)  # bounded; a hang is not
    except Deadline as late:
        said = f"the search beyond the loader's path stopped at {late.path} after {late.seconds:g} s"
        return [f._replace(evidence=(*f.evidence, said)) if f is missing else f for f in found]
    told = refine(missing, elsewhere, settings.ld_library_path)
    return [told if f is missing else f for f in found]


def _missing_package(facts: Facts, found: list[Finding]) -> list[Finding]:
    """library-dependency-missing where an installed ROCm 7 lacks some of its own libraries: the fix is the step that
    installs them the way that ROCm was installed (_machine/rocm_package_step.py), not "install ROCm 7"."""
    runtime = facts.runtime
    report = runtime.dependencies if runtime is not None else None
    if runtime is None or report is None or not report.missing:
        return found
    if any(f.id in ("rocm-not-found", "rocm-major-mismatch") for f in found):
        return found
    from jax_rocm7_plugin._machine.rocm_package_step import package_step

    missing = [n for n in report.missing_names if is_rocm_library(n)]
    if not missing:
        return found
    unseen = _unseen_install(facts, missing)
    if unseen is not None:
        return [unseen if f.id == "library-dependency-missing" else f for f in found]
    install = loaded_install(runtime.installs, report.found.get(HIP_SONAME))
    if install is None:
        return found
    gpus = [node.gfx_target for _, node in used_gpus(facts) if node.gfx_target]
    step = package_step(missing, install, facts.settings.sysroot, gpus)
    if step is None:
        return found
    fix = catalog.package_step_words(step.way, dict(step.values))
    return [f._replace(fix=fix) if f.id == "library-dependency-missing" else f for f in found]


def _unseen_install(facts: Facts, missing: list[str]) -> Finding | None:
    """library-dependency-missing where a ROCm 7 install on this machine holds every missing library, in folders the
    dynamic loader does not search: the step that makes it look there (checked), not "install ROCm 7"."""
    from jax_rocm7_plugin._machine.rocm_elsewhere import loader_step

    settings, runtime = facts.settings, facts.runtime
    assert runtime is not None
    root = settings.sysroot
    for install in runtime.installs:
        if install.major != ROCM_MAJOR or install.source in ("pip", "loader path"):
            continue
        holding = [d for d in install.library_dirs if any((d / name).exists() for name in missing)]
        if not holding or not all(any((d / n).exists() for d in holding) for n in missing):
            continue
        dirs = [unrooted(d, root) for d in install.library_dirs]
        system = root_owned(root, install.location)  # sudo's steps name only what root owns
        link = not (root / "opt" / "rocm").exists()
        fix, remedy = loader_step(install.location, dirs, settings.ld_library_path, link=link, system=system)
        summary = (
            f"ROCm {install.version_said()} at {install.location} has {', '.join(missing)}, but the dynamic loader "
            "does not look there (the PJRT library's RUNPATH names /opt/rocm/lib; nothing else adds that folder)"
        )
        evidence = tuple(
            f"{shown}/{n}"
            for n in missing
            for d, shown in zip(install.library_dirs, dirs, strict=True)
            if (d / n).exists()
        )
        return catalog.library_dependency_missing(summary, evidence, fix)._replace(remedy=remedy)
    return None


def _toolchain(facts: Facts, found: list[Finding]) -> list[Finding]:
    """device-bitcode-missing where this release's library needs ROCm's bitcode or ld.lld and no ROCm has them."""
    row = releases.get(version.JAX_RELEASE)
    if row is None or facts.runtime is None or any(f.id == "device-bitcode-missing" for f in found):
        return []  # a release the table lacks, no ROCm looked at, or pip ROCm's check has said it
    pip = facts.pip_rocm  # the loader points HIP_DEVICE_LIB_PATH and PATH at it
    pip_folders = [p for p in (pip.bitcode_dir, pip.lld_dir) if p is not None] if pip is not None else []
    return toolchain_findings(
        row.first_compile, facts.runtime.installs, facts.settings, version.JAX_RELEASE, pip_folders
    )


def _transport(facts: Facts) -> list[Finding]:
    """The transport RCCL would use between hosts against the fastest this machine has (_machine/transport.py): a
    gap is a warning in a job across hosts (a launcher says so), info on one host; NCCL_NET naming a network that is
    not here is an error wherever RCCL starts."""
    settings = facts.settings
    verdict = read_transport(settings, facts.runtime.installs if facts.runtime is not None else ())
    if verdict is None:
        return []  # no fabric and nothing asked of it (sockets are all this machine has), or sysfs that hung
    remedy = (
        Remedy(environment=(*((n, None) for n in verdict.unset), *verdict.setting))
        if verdict.unset or verdict.setting
        else None
    )
    words = (verdict.said(), verdict.fastest, verdict.reasons, verdict.steps)
    if verdict.chosen == "none":
        return [catalog.transport_not_found(*words, remedy)]
    across = settings.job_hosts is not None and settings.job_hosts > 1
    found = _guides(verdict.fastest_kind, settings) if across else []
    if not verdict.slower:
        return found
    severity = "warning" if across else "info"
    return [catalog.transport_slower_than_fabric(severity, *words, remedy), *found]


def _guides(fabric: str | None, settings: Settings) -> list[Finding]:
    """In a job across hosts on a fabric the sites' guides cover: what they require or mark harmful."""
    from jax_rocm7_plugin._policy.fabric_guides import problems

    found = []
    for problem in problems(fabric or "", settings.environ or {}) if fabric else []:
        remedy = Remedy(environment=((problem.variable, problem.setting),))
        shown = f"{problem.variable}={problem.value!r}" if problem.value is not None else f"{problem.variable} unset"
        finding = catalog.transport_setting_against_guide(
            problem.severity,  # type: ignore[arg-type]
            f"on {fabric}, {problem.what}",
            f"set {problem.fix}",
            (shown, *problem.sources),
            remedy,
        )
        found.append(finding)
    return found


def _release_or_none(facts: Facts) -> str | None:
    """The jax release of the PJRT library, where one was chosen (XLA_FLAGS' names are judged per release)."""
    if facts.library is None:
        return None

    return library_release(facts)


def _read_health(facts: Facts) -> tuple[NodeHealth | Finding | None, float]:
    """The health of every GPU of the node (hidden ones too: a degraded GPU is the node's, whoever uses it) and the
    host settings AMD documents for them (_machine/gpu_health.py), and when it was read; a hung read is a finding."""
    machine = facts.machine
    if machine is None or not machine.topology.gpus:
        return None, 0.0
    from jax_rocm7_plugin._machine.gpu_health import read_in_time

    try:
        return read_in_time(facts.settings.sysroot, machine.topology), time.monotonic()
    except Deadline as late:
        return catalog.machine_probe_timeout(late.path, late.seconds), 0.0


def _health_since(facts: Facts, before: NodeHealth | Finding | None, read_at: float) -> list[Finding]:
    """--deep: the counters read again after the runtime and the first jit ran: what rose meanwhile."""
    if before is None or isinstance(before, Finding):
        return []
    after, _ = _read_health(facts)
    if after is None or isinstance(after, Finding):
        return []
    from jax_rocm7_plugin._machine.health_findings import rising

    return rising(before, after, time.monotonic() - read_at)


def _child_environment(settings: Settings) -> dict[str, str]:
    """This process's environment, with the machine and library the doctor looked at (--sysroot, --library)."""
    environ = dict(os.environ)
    # The child imports jax, which must find this very plugin: where it runs from a checkout (or any folder
    # the interpreter does not search by itself), that folder goes on the child's PYTHONPATH.
    home = str(Path(__file__).resolve().parents[2])
    if home not in site.getsitepackages() and home not in (site.getusersitepackages(), sys.prefix):
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [home, _environment.read("PYTHONPATH", environ)]))
    if str(settings.sysroot) != "/":
        environ[SYSROOT] = str(settings.sysroot)
    if settings.pjrt_library is not None:
        environ[PJRT_LIBRARY] = str(settings.pjrt_library)
    return environ


def _known_issues(facts: Facts, plugins: PluginInventory) -> list[Finding]:
    """A known-issue finding for each public bug of the versions this machine runs (_policy/known_issues.json)."""
    others = tuple(sorted(name for name in plugins.distributions if name not in OUR_DISTRIBUTIONS))
    here = situation(facts, thorough=True, other_plugins=others)
    return [known_issues.finding(match, here) for match in known_issues.matches(here)]


def used_processors(facts: Facts) -> list[str]:
    """The processors of the GPUs HIP will use and can open, as the runtime names them to the libraries (after
    HSA_OVERRIDE_GFX_VERSION)."""
    override = facts.settings.hsa_override
    target = override_target(override) if override else None
    names = [target or node.gfx_target for _, node in used_gpus(facts)]
    return [n for n in dict.fromkeys(names) if n]


def _uncovered(facts: Facts) -> set[str]:
    """The processors (after HSA_OVERRIDE_GFX_VERSION) of visible GPUs the PJRT library has no code for."""
    return {
        c.effective_target
        for c in facts.coverage or ()
        if c.position is not None and c.covered_by is None and c.effective_target
    }


def _math_libraries(facts: Facts) -> tuple[list[Finding], set[str]]:
    """math-library-gpu-unsupported: the kernel files of rocBLAS, hipBLASLt and MIOpen, read beside the copies
    the dynamic loader takes (a dependency of the PJRT library, else where it would open them from); and the
    processors a library whose absence aborts or fails has no kernels for."""
    from jax_rocm7_plugin._policy.math_libraries import libraries

    gpus = used_processors(facts)
    if not gpus or facts.library is None or facts.runtime is None:
        return [], set()
    settings = facts.settings
    walk = facts.runtime.dependencies
    states = []
    for library in libraries():
        where = walk.found.get(library.soname) if walk is not None else None
        if where is None:
            where = resolve_opened(library.soname, facts.library.path, settings.sysroot, settings.ld_library_path)
        if where is not None:
            states.append(library_kernels(library, where, gpus, dict(settings.runtime_environment), settings.sysroot))
    unserved = {
        gfx
        for s in states
        if s.library.without != "slower" and (s.laid_out or not s.folder.is_dir())
        for gfx in s.missing
    }

    install = rocm_install(facts)
    return kernel_findings(states, install.version if install is not None else None), unserved


def _opened_libraries(facts: Facts) -> list[Finding]:
    """runtime-library-missing: the libraries the runtime opens by name (librocdxg under WSL), resolved as dlopen
    would from the copy of their opener the dependency walk found."""
    machine = facts.machine
    wsl = machine is not None and machine.wsl_dxg and not machine.topology.present
    if not wsl or facts.runtime is None:
        return []
    from jax_rocm7_plugin._machine.opened_libraries import USUAL_FOLDERS, opened_findings, resolve
    from jax_rocm7_plugin._policy.opened_libraries import libraries

    settings = facts.settings
    walk = facts.runtime.dependencies
    found = dict(walk.found) if walk is not None else {}
    install = rocm_install(facts)
    rocm = version_tuple(install.version) if install is not None else None
    hip = found.get(HIP_SONAME)
    folders = [
        *dict.fromkeys(p.parent for i in facts.runtime.installs for p in i.hip_runtimes),
        *(host_path(settings.sysroot, f) for f in USUAL_FOLDERS),
    ]
    states = []
    for library in libraries():
        opener = found.get(library.opener)
        if opener is None and hip is not None:  # the HIP runtime needs it: where its own search finds it
            opener = resolve_opened(library.opener, hip, settings.sysroot, settings.ld_library_path)
        states.append(resolve(library, opener, rocm, settings.sysroot, settings.ld_library_path, folders))
    return opened_findings(states, settings.sysroot)


def _memory(facts: Facts) -> list[GpuMemory]:

    return gpu_memory(facts.settings.sysroot, facts.machine.topology) if facts.machine is not None else []


def _deep(facts: Facts) -> tuple[dict[str, object], list[Finding]]:
    """Start the HIP runtime the library would load (else the newest installed) in a child process."""
    from jax_rocm7_plugin._binary import load_test
    from jax_rocm7_plugin._doctor.deep import deep_findings, pjrt_summary, run_probe

    runtime_state = facts.runtime
    dependencies = runtime_state.dependencies if runtime_state is not None else None
    runtime = dependencies.found.get(HIP_SONAME) if dependencies is not None else None
    if runtime is None:  # not the library's runtime: the newest one installed, to say what it is
        installs = runtime_state.installs if runtime_state is not None else []
        candidates = sorted((p for i in installs for p in i.hip_runtimes), key=lambda p: p.name, reverse=True)
        runtime = candidates[0] if candidates else None
    if runtime is None:
        return {"probed": False, "why": "no HIP runtime to load"}, []
    choice = facts.library
    found: list[Finding] = []
    pjrt = None
    if choice is not None and dependencies is not None and not dependencies.missing:
        # The loader's load test, afresh (a cached verdict may be older than what the machine does now).
        verdict = load_test.probe(choice.path, "pjrt", facts.settings, use_cache=False, preload=(runtime,))
        pjrt = pjrt_summary(verdict)
        refused = load_test.verdict_finding(choice.path, verdict)
        found.extend([refused] if refused is not None else [])
    probe = run_probe(runtime, pjrt)
    return {"probed": True, **probe.to_json()}, [*deep_findings(probe), *found]


# Effects a first jit that compiled and ran disproves on this machine: predictions of the doctor's plain checks.
_DISPROVED_KNOWN_EFFECTS = ("hang-at-start", "no-gpu")


def withdrawn_by_first_jit(finding: Finding) -> Finding:
    """A prediction the first jit disproved, reworded as what was seen (info): device-bitcode-missing (XLA found
    what it links with after all), and known issues that say the start hangs or no GPU is seen."""
    if finding.id == "device-bitcode-missing":
        seen = "--deep's first jit compiled and ran, so this library found what it links kernels with here"
        return finding._replace(severity="info", summary=f"{finding.summary}; but {seen}", fix="nothing to do")
    if finding.known_issue is not None and finding.severity != "info":
        from jax_rocm7_plugin._policy.known_issues import entries

        issue = next((e for e in entries() if e.id == finding.known_issue), None)
        if issue is not None and issue.effect_kind in _DISPROVED_KNOWN_EFFECTS:
            seen = "--deep's first jit started the backend and ran, so it did not happen in this run"
            return finding._replace(severity="info", summary=f"{finding.summary}; {seen}")
    return finding


def _merge_same_ids(found: list[Finding]) -> list[Finding]:
    """The same finding found twice (the plain pipeline, then the deep probe: same id, entry and summary) is said
    once, with the evidence of both; findings that share an id but say different things stay apart."""
    merged: dict[tuple[str, str | None, str], Finding] = {}
    for finding in found:
        key = (*finding.key, finding.summary)
        first = merged.get(key)
        if first is None:
            merged[key] = finding
        else:
            extra = tuple(line for line in finding.evidence if line not in first.evidence)
            merged[key] = first._replace(evidence=first.evidence + extra)
    return list(merged.values())
