"""Why does (or doesn't) this machine get RocmDevice? The loader's checks, all of them, and more.

The doctor consumes the check pipeline whole (thorough: every dependency, every extension
module) where the loader stops at the first blocking finding, then adds what only it looks at:
other jax plugins installed beside us, and with --deep, a child process that starts the HIP
runtime. Without --deep it neither imports jax nor loads a GPU library in this process.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._doctor.report import (
    ExtensionEntry,
    GpuEntry,
    LibraryEntry,
    Report,
    RocmInstallEntry,
)
from jax_rocm7_plugin._findings import Finding, doctor_internal_error, most_severe_first
from jax_rocm7_plugin._machine.packages import installed_version
from jax_rocm7_plugin._names import HIP_SONAME, PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._pipeline import Facts, checks, used_gpus
from jax_rocm7_plugin._settings import Settings
from jax_rocm7_plugin.version import __version__ as PLUGIN_VERSION

if TYPE_CHECKING:
    from jax_rocm7_plugin._machine.gpu_health import NodeHealth
    from jax_rocm7_plugin._machine.memory import GpuMemory
    from jax_rocm7_plugin._machine.packages import PluginInventory


def diagnose(settings: Settings, *, deep: bool | None = False) -> Report:
    return diagnose_with_facts(settings, deep=deep)[0]


def diagnose_with_facts(settings: Settings, *, deep: bool | None = False, prove: bool = True) -> tuple[Report, Facts]:
    """The report and the facts the pipeline learned (the cluster preflight publishes some of them).

    `deep`: also the --deep probes (the HIP runtime, a fresh load test, the first jit); None: where this
    machine has a usable GPU (the report bundle's choice). `Report.hip` is set when they ran. `prove`: check
    each fix the doctor can make by diagnosing again with it made (_doctor/proof.py).
    """
    if not prove:
        return _diagnose(settings, deep=deep, prove=prove)
    from jax_rocm7_plugin._binary.load_test import one_run

    with one_run():  # a fix's check loads nothing the first reading loaded under the same settings
        return _diagnose(settings, deep=deep, prove=prove)


def _diagnose(settings: Settings, *, deep: bool | None, prove: bool) -> tuple[Report, Facts]:
    from jax_rocm7_plugin._machine import packages

    facts = Facts(settings)
    found = list(checks(facts, thorough=True))
    if settings.sysroot_finding is not None:
        # Nothing under that root can be read: the variable is the finding.
        return Report(tuple(found), str(settings.sysroot), ((PLUGIN_DISTRIBUTION, PLUGIN_VERSION),)), facts
    plugins = packages.inventory()
    found.extend(packages.plugin_findings(plugins))
    found.extend(_known_issues(facts, plugins))
    found.extend(_opened_libraries(facts))
    memories = _memory(facts)
    from jax_rocm7_plugin._doctor import invariants
    from jax_rocm7_plugin._machine.memory import memory_findings

    used = {node.index for _, node in used_gpus(facts)}  # a hidden GPU gets no finding of its own
    found.extend(memory_findings([m for m in memories if m.node_index in used]))
    health, health_read_at = _read_health(facts)
    if isinstance(health, Finding):
        found.append(health)
    elif health is not None:
        from jax_rocm7_plugin._machine.health_findings import health_findings

        found.extend(health_findings(health))
    found = _rocm_elsewhere(facts, found)
    found = _missing_package(facts, found)
    found.extend(_toolchain(facts, found))
    found.extend(invariants.mixed_rocm(facts))
    found.extend(invariants.variable_findings(settings, _release_or_none(facts)))
    found.extend(invariants.kernel_findings(facts))
    found.extend(_transport(facts))
    math, unserved = _math_libraries(facts)
    found = invariants.hide_unserved(facts, [*found, *math], {*unserved, *_uncovered(facts)})
    found = invariants.unneeded_override(facts, found)
    if prove and any(f.remedy is not None for f in found):
        from jax_rocm7_plugin._doctor.proof import prove as check_remedies

        found = check_remedies(found, settings, lambda changed: diagnose_with_facts(changed, prove=False)[0].findings)
    hip = first_jit = None
    if deep is None:
        deep = facts.machine is not None and bool(facts.machine.usable_gpus)
    if deep:
        hip, deeper = _deep(facts)
        found = _merge_same_ids([*found, *deeper])
        found.extend(_health_since(facts, health, health_read_at))
        if not any(f.blocks_rocm for f in found):  # the backend will come up: does its first jit work?
            from jax_rocm7_plugin._doctor.first_jit import jit_findings, run_first_jit

            first = run_first_jit(_child_environment(settings))
            first_jit = first.to_json()
            found.extend(jit_findings(first))
            if first.ok:
                found = [withdrawn_by_first_jit(f) for f in found]
    report = Report(
        findings=tuple(most_severe_first(found)),
        sysroot=str(settings.sysroot),
        packages=(
            (PLUGIN_DISTRIBUTION, PLUGIN_VERSION),
            (PJRT_DISTRIBUTION, installed_version(PJRT_DISTRIBUTION)),
            ("jax", installed_version("jax")),
            ("jaxlib", facts.jaxlib),
        ),
        gpus=_gpus(facts, {m.node_index: m for m in memories}),
        library=_library(facts),
        installs=tuple(_installs(facts)),
        hip=hip,
        extensions=_extensions(facts),
        first_jit=first_jit,
        health=None if isinstance(health, Finding) else health,
    )
    return report, facts


def _rocm_elsewhere(facts: Facts, found: list[Finding]) -> list[Finding]:
    """rocm-not-found told with the ROCm that is on this machine where the loader does not look, and the step that
    makes it seen (_machine/rocm_elsewhere.py); the search runs only when the loader found none."""
    missing = next((f for f in found if f.id == "rocm-not-found"), None)
    if missing is None:
        return found
    from jax_rocm7_plugin._machine.rocm_elsewhere import refine, search
    from jax_rocm7_plugin._safe_io import Deadline, with_deadline

    settings = facts.settings
    known = [p for i in (facts.runtime.installs if facts.runtime is not None else []) for p in i.hip_runtimes]
    try:  # a stale network mount under /home must not hang the doctor
        elsewhere = with_deadline(lambda: search(settings.sysroot, known), 5.0)  # bounded itself; a hang is not
    except Deadline as late:
        said = f"the search beyond the loader's path stopped at {late.path} after {late.seconds:g} s"
        return [f._replace(evidence=(*f.evidence, said)) if f is missing else f for f in found]
    told = refine(missing, elsewhere, settings.ld_library_path)
    return [told if f is missing else f for f in found]


def _transport(facts: Facts) -> list[Finding]:
    """The transport RCCL would use between hosts against the fastest this machine has (_machine/transport.py): a
    gap is a warning in a job across hosts (a launcher says so), info on one host; NCCL_NET naming a network that is
    not here is an error wherever RCCL starts."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._findings import Remedy
    from jax_rocm7_plugin._machine.transport import read_transport

    settings = facts.settings
    verdict = read_transport(settings, facts.runtime.installs if facts.runtime is not None else ())
    if verdict is None:
        return []  # no fabric and nothing asked of it (sockets are all this machine has), or sysfs that hung
    evidence = (
        f"RCCL would use: {verdict.said()}",
        f"the fastest this machine has: {verdict.fastest or 'none'}",
        *verdict.reasons,
    )
    remedy = (
        Remedy(environment=(*((n, None) for n in verdict.unset), *verdict.setting))
        if verdict.unset or verdict.setting
        else None
    )
    fix = "; ".join(verdict.steps) or "nothing this doctor can name: read RCCL's NCCL_DEBUG=INFO lines (INIT,NET)"
    if verdict.chosen == "none":
        summary = f"{verdict.reasons[0]}: RCCL fails to create its communicator"
        return [catalog.transport_not_found(summary, fix, evidence, remedy)]
    across = settings.job_hosts is not None and settings.job_hosts > 1
    found = _guides(verdict.fastest_kind, settings) if across else []
    if not verdict.slower:
        return found
    summary = (
        f"RCCL would carry traffic between hosts over {verdict.said()}, though this machine has "
        f"{verdict.fastest}: {verdict.reasons[0] if verdict.reasons else 'no usable RDMA port'}"
    )
    severity = "warning" if across else "info"
    return [catalog.transport_slower_than_fabric(severity, summary, fix, evidence, remedy), *found]


def _guides(fabric: str | None, settings: Settings) -> list[Finding]:
    """In a job across hosts on a fabric the sites' guides cover: what they require or mark harmful."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._findings import Remedy
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
    from jax_rocm7_plugin._pipeline import library_release

    return library_release(facts)


def _missing_package(facts: Facts, found: list[Finding]) -> list[Finding]:
    """library-dependency-missing where an installed ROCm 7 lacks some of its own libraries: the fix is the step that
    installs them the way that ROCm was installed (_machine/rocm_package_step.py), not "install ROCm 7"."""
    runtime = facts.runtime
    report = runtime.dependencies if runtime is not None else None
    if runtime is None or report is None or not report.missing:
        return found
    if any(f.id in ("rocm-not-found", "rocm-major-mismatch") for f in found):
        return found
    from jax_rocm7_plugin._machine.rocm_install import loaded_install
    from jax_rocm7_plugin._machine.rocm_package_step import package_step
    from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library

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
    return [f._replace(fix=step) if f.id == "library-dependency-missing" else f for f in found]


def _unseen_install(facts: Facts, missing: list[str]) -> Finding | None:
    """library-dependency-missing where a ROCm 7 install on this machine holds every missing library, in folders the
    dynamic loader does not search: the step that makes it look there (checked), not "install ROCm 7"."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._machine import unrooted
    from jax_rocm7_plugin._machine.rocm_elsewhere import loader_step
    from jax_rocm7_plugin._names import ROCM_MAJOR

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
        fix, remedy = loader_step(
            install.location, dirs, settings.ld_library_path, link=not (root / "opt" / "rocm").exists()
        )
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


def _read_health(facts: Facts) -> tuple[NodeHealth | Finding | None, float]:
    """The health of every GPU of the node (hidden ones too: a degraded GPU is the node's, whoever uses it) and the
    host settings AMD documents for them (_machine/gpu_health.py), and when it was read; a hung read is a finding."""
    import time

    machine = facts.machine
    if machine is None or not machine.topology.gpus:
        return None, 0.0
    from jax_rocm7_plugin._machine.gpu_health import read_in_time
    from jax_rocm7_plugin._safe_io import Deadline

    try:
        return read_in_time(facts.settings.sysroot, machine.topology), time.monotonic()
    except Deadline as late:
        from jax_rocm7_plugin._findings import machine_probe_timeout

        return machine_probe_timeout(late.path, late.seconds), 0.0


def _health_since(facts: Facts, before: NodeHealth | Finding | None, read_at: float) -> list[Finding]:
    """--deep: the counters read again after the runtime and the first jit ran: what rose meanwhile."""
    import time

    if before is None or isinstance(before, Finding):
        return []
    after, _ = _read_health(facts)
    if after is None or isinstance(after, Finding):
        return []
    from jax_rocm7_plugin._machine.health_findings import rising

    return rising(before, after, time.monotonic() - read_at)


def _child_environment(settings: Settings) -> dict[str, str]:
    """This process's environment, with the machine and library the doctor looked at (--sysroot, --library)."""
    import os
    import site
    import sys

    from jax_rocm7_plugin._settings import PJRT_LIBRARY, SYSROOT

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


def internal_error(error: Exception, settings: Settings) -> Report:
    """The report when a probe fails in a way none of the findings foresee."""
    return Report((doctor_internal_error(error),), str(settings.sysroot), ((PLUGIN_DISTRIBUTION, PLUGIN_VERSION),))


def _library(facts: Facts) -> LibraryEntry | None:
    choice = facts.library
    if choice is None:
        return None
    assert choice.dynamic is not None  # locate_library read it when it chose the library
    dependencies = facts.runtime.dependencies if facts.runtime is not None else None
    return LibraryEntry(
        path=str(choice.path),
        source=choice.source,
        version=choice.pjrt_version,
        needed=tuple(choice.dynamic.needed),
        runpath=tuple(choice.dynamic.runpath),
        exports=tuple(choice.dynamic.exports),
        amdgpu_targets=tuple(facts.library_targets) if facts.library_targets is not None else None,
        missing_dependencies=tuple(dependencies.missing_names) if dependencies is not None else None,
    )


def _installs(facts: Facts) -> list[RocmInstallEntry]:
    installs = facts.runtime.installs if facts.runtime is not None else []
    return [
        RocmInstallEntry(i.location, i.source, i.version, i.major, tuple(str(p) for p in i.hip_runtimes))
        for i in installs
    ]


def _extensions(facts: Facts) -> tuple[ExtensionEntry, ...]:
    """The ROCm extension modules the plugin carries: what each gives, where it came from, if it loads."""
    from jax_rocm7_plugin._machine.native_modules import build_info
    from jax_rocm7_plugin._names import EXTENSION_CAPABILITIES

    if facts.runtime is None:
        return ()
    recorded = (build_info() or {}).get("modules", {})
    return tuple(
        ExtensionEntry(
            module=m.module,
            capability=EXTENSION_CAPABILITIES.get(m.module, m.module),
            available=not m.missing,
            missing=tuple(m.missing),
            source=recorded.get(m.module),
        )
        for m in facts.runtime.extensions
    )


def _toolchain(facts: Facts, found: list[Finding]) -> list[Finding]:
    """device-bitcode-missing where this release's library needs ROCm's bitcode or ld.lld and no ROCm has them."""
    from jax_rocm7_plugin._machine.toolchain import toolchain_findings
    from jax_rocm7_plugin._policy import releases
    from jax_rocm7_plugin.version import JAX_RELEASE

    row = releases.get(JAX_RELEASE)
    if row is None or facts.runtime is None or any(f.id == "device-bitcode-missing" for f in found):
        return []  # a release the table lacks, no ROCm looked at, or pip ROCm's check has said it
    pip = facts.pip_rocm  # the loader points HIP_DEVICE_LIB_PATH and PATH at it
    pip_folders = [p for p in (pip.bitcode_dir, pip.lld_dir) if p is not None] if pip is not None else []
    return toolchain_findings(row.first_compile, facts.runtime.installs, facts.settings, JAX_RELEASE, pip_folders)


def _known_issues(facts: Facts, plugins: PluginInventory) -> list[Finding]:
    """A known-issue finding for each public bug of the versions this machine runs (_policy/known_issues.json)."""
    from jax_rocm7_plugin._machine.packages import OUR_DISTRIBUTIONS
    from jax_rocm7_plugin._pipeline import situation
    from jax_rocm7_plugin._policy import known_issues

    others = tuple(sorted(name for name in plugins.distributions if name not in OUR_DISTRIBUTIONS))
    here = situation(facts, thorough=True, other_plugins=others)
    return [known_issues.finding(match, here) for match in known_issues.matches(here)]


def used_processors(facts: Facts) -> list[str]:
    """The processors of the GPUs HIP will use and can open, as the runtime names them to the libraries (after
    HSA_OVERRIDE_GFX_VERSION)."""
    from jax_rocm7_plugin._policy.gfx_targets import override_target

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
    from jax_rocm7_plugin._machine.gpu_kernels import kernel_findings, library_kernels
    from jax_rocm7_plugin._machine.ld_resolve import resolve_opened
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
    from jax_rocm7_plugin._pipeline import rocm_install

    install = rocm_install(facts)
    return kernel_findings(states, install.version if install is not None else None), unserved


def _opened_libraries(facts: Facts) -> list[Finding]:
    """runtime-library-missing: the libraries the runtime opens by name (librocdxg under WSL), resolved as dlopen
    would from the copy of their opener the dependency walk found."""
    machine = facts.machine
    wsl = machine is not None and machine.wsl_dxg and not machine.topology.present
    if not wsl or facts.runtime is None:
        return []
    from jax_rocm7_plugin._machine import host_path
    from jax_rocm7_plugin._machine.ld_resolve import resolve_opened
    from jax_rocm7_plugin._machine.opened_libraries import USUAL_FOLDERS, opened_findings, resolve
    from jax_rocm7_plugin._pipeline import rocm_install
    from jax_rocm7_plugin._policy.known_issues import version_tuple
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
    from jax_rocm7_plugin._machine.memory import gpu_memory

    return gpu_memory(facts.settings.sysroot, facts.machine.topology) if facts.machine is not None else []


def _gpus(facts: Facts, memories: dict[int, GpuMemory]) -> tuple[GpuEntry, ...]:
    """Every GPU of the topology, with what the pipeline worked out for it: HIP's view, the library's code."""
    from jax_rocm7_plugin._policy.gfx_targets import product_name

    state, view = facts.machine, facts.view
    if state is None:
        return ()
    usable = {g.node_index for g in state.usable_gpus}
    visible = {node.index for _, node in view.gpus} if view is not None else set()
    covered = {c.node_index: c.covered_by for c in facts.coverage or ()}
    return tuple(
        GpuEntry(
            kfd_node=g.node_index,
            gfx_target=g.gfx_target,
            product=product_name(g.gfx_target),
            render_node=str(g.render_node.path) if g.render_node else None,
            usable=g.node_index in usable,
            visible=g.node_index in visible,
            library_code=covered.get(g.node_index) if facts.coverage is not None else None,
            memory_bytes=memories[g.node_index].vram_bytes if g.node_index in memories else None,
            apu=g.node_index in memories and memories[g.node_index].apu,
        )
        for g in state.gpus
    )


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
