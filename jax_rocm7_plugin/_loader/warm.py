"""The warm path: register the 'rocm' backend from a plan the last cold start wrote, when nothing it depends on
has changed. `import jax; jax.devices()` on a GPU machine then pays for a few stats and small reads, not for
the check pipeline, the known-issue data and the findings catalogue (benchmarks/warm_path.py).

A plan is written by the loader (`_loader._register`) after a registration that went all the way, and holds
what registration needs: the library, its C API and extensions, the libraries to preload, the variables the
loader set (safe workarounds, a pip ROCm's), the warnings it said. It is found by a key over everything that
can change the decision and is cheap to read (`plan_key`): the variables that steer the plugin, the runtime or
jax, sys.path, the Python, jax and jaxlib, the sysroot, and this package's own files. It is used only where
what it recorded still holds (`_still_holds`): the identity (size, mtime, ctime, inode, device) of every file
it watched (the library, the ROCm the workarounds were chosen for, /etc/ld.so.cache), and the machine's facts
the verdict came from (`machine_facts`: KFD topology nodes, /dev/kfd and render nodes with their owners and
this user's access, WSL's /dev/dxg, the amdgpu module, /dev/shm's size, this user's groups), read under the
machine probe's deadline. Anything else (no plan, a change, a job's process whose plan states nothing for the job
check, an error, a plan or a folder another user could have written: _safe_io.read_trusted) falls to the cold
path, which checks everything and writes a new plan (private, and only where the folders are this user's). In a
job, the job gate (job_gate.py) takes the plan's job part for the job check at backend start.

Stdlib only, and nothing of this package but the foundation (_names, _safe_io).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._names import BACKEND, PLUGIN_PACKAGE, XLA_PLATFORM

PLAN_FORMAT = 1
PRIORITY = 500  # the backend's, as jax's GPU plugins register theirs
# Variables that can change what the checks decide, what the runtime does, or what jax does with the plugin
# (families and names of _environment).
STEERING_PREFIXES = (
    "JAX_",
    "XLA_",
    "HIP_",
    "HSA_",
    "ROCR_",
    "ROCM_",
    "ROCPROFILER_",
    "DEBUG_HIP_",
    "AMD_",
    "GPU_",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "RUNFILES_",
    "ROCBLAS_",
    "HIPBLASLT_",
    "MIOPEN_",
)
# Not the launchers' SLURM_* and OMPI_*: a job's identity changes with every job, and the one thing of it that steers
# the decision (the hosts it spans, which known issues of jobs across hosts match) is in the key as a count.
TOPOLOGY = "sys/class/kfd/kfd/topology"
_SMALL = 16 * 1024
# This package's files the decision is made by (_job: a job's plan holds the record its code states, and process
# 0's memory of agreeing jobs is salted with the same).
_OWN_FOLDERS = ("", "_loader", "_policy", "_machine", "_binary", "_job")
# jax.distributed's own variables name a job (its coordinator, this process's place in it), not the machine: a
# job's processes differ in them and every job changes them. How this process joined is stated at backend start.
JOB_IDENTITY = ("JAX_COORDINATOR_ADDRESS", "JAX_COORDINATOR_PORT", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES",
                "JAX_LOCAL_DEVICE_IDS")  # fmt: skip

logger = logging.getLogger(PLUGIN_PACKAGE)


def _identity(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def sysroot(environ: Mapping[str, str]) -> str:
    return _environment.read(_environment.SYSROOT, environ) or "/"


def plans_dir(environ: Mapping[str, str]) -> Path | None:
    """Beside the load verdicts: <cache_root>/plans."""
    root = _environment.cache_root(environ)
    return root / "plans" if root is not None else None


@functools.cache
def own_files() -> str:
    """What this package's decision-making files are: the digest its wheel's build stamped (a reinstall of the
    same build keeps the plans; no file is read), else, in a source tree, their newest change (an edit of a
    checkout; about 0.5 ms, a stat per file)."""
    try:
        from jax_rocm7_plugin import version  # jaxlib imported it already, asking for plugin versions

        built = version.SOURCE_DIGEST
    except Exception:  # noqa: BLE001 - a version.py broken in any way (tests/e2e/test_hostile.py): the files decide
        built = None
    if isinstance(built, str) and built:
        return f"built:{built}"
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    newest, count = 0, 0
    for folder in _OWN_FOLDERS:
        try:
            with os.scandir(os.path.join(package, folder)) as entries:
                for entry in entries:
                    if entry.name.endswith((".py", ".json")):
                        newest = max(newest, entry.stat().st_mtime_ns)
                        count += 1
        except OSError:
            continue
    return f"{newest}:{count}"


def plan_key(environ: Mapping[str, str], platforms: str | None) -> str:
    """What a plan is filed under: everything cheap that can change the decision."""
    steering = [(k, v) for k, v in _environment.matching(STEERING_PREFIXES, environ) if k not in JOB_IDENTITY]
    versions = [getattr(sys.modules.get(m), "__version__", "") for m in ("jax.version", "jaxlib.version")]
    parts = [str(PLAN_FORMAT), sys.version, *versions, str(platforms), json.dumps(steering), json.dumps(sys.path)]
    parts += [sysroot(environ), own_files(), str(os.geteuid()), str(_environment.job_hosts(environ))]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def machine_facts(root: str, decisive: tuple[str, ...] = ()) -> dict[str, Any]:
    """The machine facts a verdict depends on, as the machine probe reads them (under its deadline); and for a job's
    plan the `decisive` files' contents (the GPUs' error counters and partition modes its record states)."""
    from jax_rocm7_plugin._safe_io import read_attribute, read_text, under, with_deadline

    def read() -> dict[str, Any]:
        nodes_dir = under(root, f"{TOPOLOGY}/nodes")
        try:
            nodes = sorted(os.listdir(nodes_dir), key=lambda n: (len(n), n))
        except OSError:
            nodes = None
        properties = {}
        for node in nodes or ():
            try:
                properties[node] = read_text(os.path.join(nodes_dir, node, "properties"), _SMALL)
            except (OSError, ValueError) as error:
                properties[node] = f"unreadable: {type(error).__name__}"
        try:
            renders = sorted(n for n in os.listdir(under(root, "/dev/dri")) if n.startswith("renderD"))
        except OSError:
            renders = []
        devices = {}
        for device in ("/dev/kfd", "/dev/dxg", *(f"/dev/dri/{n}" for n in renders)):
            path = under(root, device)
            try:
                info = os.stat(path)
                devices[device] = [
                    info.st_mode,
                    info.st_uid,
                    info.st_gid,
                    info.st_rdev,
                    os.access(path, os.R_OK | os.W_OK),
                ]
            except OSError:
                devices[device] = None
        try:
            shm = os.statvfs(under(root, "/dev/shm"))
            shm_bytes = shm.f_blocks * shm.f_frsize
        except OSError:
            shm_bytes = None
        facts = {
            "nodes": nodes,
            "properties": properties,
            "devices": devices,
            "amdgpu": os.path.isdir(under(root, "/sys/module/amdgpu")),
            "shm": shm_bytes,
            "groups": sorted(os.getgroups()),
        }
        if decisive:  # sysfs attributes, 10 a GPU: read as the job check reads them (read_attribute, one read each)
            contents: dict[str, str | None] = {}
            for path in decisive:
                try:
                    contents[path] = read_attribute(under(root, path))
                except OSError:
                    contents[path] = None
            facts["decisive"] = contents
        return facts

    return with_deadline(read)


def watched_files(root: str, library: str, environ: Mapping[str, str], extension: str | None) -> dict[str, Any]:
    """The files a plan depends on besides the machine: the library, the ROCm install the loader would read
    (the /opt/rocm link or ROCM_PATH and its version file), the dynamic loader's cache, the extension module."""
    from jax_rocm7_plugin._safe_io import under

    rocm = under(root, _environment.read("ROCM_PATH", environ) or "/opt/rocm")
    paths = [library, rocm, os.path.join(rocm, ".info", "version"), under(root, "/etc/ld.so.cache")]
    paths += [extension] if extension else []
    watched: dict[str, Any] = {p: _identity(p) for p in paths}
    watched[f"realpath:{rocm}"] = os.path.realpath(rocm)  # /opt/rocm moved to another release
    return watched


def _still_holds(plan: dict[str, Any], root: str) -> str | None:
    """None where every watched file and machine fact is as the plan recorded; else what changed."""
    for path, identity in plan["watched"].items():
        now = os.path.realpath(path[9:]) if path.startswith("realpath:") else _identity(path)
        if now != identity:
            return f"{path} changed"
    if machine_facts(root, tuple(plan.get("decisive", ()))) != plan["machine"]:
        return "the machine's GPUs, device nodes, access or GPU counters changed"
    return None


def _read_plan(directory: Path, key: str) -> dict[str, Any] | None:
    """The plan filed under `key`, where it and its folders are this user's alone (_safe_io.read_trusted)."""
    from jax_rocm7_plugin._safe_io import read_trusted

    try:
        plan: dict[str, Any] = json.loads(read_trusted(directory / f"{key}.json", 256 * 1024, directory.parent))
    except (OSError, ValueError):
        return None
    return plan if plan.get("format") == PLAN_FORMAT else None


def write_plan(environ: Mapping[str, str], platforms: str | None, plan: dict[str, Any]) -> bool:
    """File `plan` under this process's key, private and atomically; nothing where the cache is not writable or
    not this user's alone (_safe_io.write_private), and nothing where the same plan is filed already (the
    processes of a job on one machine start together: one writes, the others find it written). True: written."""
    from jax_rocm7_plugin._safe_io import write_private

    directory = plans_dir(environ)
    if directory is None:
        return False
    key = plan_key(environ, platforms)
    text = json.dumps({"format": PLAN_FORMAT, **plan})
    written = write_private(directory, f"{key}.json", text, directory.parent, unless_same=True)
    logger.debug("the start-up plan %s", "written" if written else "was there already, or is not written here")
    return written


def distributed_job() -> Any | None:
    """jax.distributed's state where this process is one of a job of several processes; None where it is not, or
    where jax keeps that state in another form (then there is no job check, and a lone start's plan serves).
    Here, not in the job gate, because the warm path asks it first and imports nothing of the job's."""
    distributed = sys.modules.get("jax._src.distributed")  # `import jax` loaded it
    try:
        state = distributed.global_state  # type: ignore[union-attr]
        if state.client is None or int(state.num_processes or 0) <= 1:
            return None
        int(state.process_id)
    except Exception:  # noqa: BLE001 - jax's internals moved
        return None
    return state


def jax_platforms() -> str | None:
    """JAX_PLATFORMS as jax's config holds it (None where jax keeps it elsewhere)."""
    try:
        from jax._src import config

        return str(config.jax_platforms.value or "")
    except Exception:  # noqa: BLE001 - jax internals moved
        return None


def try_warm() -> bool:
    """The entry module's first step: True where the backend was registered from a plan that still holds."""
    if not _environment.switch(_environment.WARM):  # off: always the cold path, and no plan written
        return False
    return register_from_plan(jax_platforms())


def register_from_plan(platforms: str | None) -> bool:
    """Register the backend from a plan that still holds; False (nothing done) where the cold path must run."""
    environ = os.environ
    directory = plans_dir(environ)
    if directory is None:
        return False
    in_a_job = distributed_job() is not None
    plan = _read_plan(directory, plan_key(environ, platforms))
    if plan is None or (in_a_job and "job" not in plan):  # a lone start's plan states nothing for a job's check
        return False
    changed = _still_holds(plan, sysroot(environ))
    if changed is not None:
        logger.debug("ROCm backend: the plan of the last start does not hold (%s); checking again", changed)
        return False
    if "refused" in plan:
        # the plan's key holds the platforms, so a plan made where rocm was asked for is read only where it still is
        refuse(plan["refused"], required=bool(platforms and platforms.strip()))
        return True
    register(plan)
    global job_plan
    job_plan = plan["job"] if in_a_job else None
    return True


# Refusals a plan may repeat: those decided by the machine's facts the plan watches alone (no AMD GPU driver at all:
# the machine without a GPU, where every `import jax` used to pay for the checks to say the same line again).
REFUSALS_KEPT = ("amdgpu-driver-missing",)
# What else decides that refusal: another vendor's driver appearing changes the sentence (_machine/driver.py).
REFUSAL_WATCHED = ("/sys/module/amdgpu", "/sys/module/nvidia", "/proc/driver/nvidia/version")


class RocmUnavailable(RuntimeError):
    """Raised by the placeholder backend factory of a refused start, warm or cold, and by the job check's refusal:
    carries the sentence (jax says it where rocm was asked for)."""


def refuse(line: str, required: bool, before_raise: Callable[[], object] | None = None) -> None:
    """A refused backend, from the cold path's finding or from a plan: the warning line (unless rocm was asked for,
    so jax raises the line as its error), and a factory that raises it, after `before_raise` (the job check, where
    the others must hear that this process's backend will not come up)."""
    from jax._src import xla_bridge

    if not required:
        logger.warning("ROCm backend unavailable, jax falls back to CPU: %s", line)
    if BACKEND in xla_bridge._backend_factories:
        return  # another ROCm plugin registered 'rocm': leave theirs alone

    def unavailable() -> Any:
        if before_raise is not None:
            before_raise()
        raise RocmUnavailable(line)

    xla_bridge.register_backend_factory(BACKEND, unavailable, priority=PRIORITY, fail_quietly=True)


def refusal_watched(root: str) -> dict[str, Any]:
    from jax_rocm7_plugin._safe_io import under

    return {under(root, path): _identity(under(root, path)) for path in REFUSAL_WATCHED}


# A warm start in a job: the plan's part for the job check, which the entry module hands to the job gate
# (_loader/job_gate.py: the check is no part of a lone warm start, and this module imports none of it).
job_plan: dict[str, Any] | None = None


def register(plan: dict[str, Any]) -> None:
    """Set what the loader set, say what it said, and register (an error propagates: the cold path reports it)."""
    import ctypes

    from jax._src import xla_bridge
    from jaxlib import xla_client

    for level, line in plan["said"]:
        logger.log(level, "%s", line)
    for name, value in plan["set"]:
        os.environ.setdefault(name, value)
    for entry in plan["path_prepend"]:
        parts = (_environment.read("PATH") or "").split(os.pathsep)
        if entry not in parts:
            os.environ["PATH"] = os.pathsep.join([entry, *filter(None, parts)])
    for path in plan["preload"]:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    options = dict(xla_client.generate_pjrt_gpu_plugin_options())
    options["platform_name"] = XLA_PLATFORM
    c_api = xla_bridge.register_plugin(BACKEND, priority=PRIORITY, library_path=plan["library"], options=options)
    logger.debug("registered backend %r from %s (the plan of the last start)", BACKEND, plan["library"])
    if plan["extension"] is None:
        return
    import importlib

    try:
        extension = importlib.import_module(f"{PLUGIN_PACKAGE}.rocm_plugin_extension")
    except ImportError:
        return
    cause = register_extension(extension, c_api, plan["extension_missing"], xla_client)
    if cause is not None:
        logger.warning("ROCm backend: %s", plan["extension_lost"].replace("{cause}", cause))


def register_extension(extension: Any, c_api: Any, missing: str | None, xla_client: Any) -> str | None:
    """Hand the extension's custom calls and FFI types to jaxlib for platform ROCM; the cause if not all went.
    `missing`: what the library lacks for it (then no handler is installed: jaxlib would raise on every ROCM
    registration, queued or later)."""
    if missing:
        return missing
    try:
        xla_client.register_custom_type_handler(XLA_PLATFORM, functools.partial(extension.register_custom_type, c_api))
        xla_client.register_custom_call_handler(
            XLA_PLATFORM, functools.partial(extension.register_custom_call_target, c_api)
        )
        for name, value in extension.ffi_types().items():
            xla_client.register_custom_type(name, value, platform=XLA_PLATFORM)
        for name, value in extension.ffi_handlers().items():
            xla_client.register_custom_call_target(name, value, platform=XLA_PLATFORM, api_version=1)
    except Exception as error:  # noqa: BLE001 - jaxlib raises its own runtime error types
        _withdraw_handlers(xla_client, XLA_PLATFORM)
        return f"{type(error).__name__}: {error}"
    return None


def _withdraw_handlers(xla_client: Any, platform: str) -> None:
    """Take back handlers that failed, so later ROCM registrations queue instead of raising."""
    name = getattr(xla_client, "xla_platform_names", {}).get(platform, platform)
    for table in ("_custom_callback_handler", "_custom_type_id_handler"):
        handlers = getattr(xla_client, table, None)
        if isinstance(handlers, dict):
            handlers.pop(name, None)
