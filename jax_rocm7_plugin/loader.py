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
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

# Only what a machine without an AMD GPU needs is imported up front: this module is
# imported inside `import jax; jax.devices()`, which must stay within 1% of its cost
# without us (benchmarks/import_overhead.py). Library, version and option checks
# import their modules when a GPU is there to use.
from jax_rocm7_plugin import findings as catalog
from jax_rocm7_plugin.findings import Finding, first_blocking
from jax_rocm7_plugin.machine import machine_findings, probe_within_deadline
from jax_rocm7_plugin.sysroot import sysroot
from jax_rocm7_plugin.version import __version__ as PLUGIN_VERSION

if TYPE_CHECKING:
    from jax_rocm7_plugin.library import LibraryChoice

logger = logging.getLogger("jax_rocm7_plugin")

BACKEND = "rocm"
PRIORITY = 500


class Plan(NamedTuple):
    """Everything needed to register the backend."""

    library: LibraryChoice
    options: dict[str, Any]
    c_api_version: str | None = None
    extensions: frozenset[int] = frozenset()  # PJRT_Extension_Type values the library offers
    warnings: tuple[Finding, ...] = ()
    environment_changes: tuple[str, ...] = ()


def rocm_requested(platforms: str | None) -> bool:
    """False when JAX_PLATFORMS (or jax_platforms) is set and leaves rocm out."""
    if not platforms:
        return True
    from jax._src import xla_bridge

    names = [p.strip().lower() for p in platforms.split(",") if p.strip()]
    return any(BACKEND in xla_bridge.expand_platform_alias(name) for name in names)


def rocm_required(platforms: str | None) -> bool:
    """True when the user explicitly asked for rocm, so failure becomes jax's error."""
    return bool(platforms) and rocm_requested(platforms)


def plan_registration(environ: Mapping[str, str], root: Path, *, load: bool = True) -> Plan | Finding:
    """Checks in order of cost; the first blocking finding ends the plan. The doctor runs them in this order."""
    from jax_rocm7_plugin.environment import variable_findings

    variables = variable_findings(environ, root)
    blocking = first_blocking(variables)
    if blocking is not None:
        return blocking
    state = probe_within_deadline(root)
    if isinstance(state, Finding):
        return state
    blocking = first_blocking(machine_findings(state))
    if blocking is not None:
        return blocking

    from jax_rocm7_plugin import coverage, environment, versions
    from jax_rocm7_plugin.client_options import rocm_client_options
    from jax_rocm7_plugin.library import library_targets, locate_library

    warnings: list[Finding] = list(variables)

    def blocked(found: list[Finding]) -> Finding | None:
        warnings.extend(f for f in found if not f.blocks_rocm)
        return first_blocking(found)

    blocking = blocked(environment.visible_device_findings(environ, state.topology.gpus))
    if blocking is not None:
        return blocking

    library = locate_library(environ)
    if isinstance(library, Finding):
        return library

    try:
        from jaxlib.version import __version__ as jaxlib_version
    except ImportError:
        return catalog.jaxlib_missing()
    skew = first_blocking(versions.version_findings(PLUGIN_VERSION, jaxlib_version, library.pjrt_version))
    if skew is not None:
        return skew

    options = rocm_client_options(environ)
    if isinstance(options, Finding):
        return options

    blocking = blocked(coverage.gpu_findings(environ, state, library_targets(library), root))
    if blocking is not None:
        return blocking

    plan = Plan(library=library, options=options, warnings=tuple(warnings))
    if not load:
        return plan
    return _load_and_check_c_api(plan, jaxlib_version, root, environ)


def _load_and_check_c_api(plan: Plan, jaxlib_version: str, root: Path, environ: Mapping[str, str]) -> Plan | Finding:
    from jax_rocm7_plugin import library_probe, pjrt_api, rocm_pip, versions

    pip_rocm = rocm_pip.pip_rocm_used(os.environ)
    if pip_rocm is not None:
        # HIP reads these when it initialises, so they must be set before the load.
        plan = plan._replace(
            environment_changes=tuple(rocm_pip.point_at_pip_rocm(pip_rocm, os.environ)),
            warnings=(*plan.warnings, *rocm_pip.bitcode_findings(pip_rocm)),
        )

    path = plan.library.path
    # In a child process first: a library that dies while loading must not take `import jax` with it.
    verdict = library_probe.probe(path, "pjrt")
    refused = library_probe.verdict_finding(path, verdict)
    if refused is not None:
        return refused
    if not verdict.loaded:  # a dependency is missing: name them all, as the doctor does
        error = verdict.error or "unknown error"
        return _runtime_cause(plan.library, root, environ) or catalog.library_dependency_missing(
            f"the PJRT library needs {pjrt_api.missing_dependency(error, path)}, which the dynamic loader cannot find",
            (error, f"library: {path}"),
        )
    c_api = pjrt_api.CApiVersion(verdict.major or 0, verdict.minor or 0)

    expected = versions.expected_pjrt_c_api_major(jaxlib_version)
    if expected is not None and c_api.major != expected:
        return catalog.pjrt_c_api_mismatch(
            f"the PJRT library speaks PJRT C API {c_api}, but jaxlib {jaxlib_version} speaks {expected}.x",
            f'install the library built for this jaxlib: pip install "jax-rocm7-pjrt=='
            f'{versions.release_str(jaxlib_version)}.*"',
            (f"library: {path}", f"jaxlib=={jaxlib_version}"),
        )
    return plan._replace(c_api_version=str(c_api), extensions=frozenset(verdict.extensions))


def _runtime_cause(library: LibraryChoice, root: Path, environ: Mapping[str, str]) -> Finding | None:
    """Why dlopen failed, as the doctor says it: no ROCm 7, else every missing library."""
    from jax_rocm7_plugin.runtime_checks import extension_modules, runtime_state

    needed = library.dynamic.needed if library.dynamic is not None else None
    state = runtime_state(library.path, needed, extension_modules(), root, environ)
    return first_blocking(state.findings)


def initialize() -> None:
    """Entry point jax calls during plugin discovery. Never raises."""
    try:
        _initialize()
    except Exception as error:  # noqa: BLE001 - jax would print a traceback; one line is kinder
        _report_unavailable(
            catalog.Finding(
                "loader-internal-error",
                "error",
                f"jax-rocm7-plugin {PLUGIN_VERSION} failed unexpectedly ({type(error).__name__}: {error})",
                "report this with the output of `python -m jax_rocm7_plugin doctor`",
            ),
            _platforms_setting(),
        )


def _platforms_setting() -> str | None:
    try:
        from jax._src import config

        value = config.jax_platforms.value
    except Exception:  # noqa: BLE001 - jax internals moved: fall back to the variable
        value = os.environ.get("JAX_PLATFORMS")
    return value or None


def _initialize() -> None:
    platforms = _platforms_setting()
    if not rocm_requested(platforms):
        logger.debug("JAX_PLATFORMS=%s leaves out rocm; not probing", platforms)
        return
    outcome = plan_registration(os.environ, sysroot())
    if isinstance(outcome, Finding):
        _report_unavailable(outcome, platforms)
        return
    for finding in outcome.warnings:
        logger.warning("ROCm backend: %s [%s]", finding.sentence(), finding.id)
    if outcome.environment_changes:
        logger.debug("pointed HIP at the pip ROCm: %s", ", ".join(outcome.environment_changes))
    _register(outcome, platforms)


def _register(plan: Plan, platforms: str | None) -> None:
    from jax._src import xla_bridge
    from jaxlib import xla_client

    try:
        c_api = xla_bridge.register_plugin(
            BACKEND, priority=PRIORITY, library_path=str(plan.library.path), options=plan.options
        )
    except Exception as error:  # noqa: BLE001 - jax's loader error, reported as a finding
        _report_unavailable(
            catalog.pjrt_library_invalid(
                f"jax could not load {plan.library.path}: {error}", (f"source: {plan.library.source}",)
            ),
            platforms,
        )
        return
    logger.debug(
        "registered backend %r from %s (%s, PJRT C API %s)",
        BACKEND,
        plan.library.path,
        plan.library.source,
        plan.c_api_version,
    )
    extension = _import_plugin_extension()
    if extension is None:
        return
    cause = _register_extension(extension, c_api, plan, xla_client)
    if cause is not None:  # the backend works; only what needs custom calls is lost
        finding = catalog.custom_calls_unavailable(cause, (f"library: {plan.library.path}",))
        logger.warning("ROCm backend: %s [%s]", finding.sentence(), finding.id)


def _import_plugin_extension() -> Any | None:
    """rocm_plugin_extension, when this wheel carries it and it loads (a ROCm library may be missing)."""
    from jax_rocm7_plugin import extensions

    if not extensions.native_path("rocm_plugin_extension").is_file():
        logger.debug(
            "this jax-rocm7-plugin wheel carries no ROCm extension modules: %s",
            extensions.lost("rocm_plugin_extension", "not built into the wheel"),
        )
        return None
    try:
        return importlib.import_module("jax_rocm7_plugin.rocm_plugin_extension")
    except ImportError:  # load_native has named the cause at debug level, once
        return None


def _register_extension(extension: Any, c_api: Any, plan: Plan, xla_client: Any) -> str | None:
    """Hand the extension's custom calls and FFI types to jaxlib for platform ROCM; the cause if not all went.

    A library without the extensions jaxlib's GPU plugin code needs (the CPU stand-in, say) gets no
    handler: jaxlib would install it and then raise on every ROCM registration, queued or later.
    """
    from jax_rocm7_plugin import pjrt_api
    from jax_rocm7_plugin.client_options import PLATFORM_NAME

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
    try:
        xla_client.register_custom_type_handler(PLATFORM_NAME, functools.partial(extension.register_custom_type, c_api))
        xla_client.register_custom_call_handler(
            PLATFORM_NAME, functools.partial(extension.register_custom_call_target, c_api)
        )
        for name, value in extension.ffi_types().items():
            xla_client.register_custom_type(name, value, platform=PLATFORM_NAME)
        for name, value in extension.ffi_handlers().items():
            xla_client.register_custom_call_target(name, value, platform=PLATFORM_NAME, api_version=1)
    except Exception as error:  # noqa: BLE001 - jaxlib raises its own runtime error types
        _withdraw_handlers(xla_client, PLATFORM_NAME)
        return f"{type(error).__name__}: {error}"
    return None


def _withdraw_handlers(xla_client: Any, platform: str) -> None:
    """Take back handlers that failed, so later ROCM registrations queue instead of raising."""
    name = getattr(xla_client, "xla_platform_names", {}).get(platform, platform)
    for table in ("_custom_callback_handler", "_custom_type_id_handler"):
        handlers = getattr(xla_client, table, None)
        if isinstance(handlers, dict):
            handlers.pop(name, None)


class RocmUnavailable(RuntimeError):
    """Raised by the placeholder backend factory: carries the finding's sentence."""


def _report_unavailable(finding: Finding, platforms: str | None) -> None:
    """One warning line (unless jax will raise it as an error), and a factory that raises it."""
    from jax._src import xla_bridge

    if not rocm_required(platforms):
        logger.warning("ROCm backend unavailable, jax falls back to CPU: %s [%s]", finding.sentence(), finding.id)
    if BACKEND in xla_bridge._backend_factories:
        return  # someone registered 'rocm' already (another ROCm plugin): leave theirs alone

    def unavailable() -> Any:
        raise RocmUnavailable(f"{finding.sentence()} [{finding.id}]")

    xla_bridge.register_backend_factory(BACKEND, unavailable, priority=PRIORITY, fail_quietly=True)
