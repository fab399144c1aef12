"""Decide whether this machine gets the 'rocm' backend, and register it with jax.

Order matters for cost: on a machine without an AMD GPU the decision is a
directory listing and a few stats; the 520 MB library is loaded only when the
machine, the library's presence and the versions all check out.

Failure never breaks `import jax`: the user gets one warning line with the cause
and the fix, and a backend factory under 'rocm' that raises that same cause, so
`JAX_PLATFORMS=rocm` reports "Unable to initialize backend 'rocm': <cause>".
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
from collections.abc import Callable, MutableMapping
from typing import Any

# Only what a machine without an AMD GPU needs is imported up front: this module is
# imported inside `import jax; jax.devices()`, which must stay within 1% of its cost
# without us (benchmarks/import_overhead.py). The pipeline imports each later step's
# modules when it gets there.
from jax_rocm7_plugin import _environment
from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._loader import job_gate
from jax_rocm7_plugin._loader import warm as _warm
from jax_rocm7_plugin._names import BACKEND, PLUGIN_DISTRIBUTION, PLUGIN_PACKAGE, XLA_PLATFORM
from jax_rocm7_plugin._pipeline import Facts, first_blocking_finding
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._settings import Settings, read_settings, rocm_in_platforms
from jax_rocm7_plugin.version import __version__ as PLUGIN_VERSION

logger = logging.getLogger(PLUGIN_PACKAGE)

PRIORITY = _warm.PRIORITY


class Plan(NamedTuple):
    """Everything needed to register the backend, taken from what the checks learned."""

    library_path: str
    library_source: str
    options: dict[str, Any]
    c_api_version: str | None = None
    extensions: frozenset[int] = frozenset()  # PJRT_Extension_Type values the library offers
    warnings: tuple[Finding, ...] = ()
    environment_changes: tuple[str, ...] = ()
    workarounds: tuple[str, ...] = ()  # "<known issue>: NAME=value, ..." set before the library loads in-process
    # Libraries to load by absolute path before the PJRT library (its RUNPATH misses them).
    preload: tuple[str, ...] = ()


def rocm_required(platforms: str | None) -> bool:
    """True when the user explicitly asked for rocm, so failure becomes jax's error."""
    return bool(platforms and platforms.strip()) and rocm_in_platforms(platforms)


def plan_registration(
    settings: Settings, *, apply_environment: bool = False, load: bool = True, facts: Facts | None = None
) -> Plan | Finding:
    """The checks (in the pipeline's order) up to the first blocking finding, then jaxlib's client options.

    `apply_environment`: point HIP at a pip ROCm in os.environ (only the real registration does);
    `load`: False plans without the child-process load (what it would learn stays unknown);
    `facts`: where the caller keeps what the checks learn (the job check at backend start reads them).
    """
    facts = facts if facts is not None else Facts(settings)
    blocking, warnings = first_blocking_finding(facts, load=load)
    if blocking is not None:
        return blocking
    options = rocm_client_options(settings)
    if isinstance(options, Finding):
        return options
    assert facts.library is not None
    changes: list[str] = []
    workarounds: tuple[str, ...] = ()
    if apply_environment:
        if facts.pip_rocm is not None:
            from jax_rocm7_plugin._machine.rocm_pip import point_at_pip_rocm

            # HIP reads these when it initialises, which happens when jax creates the client.
            changes = point_at_pip_rocm(facts.pip_rocm, os.environ)
        workarounds = apply_workarounds(facts, os.environ)
    return Plan(
        library_path=str(facts.library.path),
        library_source=facts.library.source,
        options=options,
        c_api_version=facts.verdict.c_api_version if facts.c_api is not None and facts.verdict else None,
        extensions=frozenset(facts.verdict.extensions) if facts.verdict is not None else frozenset(),
        warnings=tuple(warnings),
        environment_changes=tuple(changes),
        workarounds=workarounds,
        preload=tuple(str(p) for p in facts.runtime.preload) if facts.runtime is not None else (),
    )


def apply_workarounds(facts: Facts, environ: MutableMapping[str, str]) -> tuple[str, ...]:
    """Set the safe workarounds of the known issues this machine has (_policy/known_issues.json), never a
    variable the user set, nothing with JAX_ROCM_WORKAROUNDS=0; say what was set, one item per issue.

    Called after the checks and before jax loads the library in-process: ROCr, HIP and rocprofiler read
    these variables when the client starts them. A first pass without the ROCm install decides whether any
    safe workaround could apply at all, so a machine that needs none never looks for ROCm here.
    """
    from jax_rocm7_plugin._pipeline import situation
    from jax_rocm7_plugin._policy import known_issues

    if not _environment.switch(_environment.WORKAROUNDS, environ):
        return ()
    quick = situation(facts, thorough=False, with_rocm=False)
    candidates = known_issues.safe_workarounds(quick, assume=known_issues.ROCM_CONDITIONS)
    if not candidates:
        return ()
    needs_rocm = any(known_issues.ROCM_CONDITIONS & set(m.issue.affects) for m, _ in candidates)
    applied: list[str] = []
    for match, variables in known_issues.safe_workarounds(situation(facts, thorough=False) if needs_rocm else quick):
        fresh = [(name, value) for name, value in variables if not _environment.is_set(name, environ)]
        for name, value in fresh:
            environ[name] = value
        if fresh:
            applied.append(f"{match.issue.id}: {', '.join(f'{n}={v}' for n, v in fresh)}")
    return tuple(applied)


def rocm_client_options(settings: Settings) -> dict[str, Any] | Finding:
    """jaxlib's GPU plugin options with platform_name=ROCM, or the finding saying what is wrong.

    The pipeline has made our own checks of these variables; jaxlib raises a bare ValueError
    on what remains, which would surface as a traceback from jax's plugin discovery.
    """
    from jaxlib import xla_client

    from jax_rocm7_plugin._settings import xla_client_evidence

    try:
        options: dict[str, Any] = dict(xla_client.generate_pjrt_gpu_plugin_options())
    except ValueError as error:
        # jaxlib's own message (or float()'s "could not convert ..."); the evidence names the variables set.
        return catalog.xla_client_env_invalid(str(error).rstrip("."), xla_client_evidence(settings.xla_client))
    options["platform_name"] = XLA_PLATFORM
    return options


def initialize() -> None:
    """Entry point jax calls during plugin discovery. Never raises."""
    try:
        _initialize()
    except Exception as error:  # noqa: BLE001 - jax would print a traceback; one line is kinder
        platforms = _warm.jax_platforms()
        if platforms is None:  # the settings may be what failed: the variable itself, as jax reads it
            platforms = _environment.read("JAX_PLATFORMS")
        _report_unavailable(catalog.loader_internal_error(PLUGIN_VERSION, error), platforms or None)


def _initialize() -> None:
    raw_platforms = _warm.jax_platforms()
    settings = read_settings(os.environ, platforms=raw_platforms)  # the one read of the environment
    platforms = settings.platforms or None
    if not rocm_in_platforms(platforms):
        logger.debug("JAX_PLATFORMS=%s leaves out rocm; not probing", platforms)
        job_gate.watch_for_hangs(rocm=False)
        return
    facts = Facts(settings)
    before = dict(_environment.everything())
    outcome = plan_registration(settings, apply_environment=True, facts=facts)
    if isinstance(outcome, Finding):
        _report_unavailable(outcome, platforms, facts)
        job_gate.watch_for_hangs(rocm=False)
        if outcome.id in _warm.REFUSALS_KEPT and _environment.switch(_environment.WARM):
            _write_refusal(outcome, before, raw_platforms, facts)
        return
    said: list[tuple[int, str]] = []
    for finding in outcome.warnings:  # an info (nothing to do) is said at info level: a healthy machine prints nothing
        level = logging.WARNING if finding.severity == "warning" else logging.INFO
        said.append((level, f"ROCm backend: {finding.sentence()} [{finding.id}]"))
    if outcome.workarounds:
        said.append(
            (
                logging.INFO,
                "ROCm backend: avoiding known issues (JAX_ROCM_WORKAROUNDS=0 turns this off): "
                + "; ".join(outcome.workarounds),
            )
        )
    for level, line in said:
        logger.log(level, "%s", line)
    if outcome.environment_changes:
        logger.debug("pointed HIP at the pip ROCm: %s", ", ".join(outcome.environment_changes))
    registered = _register(outcome, platforms, facts)
    if registered and _environment.switch(_environment.WARM):
        _write_plan(outcome, before, said, raw_platforms, facts)
    job_gate.watch_for_hangs(rocm=registered)


def _write_plan(
    plan: Plan, before: dict[str, str], said: list[tuple[int, str]], platforms: str | None, facts: Facts
) -> None:
    """What the next start on this machine needs to register without the checks (_warm.py)."""
    from jax_rocm7_plugin._machine.native_modules import native_path
    from jax_rocm7_plugin._safe_io import Deadline

    root = str(facts.settings.sysroot)
    extension = native_path("rocm_plugin_extension")
    extension_path = str(extension) if extension.is_file() else None
    lost = catalog.custom_calls_unavailable("{cause}", (f"library: {plan.library_path}",))
    job = _job_part(facts, platforms) if job_gate.distributed_job() is not None else None
    decisive = tuple(job.pop("decisive")) if job is not None else ()
    try:
        machine = _warm.machine_facts(root, decisive)
    except (Deadline, OSError):
        return  # a machine that does not answer in time is checked afresh each start
    _warm.write_plan(
        before,
        platforms,
        {
            **({"job": job, "decisive": list(decisive)} if job is not None else {}),
            "library": plan.library_path,
            "said": said,
            "set": [(k, v) for k, v in _environment.everything() if k != "PATH" and before.get(k) != v],
            "path_prepend": [c.removeprefix("PATH+=") for c in plan.environment_changes if c.startswith("PATH+=")],
            "preload": list(plan.preload),
            "extension": extension_path,
            "extension_missing": _extension_missing(plan),
            "extension_lost": f"{lost.sentence()} [{lost.id}]",
            "watched": _warm.watched_files(root, plan.library_path, before, extension_path),
            "machine": machine,
        },
    )


def _write_refusal(refusal: Finding, before: dict[str, str], platforms: str | None, facts: Facts) -> None:
    """The next start on this machine says the same refusal without the checks, while the machine facts it was
    decided from hold (_warm.REFUSALS_KEPT). Never in a job: there the refusal takes part in the job check."""
    from jax_rocm7_plugin._safe_io import Deadline

    if job_gate.distributed_job() is not None:
        return
    root = str(facts.settings.sysroot)
    try:
        machine = _warm.machine_facts(root)
    except (Deadline, OSError):
        return
    line = f"{refusal.sentence()} [{refusal.id}]"
    _warm.write_plan(before, platforms, {"refused": line, "watched": _warm.refusal_watched(root), "machine": machine})


def _job_part(facts: Facts, platforms: str | None) -> dict[str, Any] | None:
    """In a job, what a warm start of a later job needs for its job check: the record this start states, but for
    what is each process's own (how it joined, its host, its variables: stated at each start), and the files
    that decide the health it states (their contents are watched: a counter that moved means a cold start)."""
    from jax_rocm7_plugin._job import check
    from jax_rocm7_plugin._job.record import SCHEMA, JoinFact
    from jax_rocm7_plugin._machine.gpu_health import decisive_files, read_in_time
    from jax_rocm7_plugin._policy import cluster_policy
    from jax_rocm7_plugin._safe_io import Deadline

    machine = facts.machine
    try:
        # One read of the node: the health the record states, and the files it was read from.
        gpus = machine is not None and bool(machine.topology.gpus)  # no GPU: the record states no health
        node = read_in_time(facts.settings.sysroot, machine.topology, full=False) if machine and gpus else None
        placeholder = JoinFact(0, 1, None, None, "", "")  # each process's own part is stated at each start
        text = check.local_record(facts, None, placeholder, os.environ, job_gate.jax_version(), node)
    except (Deadline, OSError, ValueError):
        return None
    own, _, shared = text.partition("\n")
    return {
        "schema": SCHEMA,
        "shared": shared,
        "truncated": json.loads(own).get("truncated", []),
        "limit": cluster_policy.record_max_bytes(),
        "steering": cluster_policy.steering_rules(),
        "required": rocm_required(platforms),
        "decisive": decisive_files(node) if node is not None else [],
    }


def _register(plan: Plan, platforms: str | None, facts: Facts) -> bool:
    """True where the backend was registered as planned (custom calls aside)."""
    from jax._src import xla_bridge
    from jaxlib import xla_client

    if plan.preload:  # the child's load test loaded the same ones first, and then the library loaded
        import ctypes

        try:
            for path in plan.preload:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            _report_unavailable(catalog.library_dependency_missing(str(error), plan.preload), platforms)
            return False
        logger.debug("loaded %s before the PJRT library (its RUNPATH does not reach them)", ", ".join(plan.preload))
    try:
        c_api = xla_bridge.register_plugin(
            BACKEND, priority=PRIORITY, library_path=plan.library_path, options=plan.options
        )
    except Exception as error:  # noqa: BLE001 - jax's loader error, reported as a finding
        _report_unavailable(
            catalog.pjrt_library_invalid(
                f"jax could not load {plan.library_path}: {error}", (f"source: {plan.library_source}",)
            ),
            platforms,
        )
        return False
    _check_job_at_backend_start(facts, platforms)
    logger.debug(
        "registered backend %r from %s (%s, PJRT C API %s)",
        BACKEND,
        plan.library_path,
        plan.library_source,
        plan.c_api_version,
    )
    extension = _import_plugin_extension()
    if extension is None:
        return True
    cause = _warm.register_extension(extension, c_api, _extension_missing(plan), xla_client)
    if cause is not None:  # the backend works; only what needs custom calls is lost
        finding = catalog.custom_calls_unavailable(cause, (f"library: {plan.library_path}",))
        logger.warning("ROCm backend: %s [%s]", finding.sentence(), finding.id)
    return True


def _import_plugin_extension() -> Any | None:
    """rocm_plugin_extension, when this wheel carries it and it loads (a ROCm library may be missing)."""
    from jax_rocm7_plugin._machine.native_modules import lost, native_path

    if not native_path("rocm_plugin_extension").is_file():
        logger.debug(
            "this %s wheel carries no ROCm extension modules: %s",
            PLUGIN_DISTRIBUTION,
            lost("rocm_plugin_extension", "not built into the wheel"),
        )
        return None
    try:
        return importlib.import_module(f"{PLUGIN_PACKAGE}.rocm_plugin_extension")
    except ImportError:  # load_native has named the cause at debug level, once
        return None


def _extension_missing(plan: Plan) -> str | None:
    """What the library lacks for the extension's handlers (the CPU stand-in, say): then none is installed."""
    from jax_rocm7_plugin._binary import pjrt_api

    missing = [
        name
        for kind, name in (
            (pjrt_api.EXTENSION_GPU_CUSTOM_CALL, "GPU custom-call"),
            (pjrt_api.EXTENSION_FFI, "FFI"),
        )
        if kind not in plan.extensions
    ]
    if missing:
        return f"the PJRT library offers no {' or '.join(missing)} extension, which jaxlib's ROCm modules need"
    return None


def _report_unavailable(finding: Finding, platforms: str | None, facts: Facts | None = None) -> None:
    """The refusal (_warm.refuse), after taking part in the job check where `facts` says what this process
    learned: the others must hear that its backend will not come up."""
    before_raise: Callable[[], object] | None = None
    if facts is not None and job_gate.distributed_job() is not None:
        before_raise = functools.partial(_job_check, facts, finding, platforms)
    _warm.refuse(f"{finding.sentence()} [{finding.id}]", rocm_required(platforms), before_raise)


def _check_job_at_backend_start(facts: Facts, platforms: str | None) -> None:
    """In a multi-process job, the job check in front of the factory jax registered for our library
    (_loader/job_gate.py), stating this process's record from what the checks learned; a single process keeps
    jax's factory as registered."""
    job_gate.install(_record_maker(facts, None), rocm_required(platforms))


def _job_check(facts: Facts, blocking: Finding | None, platforms: str | None) -> str | None:
    """The job check where this process's own checks decided (`blocking`: the refusal, None where the backend
    would come up): the sentence to raise where the job's verdict refuses the backend, else None."""
    return job_gate.check(
        _record_maker(facts, blocking), blocking=blocking is not None, required=rocm_required(platforms)
    )


def _record_maker(facts: Facts, blocking: Finding | None) -> Any:
    """join -> this process's record from the pipeline's facts and verdict (_job/check.local_record)."""

    def make(join: dict[str, Any]) -> str:
        from jax_rocm7_plugin._job import check
        from jax_rocm7_plugin._job.record import JoinFact

        fact = JoinFact(**{**join, "local_device_ids": _ids(join["local_device_ids"])})
        return check.local_record(facts, blocking, fact, os.environ, job_gate.jax_version())

    return make


def _ids(ids: list[int] | None) -> tuple[int, ...] | None:
    return None if ids is None else tuple(ids)
