"""Why does (or doesn't) this machine get RocmDevice? The loader's checks, all of them, and more.

The doctor runs its rule set (_doctor/rules.py) on the engine (_engine.py): the loader's checks whole (thorough:
every dependency, every extension module) where the loader stops at the first blocking finding, then what only it
looks at, and with --deep, child processes that start the HIP runtime and run a first jit. Without --deep it
neither imports jax nor loads a GPU library in this process. This module only asks the engine and builds the
report from what the readers read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jax_rocm7_plugin import _engine
from jax_rocm7_plugin._doctor import (
    rule_effective,
    rule_needs,
    rule_providers,
    rule_references,
    rule_temp_dir,
    rules,
    sources,
)
from jax_rocm7_plugin._doctor.report import (
    ExtensionEntry,
    GpuEntry,
    LibraryEntry,
    Report,
    RocmInstallEntry,
)
from jax_rocm7_plugin._findings import Finding, doctor_internal_error, most_severe_first
from jax_rocm7_plugin._machine.packages import installed_version
from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._pipeline import Facts
from jax_rocm7_plugin._settings import Settings
from jax_rocm7_plugin.version import __version__ as PLUGIN_VERSION

if TYPE_CHECKING:
    from jax_rocm7_plugin._machine.memory import GpuMemory


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


def _rerun(changed: Settings) -> tuple[Finding, ...]:
    """The plain diagnosis of changed settings: how a fix is checked."""
    return diagnose_with_facts(changed, prove=False)[0].findings


def _diagnose(settings: Settings, *, deep: bool | None, prove: bool) -> tuple[Report, Facts]:
    # The rule sets the doctor asks for: the loader's checks and the doctor's own, then one set per invariant over
    # the machine's other sources (their readers in sources.py).
    doctor = rules.DOCTOR + rule_temp_dir.RULES + sources.READERS
    doctor = doctor + rule_needs.RULES + rule_references.RULES + rule_providers.RULES + rule_effective.RULES
    given = {"settings": settings, "deep": deep, "prove": prove, "rerun": _rerun}
    if settings.sysroot_finding is not None:
        # Nothing under that root can be read: the variable is the finding.
        loader_only = [r for r in doctor.rules if r.name in ("loader-checks-read", "loader-checks")]
        found, facts = _engine.run(loader_only, given)
        packages = ((PLUGIN_DISTRIBUTION, PLUGIN_VERSION),)
        return Report(tuple(found), str(settings.sysroot), packages), facts["checked"].facts
    found, read = _engine.run(doctor.rules, given)
    facts: Facts = read["checked"].facts
    health = read["health"].read
    memories: list[GpuMemory] = read["memories"]
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
        hip=read.get("hip"),
        extensions=_extensions(facts),
        first_jit=read.get("first-jit"),
        health=None if isinstance(health, Finding) else health,
    )
    return report, facts


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
