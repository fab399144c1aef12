"""The checks that decide whether jax gets the ROCm backend: the loader's rule set (PIPELINE), on the engine.

The rules are declared in the order of cost -- the environment, the driver and device nodes (a directory listing and
a few stats), the library's presence, versions, then what needs the library (its GPU targets, the ROCm runtime it
needs, a child-process load) -- and each reader imports its modules only when it runs. `checks` runs the set lazily
(_engine.iterate): the loader consumes findings until the first blocking one, and no reader after it runs; the
doctor consumes them all (`thorough` also resolves every dependency and every extension module, which the loader
leaves for when a load fails). Both read what the readers gave from the same `Facts`. So the loader's warning is,
by construction, the doctor's first error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin._engine import RuleSet, Stop, iterate
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._settings import Settings, platforms_findings

if TYPE_CHECKING:
    from pathlib import Path

    from jax_rocm7_plugin._binary.load_test import Verdict
    from jax_rocm7_plugin._machine.devices import MachineState
    from jax_rocm7_plugin._machine.pjrt_library import LibraryChoice
    from jax_rocm7_plugin._machine.rocm_install import RocmInstall
    from jax_rocm7_plugin._machine.rocm_pip import PipRocm
    from jax_rocm7_plugin._machine.runtime import RuntimeState
    from jax_rocm7_plugin._machine.topology import KfdNode
    from jax_rocm7_plugin._machine.visibility import HipView
    from jax_rocm7_plugin._policy.coverage import GpuCoverage
    from jax_rocm7_plugin._policy.known_issues import Situation


# The steps, in order. Each field of Facts belongs to one step (FACT_STEPS): it is None until that step's reader
# has run, and after it holds what the step learned (None: it found nothing). A caller that stops consuming
# findings early reads the fields of the steps that began (`Facts.step`).
STEPS = ("settings", "machine", "visibility", "library", "versions", "gpus", "runtime", "pip-rocm", "c-api")
FACT_STEPS = {
    "settings": "settings",
    "machine": "machine",
    "view": "visibility",
    "library": "library",
    "jaxlib": "versions",
    "library_targets": "gpus",
    "coverage": "gpus",
    "runtime": "runtime",
    "verdict": "runtime",
    "pip_rocm": "pip-rocm",
    "c_api": "c-api",
}


class Mode(NamedTuple):
    """How far and how deep `checks` goes: `thorough` (the doctor), `through_machine` (stop after the machine
    probe), `load` (False leaves out the child-process load and what needs it, for a plan made without it)."""

    thorough: bool
    through_machine: bool = False
    load: bool = True


class Facts:
    """What the checks learned, for the loader's registration and the doctor's report: the engine's facts, as typed
    fields (the readers' facts by name: `facts["machine"]` is `facts.machine`; others, such as a reader's
    finding, are kept aside).

    The contract (tests/integration/test_pipeline.py walks it finding by finding): `step` names the last step
    that began; a field of a later step (FACT_STEPS) is None. Once its step began a field is final, and None
    only where the step found nothing (no library, no GPU code objects, ...).
    (A plain class: a dataclass costs ~0.7 ms to create, inside every `import jax`.)
    """

    __slots__ = (
        "aside",
        "c_api",
        "coverage",
        "jaxlib",
        "library",
        "library_targets",
        "machine",
        "pip_rocm",
        "runtime",
        "settings",
        "step",
        "verdict",
        "view",
    )

    def __init__(self, settings: Settings) -> None:
        self.step = "settings"
        self.settings = settings
        self.machine: MachineState | None = None  # empty (unknown_state) when the probe ran past its deadline
        self.view: HipView | None = None  # the GPUs HIP will use after the device-selection variables
        self.library: LibraryChoice | None = None
        self.jaxlib: str | None = None
        self.library_targets: list[str] | None = None  # None: the library carries no GPU code objects
        self.coverage: tuple[GpuCoverage, ...] | None = None  # every GPU of the topology; None with no targets
        self.runtime: RuntimeState | None = None  # dependencies resolved (thorough, or after a failed load)
        self.verdict: Verdict | None = None  # the child-process load
        self.pip_rocm: PipRocm | None = None
        self.c_api: tuple[int, int] | None = None  # (major, minor) the library speaks, from the load
        self.aside: dict[str, Any] = {}  # the engine's other facts: the mode, a reader's own finding

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name) if name in FACT_STEPS else self.aside[name]

    def __setitem__(self, name: str, value: Any) -> None:
        if name in FACT_STEPS:
            self.step = FACT_STEPS[name]
            setattr(self, name, value)
        else:
            self.aside[name] = value


def used_gpus(facts: Facts) -> list[tuple[int, KfdNode]]:
    """The GPUs HIP will use and can open, each with the index HIP_VISIBLE_DEVICES knows it by (none before the
    visibility step)."""
    machine, view = facts.machine, facts.view
    if machine is None or view is None:
        return []
    usable = {gpu.node_index for gpu in machine.usable_gpus}
    return [(index, node) for index, node in view.gpus if node.index in usable]


def first_blocking_finding(
    facts: Facts, *, through_machine: bool = False, load: bool = True
) -> tuple[Finding | None, list[Finding]]:
    """The loader's reading: the first blocking finding (None if there is none) and the warnings before it."""
    warnings: list[Finding] = []
    for finding in checks(facts, thorough=False, through_machine=through_machine, load=load):
        if finding.blocks_rocm:
            return finding, warnings
        warnings.append(finding)
    return None, warnings


def checks(facts: Facts, *, thorough: bool, through_machine: bool = False, load: bool = True) -> Iterator[Finding]:
    """Every finding of PIPELINE, in the order its rules are declared, each as soon as it is made."""
    facts["mode"] = Mode(thorough, through_machine, load)
    facts["kept"] = {}  # the load verdict the library's reader read (one read), handed to the runtime's
    return _with_pip_family(iterate(PIPELINE.rules, GIVEN, facts), facts)


def _with_pip_family(findings: Iterator[Finding], facts: Facts) -> Iterator[Finding]:
    """A fix that offers ROCm from pip names AMD's index for the family of the GPUs in use, where they share one
    (_policy/rocm_families.json); otherwise the placeholder stays, for the README's table of families."""
    from jax_rocm7_plugin._findings import PIP_FAMILY

    for finding in findings:
        if PIP_FAMILY not in finding.fix:
            yield finding  # the common case, inside `import jax`: no GPU list made for it
            continue
        gpus = [gfx for _, node in used_gpus(facts) if (gfx := node.gfx_target)]
        if gpus:  # none before the machine step: the placeholder stays
            from jax_rocm7_plugin._policy.rocm_families import pip_family

            family = pip_family(gpus)
            if family is not None:
                finding = finding._replace(fix=finding.fix.replace(PIP_FAMILY, family))
        yield finding


# --- the loader's rule set --------------------------------------------------------------------------------------
# Readers touch the machine (each step's modules imported as it runs); rules decide. Declared in the order of cost:
# the order the findings come in, and (through what each reads) the order the readers run in.

PIPELINE = RuleSet("loader")
GIVEN = ("settings", "mode", "kept")


@PIPELINE.rule("find", reads=("settings",))
def _plugin_variables(facts: Mapping[str, Any]) -> list[Finding] | Stop:
    """The plugin's own variables, before anything reads through them; a sysroot that is none ends the run."""
    settings: Settings = facts["settings"]
    if settings.sysroot_finding is not None:
        return Stop(tuple(settings.path_findings))  # nothing under that root can be read
    return [*settings.path_findings, *platforms_findings(settings)]


@PIPELINE.rule("read", reads=("settings",), gives=("machine", "machine_timeout"))
def _machine_probe(facts: Mapping[str, Any]) -> tuple[MachineState, Finding | None]:
    """The driver and device nodes, under a deadline (a hung driver must not hang `import jax`)."""
    from jax_rocm7_plugin._machine.devices import probe_within_deadline, unknown_state

    settings: Settings = facts["settings"]
    probed = probe_within_deadline(settings.sysroot, settings.groups_added)
    if isinstance(probed, Finding):
        return unknown_state(settings.sysroot), probed
    return probed, None


@PIPELINE.rule("find", reads=("machine", "machine_timeout", "mode"))
def _machine(facts: Mapping[str, Any]) -> list[Finding] | Stop:
    from jax_rocm7_plugin._machine.devices import machine_findings

    late: Finding | None = facts["machine_timeout"]
    found = [late] if late is not None else list(machine_findings(facts["machine"]))
    return Stop(tuple(found)) if facts["mode"].through_machine else found


@PIPELINE.rule("read", reads=("settings", "machine"), gives="view")
def _view(facts: Mapping[str, Any]) -> HipView:
    """Which GPUs the device-selection variables leave to HIP."""
    from jax_rocm7_plugin._machine.visibility import hip_view

    return hip_view(facts["settings"].devices, facts["machine"].topology.gpus)


@PIPELINE.rule("find", reads=("settings", "machine", "view"))
def _visible_devices(facts: Mapping[str, Any]) -> Iterator[Finding]:
    from jax_rocm7_plugin._machine.visibility import visible_device_findings

    return visible_device_findings(facts["settings"].devices, facts["machine"].topology.gpus, facts["view"])


@PIPELINE.rule("read", reads=("settings", "mode", "kept"), gives=("library", "library_refusal"))
def _library_choice(facts: Mapping[str, Any]) -> tuple[LibraryChoice | None, Finding | None]:
    """The PJRT library: where it is, and that it is a PJRT plugin (ELF headers, no load). The loader skips reading
    its dynamic section when the load verdict kept for this very file is a clean load."""
    from jax_rocm7_plugin._machine.pjrt_library import locate_library

    settings: Settings = facts["settings"]
    mode: Mode = facts["mode"]
    known_good = None if mode.thorough or not mode.load else _known_good(settings, facts["kept"])
    choice = locate_library(
        settings.pjrt_library, settings.runfiles_dir, settings.runfiles_manifest, known_good, settings.library_named_by
    )
    return (None, choice) if isinstance(choice, Finding) else (choice, None)


@PIPELINE.rule("find", reads=("library_refusal",))
def _library(facts: Mapping[str, Any]) -> list[Finding]:
    refusal: Finding | None = facts["library_refusal"]
    return [refusal] if refusal is not None else []


@PIPELINE.rule("read", reads=(), gives="jaxlib")
def _jaxlib(facts: Mapping[str, Any]) -> str | None:
    from jax_rocm7_plugin._machine.jaxlib_version import jaxlib_version

    return jaxlib_version()


@PIPELINE.rule("find", reads=("library", "jaxlib", "mode"))
def _versions(facts: Mapping[str, Any]) -> list[Finding]:
    """This plugin, jaxlib, the library's wheel. The loader looks for a source tree shadowing the install only
    where the versions it would refuse for may not be the install's."""
    from jax_rocm7_plugin._policy import versions
    from jax_rocm7_plugin.version import __version__ as plugin_version

    library: LibraryChoice | None = facts["library"]
    pjrt_version = library.pjrt_version if library is not None else None
    skew = versions.version_findings(plugin_version, facts["jaxlib"], pjrt_version)
    shadow = list(_source_tree_findings()) if facts["mode"].thorough or skew else []
    return [*shadow, *skew]


@PIPELINE.rule("find", reads=("settings",))
def _xla_client(facts: Mapping[str, Any]) -> Sequence[Finding]:
    """XLA client variables (validated when the settings were read)."""
    return facts["settings"].xla_client_findings


@PIPELINE.rule("read", reads=("library",), gives="library_targets")
def _library_targets(facts: Mapping[str, Any]) -> list[str] | None:
    from jax_rocm7_plugin._machine.pjrt_library import library_targets

    library: LibraryChoice | None = facts["library"]
    return library_targets(library) if library is not None else None


@PIPELINE.rule("read", reads=("settings", "machine", "view", "library_targets"), gives="coverage")
def _coverage(facts: Mapping[str, Any]) -> tuple[GpuCoverage, ...] | None:
    """Every GPU of the topology (the doctor shows hidden ones too) against the library's code objects."""
    targets: list[str] | None = facts["library_targets"]
    if targets is None:
        return None
    from jax_rocm7_plugin._policy.coverage import gpu_coverage

    machine, view = facts["machine"], facts["view"]
    gpus = [(view.hip_index(node.index), node.index, node.gfx_target) for node in machine.topology.gpus]
    return tuple(gpu_coverage(gpus, targets, facts["settings"].hsa_override))


@PIPELINE.rule("find", reads=("settings", "machine", "view", "library_targets", "coverage"))
def _gpus(facts: Mapping[str, Any]) -> Iterator[Finding]:
    """The GPUs HIP will use against the library's code objects, and shared memory for them."""
    from jax_rocm7_plugin._machine.shm import shm_findings
    from jax_rocm7_plugin._policy.coverage import coverage_findings, override_findings

    settings, machine, view = facts["settings"], facts["machine"], facts["view"]
    usable = {gpu.node_index for gpu in machine.usable_gpus}
    yield from override_findings(
        settings.hsa_override, [node.gfx_target for _, node in view.gpus if node.index in usable]
    )
    if facts["coverage"] is not None:
        yield from coverage_findings(facts["coverage"], facts["library_targets"], settings.hsa_override)
    yield from shm_findings(settings.sysroot, sum(1 for _, node in view.gpus if node.index in usable))


@PIPELINE.rule(
    "read",
    reads=("settings", "library", "jaxlib", "mode", "kept"),
    gives=("runtime", "verdict", "runtime_findings"),
)
def _runtime(facts: Mapping[str, Any]) -> tuple[RuntimeState | None, Verdict | None, tuple[Finding, ...]]:
    """The ROCm runtime the library needs, and a load in a child process."""
    mode: Mode = facts["mode"]
    return _runtime_and_load(facts["settings"], facts["library"], thorough=mode.thorough, load=mode.load,
                             kept=facts["kept"])  # fmt: skip


@PIPELINE.rule("find", reads=("runtime_findings",))
def _runtime_findings(facts: Mapping[str, Any]) -> tuple[Finding, ...]:
    return facts["runtime_findings"]


@PIPELINE.rule("read", reads=("settings",), gives="pip_rocm")
def _pip_rocm(facts: Mapping[str, Any]) -> PipRocm | None:
    """ROCm from pip: its device bitcode and ld.lld, which XLA needs at run time."""
    from jax_rocm7_plugin._machine.rocm_pip import pip_rocm_used

    settings: Settings = facts["settings"]
    return pip_rocm_used(settings.rocm_path, settings.ld_library_path)


@PIPELINE.rule("find", reads=("pip_rocm",))
def _pip_rocm_toolchain(facts: Mapping[str, Any]) -> list[Finding]:
    if facts["pip_rocm"] is None:
        return []
    from jax_rocm7_plugin._machine.rocm_pip import bitcode_findings

    return list(bitcode_findings(facts["pip_rocm"]))


@PIPELINE.rule("read", reads=("verdict", "library"), gives="c_api")
def _c_api_spoken(facts: Mapping[str, Any]) -> tuple[int, int] | None:
    """The PJRT C API the library speaks, from the load."""
    verdict: Verdict | None = facts["verdict"]
    if verdict is None or facts["library"] is None or not verdict.loaded or verdict.major is None:
        return None
    return (verdict.major, verdict.minor or 0)


@PIPELINE.rule("find", reads=("c_api", "jaxlib", "library"))
def _c_api(facts: Mapping[str, Any]) -> list[Finding]:
    """The PJRT C API the library speaks, against jaxlib's."""
    spoken: tuple[int, int] | None = facts["c_api"]
    jaxlib: str | None = facts["jaxlib"]
    if spoken is None:
        return []
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._names import PJRT_DISTRIBUTION
    from jax_rocm7_plugin._policy import versions

    try:
        expected = versions.expected_pjrt_c_api_major(jaxlib) if jaxlib else None
    except ValueError:  # a jaxlib version that is no version: the version step has said so
        expected = None
    if expected is None or spoken[0] == expected:
        return []
    return [
        catalog.pjrt_c_api_mismatch(
            f"the PJRT library speaks PJRT C API {spoken[0]}.{spoken[1]}, but jaxlib {jaxlib} speaks {expected}.x",
            f'install the library built for this jaxlib: pip install "{PJRT_DISTRIBUTION}'
            f'{versions.pin_for(jaxlib or "")}"',
            (f"library: {facts['library'].path}", f"jaxlib=={jaxlib}"),
        )
    ]


def _source_tree_findings() -> Iterator[Finding]:
    """This package imported from a source tree (its version.py unstamped) while a built wheel of it is installed
    elsewhere: jax run from that folder loads the tree. Only a source tree looks (a wheel's package is stamped)."""
    from jax_rocm7_plugin import version

    if version.SOURCE_DIGEST is not None:
        return
    from pathlib import Path

    from jax_rocm7_plugin._machine.packages import shadowed_install

    here = Path(version.__file__).parent
    shadow = shadowed_install(here)
    if shadow is None:
        return
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._policy.versions import same_release

    there, installed = shadow
    try:
        differs = not same_release(installed, version.__version__)
    except ValueError:
        differs = True
    yield catalog.source_tree_shadows_install(str(here), str(there), installed, version.__version__, differs=differs)


def _known_good(settings: Settings, kept: dict[Path, Verdict]) -> Callable[[Path], bool]:
    """Whether the load verdict kept for this file (same identity, same settings) is a clean PJRT load:
    then the child has called its GetPjrtApi, and reading its ELF headers again proves nothing new."""
    from jax_rocm7_plugin._binary import load_test

    def known_good(path: Path) -> bool:
        verdict = load_test.cached_verdict(path, "pjrt", settings)
        if verdict is None or not verdict.loaded or load_test.verdict_finding(path, verdict) is not None:
            return False
        kept[path] = verdict
        return True

    return known_good


def _runtime_and_load(
    settings: Settings, library: LibraryChoice | None, *, thorough: bool, load: bool, kept: Mapping[Path, Verdict]
) -> tuple[RuntimeState | None, Verdict | None, tuple[Finding, ...]]:
    """(the runtime state, the load's verdict, the findings). Thorough: resolve every dependency (and module), then
    load only a library whose dependencies are all found. Quick (the loader): load in a child first, and resolve
    only when that fails; where a missing library's ROCm 7 install has them all, load them from there first and
    try again, unless a finding of the resolution refuses the backend already (the loader stops there)."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._binary import load_test

    runtime: RuntimeState | None = None
    found: list[Finding] = []
    if thorough:
        from jax_rocm7_plugin._machine.native_modules import native_modules

        runtime = _runtime_state(settings, library, native_modules())
        found.extend(runtime.findings)
        dependencies = runtime.dependencies
        if library is None or dependencies is None or (dependencies.missing and not runtime.preload):
            return runtime, None, tuple(found)
    elif library is None or not load:
        return None, None, ()
    # In a child process first: a library that dies while loading must not take `import jax` with it.
    preload = runtime.preload if runtime is not None else ()
    verdict = kept.get(library.path) or load_test.probe(library.path, "pjrt", settings, preload=preload)
    refused = load_test.verdict_finding(library.path, verdict)
    if refused is not None:
        return runtime, verdict, (*found, refused)
    if verdict.loaded or thorough:
        return runtime, verdict, tuple(found)
    # A dependency is missing: name the root cause (no ROCm 7), else every missing library; where they are all
    # in a ROCm 7 install's private directory, load them from there first (as the doctor does) and go on.
    runtime = _runtime_state(settings, library, [])
    found.extend(runtime.findings)
    if any(f.blocks_rocm for f in runtime.findings):
        return runtime, verdict, tuple(found)
    if runtime.preload:
        verdict = load_test.probe(library.path, "pjrt", settings, preload=runtime.preload)
        refused = load_test.verdict_finding(library.path, verdict)
        if refused is not None:
            return runtime, verdict, (*found, refused)
        if verdict.loaded:
            return runtime, verdict, tuple(found)
        runtime = runtime._replace(preload=())  # they did not help: the failed load's error says why
    from jax_rocm7_plugin._binary import pjrt_api

    error = verdict.error or "unknown error"
    missing = catalog.library_dependency_missing(
        f"the PJRT library needs {pjrt_api.missing_dependency(error, library.path.name)}, "
        "which the dynamic loader cannot find",
        (error, f"library: {library.path}"),
    )
    return runtime, verdict, (*found, missing)


def _runtime_state(settings: Settings, library: LibraryChoice | None, modules: Sequence[Path]) -> RuntimeState:
    from jax_rocm7_plugin._machine.runtime import runtime_state
    from jax_rocm7_plugin._policy import releases

    needed = library.dynamic.needed if library is not None and library.dynamic is not None else None
    release = _release_of(library)
    row = releases.get(release)
    return runtime_state(
        library.path if library is not None else None,
        needed,
        modules,
        settings.sysroot,
        settings.rocm_path,
        settings.ld_library_path,
        (release, row.rocm_version) if row is not None else None,
    )


def situation(
    facts: Facts, *, thorough: bool, other_plugins: tuple[str, ...] = (), with_rocm: bool = True
) -> Situation:
    """What known issues depend on, from what the steps learned (no second look at anything they read).

    The ROCm install is the one whose HIP runtime the dependency walk resolved. Where the walk did not run (the
    loader's quick path, unless `with_rocm` is False) it is the pip ROCm the pip-rocm step found in use, else the
    one at ROCM_PATH or /opt/rocm, where the library's RUNPATH looks (a version file's read); only where neither
    says and LD_LIBRARY_PATH is set, every install is looked for as the walk would. `thorough` (the doctor) also
    reads the amdgpu driver's version and each GPU's MES firmware, which only known issues need. Modules are
    imported where used: this runs inside `import jax` on every GPU machine.
    """
    from jax_rocm7_plugin._policy.known_issues import Situation

    settings, machine = facts.settings, facts.machine
    # The GPUs HIP will use and can open: where none can be (no /dev/kfd, no permission), that is the cause to
    # fix, and bugs of the GPU stack are not yet this machine's.
    gpus = [node for _, node in used_gpus(facts)]
    install = rocm_install(facts) if with_rocm or facts.runtime is not None else None
    home = None
    if install is not None:
        from jax_rocm7_plugin._machine.rocm_install import install_root

        home = install_root(install, settings.sysroot)
    firmware: tuple[tuple[str, str], ...] = ()
    gc_ip: tuple[tuple[str, str], ...] = ()
    amdgpu = None
    if thorough and machine is not None:
        from jax_rocm7_plugin._machine import driver

        amdgpu = driver.amdgpu_driver_version(settings.sysroot)
        found = ((node.gfx_target, driver.mes_firmware(settings.sysroot, node.drm_render_minor)) for node in gpus)
        firmware = tuple((gfx or "unknown", fw) for gfx, fw in found if fw is not None)
        ips = (
            (node.gfx_target, driver.gc_ip_version(settings.sysroot, node.drm_render_minor, node.gfx_target_version))
            for node in gpus
        )
        gc_ip = tuple((gfx or "unknown", ip) for gfx, ip in ips if ip is not None)
    return Situation(
        rocm=install.version if install is not None else None,
        rocm_root=install.location.removeprefix("pip: ") if install is not None and home is not None else None,
        rocm_layout=_layout(home),
        release=library_release(facts),
        jaxlib=facts.jaxlib,
        gfx=tuple(node.gfx_target for node in gpus if node.gfx_target),
        gpu_count=len(gpus) if facts.view is not None else None,
        wsl=machine is not None and machine.wsl_dxg and not machine.topology.present,
        hosts=settings.job_hosts,
        environment=_environment_at_load(facts),
        hsa_override=settings.hsa_override,
        amdgpu_driver=amdgpu,
        mes_firmware=firmware,
        gc_ip=gc_ip,
        other_plugins=other_plugins,
    )


def _environment_at_load(facts: Facts) -> tuple[tuple[str, str], ...]:
    """The runtime variables the library will see: the user's, and where a pip ROCm is in use, the ones the loader
    points at it (bitcode, ld.lld) where the user set none, so that a bug those avoid is not claimed."""
    environment = facts.settings.runtime_environment
    if facts.pip_rocm is None:
        return environment
    from jax_rocm7_plugin._machine.rocm_pip import point_at_pip_rocm

    at_load = dict(environment)
    point_at_pip_rocm(facts.pip_rocm, at_load)
    return tuple((name, value) for name, value in at_load.items() if name != "PATH")


def _layout(home: Path | None) -> str | None:
    if home is None:
        return None
    from jax_rocm7_plugin._machine.rocm_install import layout

    return layout(home)


def rocm_install(facts: Facts) -> RocmInstall | None:
    """The ROCm install the library will load: the one whose HIP runtime the dependency walk resolved; where the
    walk did not run (the loader's quick path), see `situation`."""
    if facts.runtime is not None:
        from jax_rocm7_plugin._machine.rocm_install import loaded_install
        from jax_rocm7_plugin._names import HIP_SONAME

        walk = facts.runtime.dependencies
        return loaded_install(facts.runtime.installs, walk.found.get(HIP_SONAME) if walk is not None else None)
    return _quick_install(facts) if facts.library is not None else None


def _quick_install(facts: Facts) -> RocmInstall | None:
    """The ROCm install the library will load, without looking for every install: see `situation`."""
    import os

    from jax_rocm7_plugin._machine import host_path

    settings = facts.settings
    where = settings.rocm_path or "/opt/rocm"
    version_file = host_path(settings.sysroot, where) / ".info" / "version"
    if facts.pip_rocm is None and not settings.ld_library_path and not os.path.isfile(version_file):
        return None  # nothing to read: the release is unknown, and no module is imported to learn that
    from jax_rocm7_plugin._machine.rocm_install import RocmInstall, loaded_install, read_version_file

    if facts.pip_rocm is not None:
        from jax_rocm7_plugin._machine.packages import installed_version
        from jax_rocm7_plugin._names import PIP_ROCM_DISTRIBUTION

        version = installed_version(PIP_ROCM_DISTRIBUTION)
        return RocmInstall(f"pip: {facts.pip_rocm.root}", "pip", version, ()) if version else None
    version = read_version_file(host_path(settings.sysroot, where))
    if version is not None:
        return RocmInstall(where, "ROCM_PATH" if settings.rocm_path else "/opt/rocm", version, ())
    # Elsewhere only through LD_LIBRARY_PATH (the one other way to it the library's RUNPATH leaves): look then.
    return loaded_install(_installs(settings), None) if settings.ld_library_path else None


def _installs(settings: Settings) -> list[RocmInstall]:
    from jax_rocm7_plugin._machine.ld_resolve import ld_so_conf_dirs, search_dirs
    from jax_rocm7_plugin._machine.rocm_install import find_rocm_installs

    conf_dirs = ld_so_conf_dirs(settings.sysroot)
    return find_rocm_installs(settings.sysroot, settings.rocm_path, search_dirs(settings.ld_library_path, conf_dirs))


def library_release(facts: Facts) -> str:
    """The jax release (X.Y.Z) of the PJRT library: its wheel's version (0.10.2.post1 -> 0.10.2), else, for a
    library given by path, this plugin's release."""
    return _release_of(facts.library)


def _release_of(library: LibraryChoice | None) -> str:
    from jax_rocm7_plugin._policy.versions import release_str
    from jax_rocm7_plugin.version import JAX_RELEASE

    version = library.pjrt_version if library is not None else None
    try:
        return release_str(version) if version else JAX_RELEASE
    except ValueError:  # no version at all: the version step has said so
        return JAX_RELEASE
