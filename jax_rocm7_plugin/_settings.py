"""The process environment, read once into a typed record, each value validated where it is read.

The variables the checks consult are read here, through the one reader of `_environment` (where each is
declared with its meaning, grammar and default); probes receive typed fields. A value that cannot be used
becomes a finding kept in the record, yielded by the check pipeline at its place in the order of checks.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._names import BACKEND
from jax_rocm7_plugin._record import NamedTuple

read = _environment.read

SYSROOT = _environment.SYSROOT
PJRT_LIBRARY = _environment.PJRT_LIBRARY
ROCM_PATH = "ROCM_PATH"
HSA_OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
HSA_XNACK = "HSA_XNACK"  # "1" turns XNACK (retry on page faults) on where the GPU has it; off by default
ROCR_VISIBLE = "ROCR_VISIBLE_DEVICES"
HIP_VISIBLE = "HIP_VISIBLE_DEVICES"
CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"
GPU_ORDINAL = "GPU_DEVICE_ORDINAL"
LOAD_TIMEOUT = _environment.LOAD_TIMEOUT
DEFAULT_LOAD_TIMEOUT = _environment.DEFAULT_LOAD_TIMEOUT
# The variables jaxlib reads when it builds GPU client options.
XLA_CLIENT_VARIABLES = (
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB",
    "XLA_PYTHON_CLIENT_ABORT_COLLECTIVES_ON_FAILURE",
    "XLA_PYTHON_CLIENT_USE_TFRT_GPU_CLIENT",
)
# What changes the outcome of loading a shared object besides the file itself (load verdict cache key).
LOAD_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", ROCM_PATH, "HIP_PATH", HSA_OVERRIDE, "HIP_PLATFORM")
ALLOCATORS = ("default", "platform", "bfc", "cuda_async", "vmm")
_BOOLEAN_WORDS = ("true", "True", "1", "false", "False", "0")
# jax's platform aliases (xla_bridge._platform_aliases): "gpu" means any of these. Used where jax is not
# imported (the doctor); where it is, `rocm_in_platforms` asks jax (a test keeps the two equal).
PLATFORM_ALIASES: dict[str, tuple[str, ...]] = {"gpu": ("cuda", "rocm", "oneapi")}
# The variables known issues and their workarounds name (_policy/known_issues.json) are kept by prefix, so the
# data names them once: a test checks that every variable the data names starts with one of these.
# The math libraries' folder variables (_policy/math_libraries.json) too.
RUNTIME_VARIABLE_PREFIXES = (
    "HSA_",
    "HIP_",
    "ROCR_",
    "ROCPROFILER_",
    "DEBUG_HIP_",
    "AMD_",
    "GPU_",
    "JAX_ROCM_",
    "ROCBLAS_",
    "HIPBLASLT_",
    "MIOPEN_",
)
RUNTIME_VARIABLES = ("XLA_FLAGS",)


class DeviceSelection(NamedTuple):
    """The device-selection variables, as set (None: unset; "" is a value and hides every GPU)."""

    rocr: str | None = None  # ROCR_VISIBLE_DEVICES
    hip: str | None = None  # HIP_VISIBLE_DEVICES
    cuda: str | None = None  # CUDA_VISIBLE_DEVICES (HIP honours it when HIP_VISIBLE_DEVICES is unset)
    ordinal: str | None = None  # GPU_DEVICE_ORDINAL


class Settings(NamedTuple):
    """What the environment says, validated. Built by `read_settings`; never mutated."""

    sysroot: Path  # machine files are read under it ("/" unless JAX_ROCM_SYSROOT or --sysroot)
    pjrt_library: Path | None = None  # JAX_ROCM_PJRT_LIBRARY, when usable (absolute)
    library_named_by: str = PJRT_LIBRARY  # what the user gave the library with: the variable, or "--library"
    rocm_path: str | None = None  # ROCM_PATH as given (a machine path; may be bad, see path_findings)
    ld_library_path: tuple[str, ...] = ()  # absolute entries only: ld.so reads others against the cwd
    devices: DeviceSelection = DeviceSelection()
    hsa_override: str | None = None  # HSA_OVERRIDE_GFX_VERSION
    xla_client: tuple[tuple[str, str], ...] = ()  # the XLA client variables that are set
    platforms: str | None = None  # JAX_PLATFORMS, or jax's jax_platforms setting where the loader has it
    runfiles_dir: str | None = None  # Bazel's RUNFILES_DIR / RUNFILES_MANIFEST_FILE (development runs)
    runfiles_manifest: str | None = None
    cache_dir: Path | None = None  # load verdicts; None where no absolute XDG_CACHE_HOME or HOME
    load_timeout: float = DEFAULT_LOAD_TIMEOUT  # JAX_ROCM_LOAD_TIMEOUT, seconds
    load_identity: tuple[str, ...] = ()  # NAME=value of LOAD_VARIABLES
    path_findings: tuple[Finding, ...] = ()  # the plugin's path variables that cannot be used
    xla_client_findings: tuple[Finding, ...] = ()
    sysroot_finding: Finding | None = None  # JAX_ROCM_SYSROOT names no directory: nothing can be read
    xnack: str | None = None  # HSA_XNACK as set
    device_lib_path: str | None = None  # HIP_DEVICE_LIB_PATH: where XLA looks for ROCm's device bitcode first
    search_path: tuple[str, ...] = ()  # PATH's absolute entries (where an external ld.lld is looked for)
    runtime_environment: tuple[tuple[str, str], ...] = ()  # ROCm runtime variables and XLA_FLAGS, as set
    job_hosts: int | None = None  # hosts the launcher says this job spans (Slurm, Open MPI); None: no launcher
    # The mapping these settings were read from (not a copy: os.environ itself in the loader), so that the doctor
    # can read the machine again with a fix's variables changed (_doctor/proof.py).
    environ: Mapping[str, str] | None = None
    # Numeric group ids the process is assumed to gain (only the doctor's check of a group fix sets them).
    groups_added: tuple[int, ...] = ()


def read_settings(
    environ: Mapping[str, str],
    *,
    sysroot: Path | None = None,
    platforms: str | None = None,
    library: Path | None = None,
) -> Settings:
    """The one read of the environment. `sysroot` (the doctor's --sysroot) replaces JAX_ROCM_SYSROOT;
    `platforms` (jax's own setting, which the loader reads from jax) replaces JAX_PLATFORMS; `library` (the
    CLI's --library) replaces JAX_ROCM_PJRT_LIBRARY, made absolute as the variable must be."""
    named_by = PJRT_LIBRARY
    if library is not None:
        environ, named_by = {**environ, PJRT_LIBRARY: str(library.absolute())}, "--library"
    found: list[Finding] = []
    bad_root = None
    if sysroot is None:
        bad_root = _sysroot_finding(read(SYSROOT, environ) or "")
        found.extend([bad_root] if bad_root is not None else [])
        sysroot = Path(read(SYSROOT, environ) or "/")
    library = read(PJRT_LIBRARY, environ) or None
    if library is not None and not library.startswith("/"):
        problem = "is a relative path (it would depend on the working directory)"
        found.append(catalog.environment_variable_invalid(PJRT_LIBRARY, library, problem, blocks=True))
    rocm_path = read(ROCM_PATH, environ) or None
    if rocm_path is not None and not any(f.blocks_rocm for f in found):
        problem = None
        if not rocm_path.startswith("/"):
            problem = "is not an absolute path; ROCm is looked for in the usual places instead"
        elif not os.path.isdir(sysroot / rocm_path.lstrip("/")):
            problem = "is not a directory; ROCm is looked for in the usual places instead"
        if problem is not None:
            found.append(catalog.environment_variable_invalid(ROCM_PATH, rocm_path, problem, blocks=False))
    load_timeout = _load_timeout(read(LOAD_TIMEOUT, environ) or "", found)
    found.extend(plugin_variable_findings(environ))
    xla_client = tuple((name, value) for name in XLA_CLIENT_VARIABLES if (value := read(name, environ)) is not None)
    problems = xla_client_problems(dict(xla_client))
    return Settings(
        sysroot=sysroot,
        pjrt_library=Path(library) if library is not None and library.startswith("/") else None,
        library_named_by=named_by,
        rocm_path=rocm_path,
        ld_library_path=tuple(p for p in (read("LD_LIBRARY_PATH", environ) or "").split(":") if p.startswith("/")),
        devices=device_selection(environ),
        hsa_override=read(HSA_OVERRIDE, environ),
        xnack=read(HSA_XNACK, environ),
        device_lib_path=read("HIP_DEVICE_LIB_PATH", environ) or None,
        search_path=tuple(p for p in (read("PATH", environ) or "").split(":") if p.startswith("/")),
        runtime_environment=tuple(_environment.matching((*RUNTIME_VARIABLE_PREFIXES, *RUNTIME_VARIABLES), environ)),
        job_hosts=job_hosts(environ),
        xla_client=xla_client,
        platforms=platforms if platforms is not None else read("JAX_PLATFORMS", environ),
        runfiles_dir=read("RUNFILES_DIR", environ) or None,
        runfiles_manifest=read("RUNFILES_MANIFEST_FILE", environ) or None,
        cache_dir=_cache_dir(environ),
        load_timeout=load_timeout,
        load_identity=tuple(f"{name}={read(name, environ) or ''}" for name in LOAD_VARIABLES),
        path_findings=tuple(found),
        sysroot_finding=bad_root,
        xla_client_findings=(
            (catalog.xla_client_env_invalid("; ".join(problems), xla_client_evidence(xla_client)),) if problems else ()
        ),
        environ=environ,
    )


def device_selection(environ: Mapping[str, str]) -> DeviceSelection:
    """The device-selection variables of an environment (this process's, or one a cluster record carries)."""
    return DeviceSelection(*(read(name, environ) for name in (ROCR_VISIBLE, HIP_VISIBLE, CUDA_VISIBLE, GPU_ORDINAL)))


job_hosts = _environment.job_hosts  # stated in the foundation: the warm path's plan key reads it too


def _load_timeout(value: str, found: list[Finding]) -> float:
    """JAX_ROCM_LOAD_TIMEOUT in seconds; a value that is not a positive number is named and the default used."""
    if not value:
        return DEFAULT_LOAD_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if 0 < seconds < float("inf"):
        return seconds
    problem = f"is not a positive number of seconds; the default, {DEFAULT_LOAD_TIMEOUT:g} s, is used"
    found.append(catalog.environment_variable_invalid(LOAD_TIMEOUT, value, problem, blocks=False))
    return DEFAULT_LOAD_TIMEOUT


def _sysroot_finding(value: str) -> Finding | None:
    """JAX_ROCM_SYSROOT when it cannot be a machine's root (nothing under it could be read)."""
    if not value:
        return None
    if not value.startswith("/"):
        problem = "is not an absolute path"
    elif not os.path.isdir(value):
        problem = "does not exist" if not os.path.lexists(value) else "is not a directory"
    else:
        return None
    return catalog.environment_variable_invalid(SYSROOT, value, problem, blocks=True)


def plugin_variable_findings(environ: Mapping[str, str]) -> list[Finding]:
    """The plugin's own variables (JAX_ROCM_*) that are set but unknown or invalid, each named with what is valid
    (warnings: the default is used). The three read above are checked there, against the filesystem too."""
    return [
        catalog.environment_variable_invalid(p.name, p.value, p.problem, blocks=False, fix=p.fix)
        for p in _environment.problems(environ, skip=(SYSROOT, PJRT_LIBRARY, LOAD_TIMEOUT))
    ]


def _cache_dir(environ: Mapping[str, str]) -> Path | None:
    root = _environment.cache_root(environ)
    return root / "load-verdicts" if root is not None else None


def platforms_findings(settings: Settings) -> list[Finding]:
    """jax-platforms-excludes-rocm, read without importing jax."""
    value = settings.platforms or ""
    if rocm_in_platforms(value):
        return []
    return [catalog.jax_platforms_excludes_rocm(value, (f"JAX_PLATFORMS={value!r}",))]


def rocm_in_platforms(platforms: str | None) -> bool:
    """The one reading of JAX_PLATFORMS (or jax's jax_platforms): does it leave rocm in? Unset or blank: yes."""
    if not platforms or not platforms.strip():
        return True
    xla_bridge = sys.modules.get("jax._src.xla_bridge")
    expand = getattr(xla_bridge, "expand_platform_alias", None)  # jax's own table, where jax is imported
    for name in (p.strip().lower() for p in platforms.split(",") if p.strip()):
        aliases = expand(name) if expand is not None else PLATFORM_ALIASES.get(name, (name,))
        if BACKEND in aliases:
            return True
    return False


def xla_client_problems(values: Mapping[str, str]) -> list[str]:
    """What is wrong with the XLA client variables, checked without jaxlib (the doctor imports no jax).

    Stricter than jaxlib where jaxlib silently misreads: it takes any
    XLA_PYTHON_CLIENT_PREALLOCATE other than false/False/0 as true (so FALSE
    preallocates), and passes a memory fraction of 0 or 1.5 on to the allocator.
    """
    problems: list[str] = []
    allocator = values.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default")
    if allocator.lower() not in ALLOCATORS:
        problems.append(f"XLA_PYTHON_CLIENT_ALLOCATOR={allocator!r} is not one of {', '.join(ALLOCATORS)}")
    new, old = values.get("XLA_CLIENT_MEM_FRACTION", ""), values.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
    if new and old:
        problems.append("XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are both set; keep the first")
    for name, value in (("XLA_CLIENT_MEM_FRACTION", new), ("XLA_PYTHON_CLIENT_MEM_FRACTION", old)):
        if value:
            try:
                fraction = float(value)
            except ValueError:
                problems.append(f"{name}={value!r} is not a number")
                continue
            if not 0.0 < fraction <= 1.0:
                problems.append(f"{name}={value!r} is outside (0, 1]")
    preallocate = values.get("XLA_PYTHON_CLIENT_PREALLOCATE", "")
    if preallocate and preallocate not in _BOOLEAN_WORDS:
        problems.append(
            f"XLA_PYTHON_CLIENT_PREALLOCATE={preallocate!r} is not true/false/1/0 (jaxlib would read it as true)"
        )
    for name in (
        "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB",
        "XLA_PYTHON_CLIENT_ABORT_COLLECTIVES_ON_FAILURE",
        "XLA_PYTHON_CLIENT_USE_TFRT_GPU_CLIENT",
    ):
        value = values.get(name, "")
        if value and not value.strip().isdigit():
            problems.append(f"{name}={value!r} is not a non-negative integer")
    return problems


def xla_client_evidence(xla_client: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The XLA client variables that are set, as evidence lines."""
    return tuple(f"{name}={value!r}" for name, value in xla_client)
