"""Every environment variable the plugin reads, declared once (meaning, grammar, default), and the one reader.

The plugin's own variables (JAX_ROCM_*), and those of jax, XLA, the ROCm runtime, the launchers and the system
that it consults, are each a `Variable` here; variables consulted by prefix (every HSA_* a known issue may name,
every SLURM_* the job record keeps) belong to a declared `Family`. Code reads the environment only through
`read`, `setting` and `matching`; a name that is neither declared nor in a family raises `UndeclaredVariable`,
and tests/unit/test_environment.py fails on any read that bypasses them (a test also ties the documentation to
these declarations). The doctor names every JAX_ROCM_* variable that is set but unknown or invalid (`problems`).

Stdlib only and cheap to import (records built at import, nothing parsed until asked): the warm path and the
extension stubs read through it inside `import jax`.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:  # for type checkers only: building Literal types costs the warm path time at import
    from typing import Literal

    Owner = Literal["plugin", "build", "tests", "jax", "XLA", "ROCm", "RCCL", "launcher", "system"]
    # How a value is read. A plugin variable's grammar decides what `setting` returns and what `problems` says.
    Grammar = Literal[
        "switch",  # on or off, in the usual words (TRUE_WORDS, FALSE_WORDS)
        "seconds",  # a number of seconds above 0
        "seconds-or-off",  # the same, or "off"
        "choice",  # one of `choices`, any case
        "absolute-path",
        "path-list",  # ':'-separated
        "names",  # ','-separated
        "count",  # a whole number above 0
        "text",  # read as given
    ]
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
OWN_PREFIX = "JAX_ROCM_"


class Variable(NamedTuple):
    name: str
    owner: Owner
    grammar: Grammar
    default: str  # what unset means, in words a user reads ("" for a plugin variable: nothing)
    meaning: str
    choices: tuple[str, ...] = ()
    internal: bool = False  # set by the plugin for a process it starts; not for users, so not in the README


class Family(NamedTuple):
    """Variables consulted by prefix: recorded, compared or named by data (known issues, math libraries)."""

    prefix: str
    owner: Owner
    meaning: str


class UndeclaredVariable(KeyError):
    """A read of a variable this module does not declare: declare it (with its meaning) before reading it."""


class Setting(NamedTuple):
    """A plugin variable read by its grammar: the value to use (the default where unset or invalid), and what
    is wrong with the value given (None: nothing)."""

    value: Any
    problem: str | None = None


# --- the plugin's own ----------------------------------------------------------------------------------------

PJRT_LIBRARY = "JAX_ROCM_PJRT_LIBRARY"
SYSROOT = "JAX_ROCM_SYSROOT"
LOAD_TIMEOUT = "JAX_ROCM_LOAD_TIMEOUT"
WARM = "JAX_ROCM_WARM"
WORKAROUNDS = "JAX_ROCM_WORKAROUNDS"
JOB_CHECK = "JAX_ROCM_JOB_CHECK"
JOB_CHECK_TIMEOUT = "JAX_ROCM_JOB_CHECK_TIMEOUT"
HANG_TIMEOUT = "JAX_ROCM_HANG_TIMEOUT"
HANG_ACTION = "JAX_ROCM_HANG_ACTION"
HANG_PLATFORMS = "JAX_ROCM_HANG_PLATFORMS"
COURIER_PARENT = "JAX_ROCM_COURIER_PARENT"
RCCL_LOG_DIR = "JAX_ROCM_RCCL_LOG_DIR"
XDIST_GPUS = "JAX_ENABLE_ROCM_XDIST"

# A cold load of the published 459-503 MB libraries takes ~0.3 s from local disk (benchmarks/cold_load.py); 100
# times that leaves room for network filesystems and eight processes of a node loading at once.
DEFAULT_LOAD_TIMEOUT = 30.0
DEFAULT_JOB_CHECK_TIMEOUT = 120.0
DEFAULT_HANG_TIMEOUT = 600.0
MAX_SECONDS = 1e7  # about four months: a longer wait is a typo


def _v(
    name: str,
    owner: str,
    grammar: str,
    default: str,
    meaning: str,
    choices: tuple[str, ...] = (),
    *,
    internal: bool = False,
) -> tuple[Any, ...]:
    """A declaration as a plain tuple, in Variable's field order (the record is made only when asked for)."""
    return (name, owner, grammar, default, meaning, choices, internal)


_PLUGIN = (
    _v(PJRT_LIBRARY, "plugin", "absolute-path", f"the installed {PJRT_DISTRIBUTION} library",
             "use this PJRT library instead of the installed one"),
    _v(SYSROOT, "plugin", "absolute-path", "/",
             "read /sys, /dev, /proc, /etc and /opt/rocm under this directory (tests, diagnosis of an image)"),
    _v(LOAD_TIMEOUT, "plugin", "seconds", f"{DEFAULT_LOAD_TIMEOUT:g}",
             "seconds the child-process load test of the library may take"),
    _v(WARM, "plugin", "switch", "on",
             "off: check everything at every start instead of using the plan of the last one"),
    _v(WORKAROUNDS, "plugin", "switch", "on", "off: the loader sets no workaround of a known issue"),
    _v(JOB_CHECK, "plugin", "choice", "error",
             "what a process does when the job's processes differ: refuse to start, warn, or publish nothing",
             ("error", "warn", "off")),
    _v(JOB_CHECK_TIMEOUT, "plugin", "seconds", f"{DEFAULT_JOB_CHECK_TIMEOUT:g}",
             "seconds the job check waits for the other processes, then starts anyway"),
    _v(HANG_TIMEOUT, "plugin", "seconds-or-off", f"{DEFAULT_HANG_TIMEOUT:g}",
             "seconds without movement before the processes compare where they are; off: no watcher"),
    _v(HANG_ACTION, "plugin", "choice", "report",
             "report (nothing is killed) or exit (every process leaves with code 124) when a job hangs",
             ("report", "exit")),
    _v(HANG_PLATFORMS, "plugin", "names", "",
             "backends besides rocm whose jobs arm the hang watcher (tests: cpu)"),
    _v(COURIER_PARENT, "plugin", "count", "",
             "the pid of the `cluster` process that started a courier, which ends when that process is gone",
             internal=True),
    _v(RCCL_LOG_DIR, "plugin", "absolute-path", "",
             "where `cluster --deep` on GPUs has RCCL write its INIT/NET lines, a file per process (NCCL_DEBUG_FILE)",
             internal=True),
    _v(XDIST_GPUS, "plugin", "count", "",
             "pytest_gpu_isolation: the number of GPUs to spread pytest-xdist workers over"),
)  # fmt: skip

# Read by the build (build/, setup_*.py, ci/) and the tests, never at run time; declared so that the doctor does
# not call them unknown where a developer has them set.
_DEVELOPMENT = (
    _v("JAX_ROCM_STAGING", "build", "absolute-path", "", "the folder setup_*.py assemble a wheel from",
             internal=True),
    _v("JAX_ROCM_BUILD_CACHE", "build", "absolute-path", "a folder under ~/.cache",
             "the build's checkouts and Bazel workspaces", internal=True),
    _v("JAX_ROCM_PYPI_JSON", "build", "text", "https://pypi.org/pypi/{name}/json",
             "where the release tooling reads PyPI's JSON API", internal=True),
    _v("JAX_ROCM_JAX_MODULE_URL", "build", "text", "jax's MODULE.bazel on GitHub",
             "where the build reads jax's MODULE.bazel for a commit", internal=True),
    _v("JAX_ROCM_GPU_COUNT", "build", "count", "the GPUs the doctor finds",
             "ci/run_pytest_rocm.sh: GPUs to spread the rocm tests over", internal=True),
    _v("JAX_ROCM_TEST_CACHE", "tests", "absolute-path", "a folder under ~/.cache",
             "the tests' wheels and venvs", internal=True),
    _v("JAX_ROCM_CORPUS_MARK", "tests", "text", "", "marks a test's processes", internal=True),
)  # fmt: skip

_OTHERS = (
    # jax and jaxlib
    _v("JAX_PLATFORMS", "jax", "names", "every platform", "the backends jax may use, in order"),
    _v("JAX_COORDINATOR_ADDRESS", "jax", "text", "", "jax.distributed's coordinator (host:port)"),
    _v("JAX_COORDINATOR_BIND_ADDRESS", "jax", "text", "[::]:port", "where the coordination service listens"),
    _v("JAX_LOCAL_DEVICE_IDS", "jax", "names", "", "the local devices jax.distributed gives this process"),
    _v("XLA_FLAGS", "XLA", "text", "", "XLA's flags"),
    _v("XLA_PYTHON_CLIENT_ALLOCATOR", "jax", "text", "default", "the GPU client's allocator"),
    _v("XLA_CLIENT_MEM_FRACTION", "jax", "text", "0.75", "the share of GPU memory preallocated"),
    _v("XLA_PYTHON_CLIENT_MEM_FRACTION", "jax", "text", "0.75", "the older name of XLA_CLIENT_MEM_FRACTION"),
    _v("XLA_PYTHON_CLIENT_PREALLOCATE", "jax", "text", "true", "whether GPU memory is preallocated"),
    _v("XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB", "jax", "text", "0", "memory set aside for collectives"),
    _v("XLA_PYTHON_CLIENT_ABORT_COLLECTIVES_ON_FAILURE", "jax", "text", "0", "abort collectives on a failure"),
    _v("XLA_PYTHON_CLIENT_USE_TFRT_GPU_CLIENT", "jax", "text", "0", "use the TFRT GPU client"),
    _v("TF_CPP_MIN_LOG_LEVEL", "XLA", "text", "1", "the least severe log line XLA writes"),
    _v("TEST_TMPDIR", "XLA", "text", "", "the first folder XLA tries for its compile-time files"),
    _v("TMPDIR", "XLA", "text", "/tmp", "where XLA writes each GPU kernel's compile-time files, if a folder"),
    _v("TMP", "XLA", "text", "/tmp", "the folder XLA tries after TMPDIR for its compile-time files"),
    _v("TEMP", "MIOpen", "text", "/tmp", "std::filesystem's temporary folder after TMPDIR, TMP (MIOpen's fallback)"),
    _v("TEMPDIR", "MIOpen", "text", "/tmp", "std::filesystem's temporary folder after TEMP (MIOpen's fallback)"),
    # the ROCm runtime
    _v("ROCM_PATH", "ROCm", "absolute-path", "/opt/rocm", "the ROCm install"),
    _v("HIP_PATH", "ROCm", "absolute-path", "", "HIP's install (changes what a library loads)"),
    _v("HIP_PLATFORM", "ROCm", "text", "amd", "HIP's platform"),
    _v("HIP_DEVICE_LIB_PATH", "ROCm", "absolute-path", "", "where XLA looks for ROCm's device bitcode first"),
    _v("HSA_OVERRIDE_GFX_VERSION", "ROCm", "text", "", "the GPU processor ROCr reports instead of the real"),
    _v("HSA_XNACK", "ROCm", "text", "0", "1: retry on page faults where the GPU can"),
    _v("ROCR_VISIBLE_DEVICES", "ROCm", "names", "every GPU", "the GPUs ROCr exposes"),
    _v("HIP_VISIBLE_DEVICES", "ROCm", "names", "every GPU", "the GPUs HIP exposes, of ROCr's"),
    _v("CUDA_VISIBLE_DEVICES", "ROCm", "names", "every GPU", "HIP honours it where HIP_VISIBLE_DEVICES is unset"),
    _v("GPU_DEVICE_ORDINAL", "ROCm", "names", "every GPU", "the GPUs the OpenCL-era runtime exposes"),
    _v("NCCL_SOCKET_IFNAME", "RCCL", "text", "", "the network interfaces RCCL's sockets use"),
    _v("GLOO_SOCKET_IFNAME", "jax", "text", "", "the network interface gloo (CPU collectives) uses"),
    # launchers
    _v("SLURM_JOB_ID", "launcher", "text", "", "set in a Slurm allocation"),
    _v("SLURM_JOB_NUM_NODES", "launcher", "count", "", "the nodes of the Slurm job"),
    _v("SLURM_NNODES", "launcher", "count", "", "the older name of SLURM_JOB_NUM_NODES"),
    _v("SLURM_STEP_NODELIST", "launcher", "text", "", "the hosts of the job step"),
    _v("SLURM_JOB_NODELIST", "launcher", "text", "", "the hosts of the job"),
    _v("SLURM_STEP_TASKS_PER_NODE", "launcher", "text", "", "tasks per host of the step"),
    _v("SLURM_TASKS_PER_NODE", "launcher", "text", "", "tasks per host of the job"),
    _v("SLURM_NTASKS", "launcher", "count", "", "the step's tasks"),
    _v("SLURM_PROCID", "launcher", "text", "", "this task's rank"),
    _v("SLURM_LOCALID", "launcher", "text", "", "this task's rank on its host"),
    _v("OMPI_COMM_WORLD_SIZE", "launcher", "count", "", "Open MPI's world size"),
    _v("OMPI_COMM_WORLD_LOCAL_SIZE", "launcher", "count", "", "Open MPI's ranks on this host"),
    _v("OMPI_COMM_WORLD_RANK", "launcher", "text", "", "this rank"),
    _v("OMPI_COMM_WORLD_LOCAL_RANK", "launcher", "text", "", "this rank on its host"),
    _v("OMPI_MCA_orte_hnp_uri", "launcher", "text", "", "set by Open MPI 4's mpirun (ORTE)"),
    _v("KUBERNETES_SERVICE_HOST", "launcher", "text", "", "set in every Kubernetes pod"),
    _v("JOB_COMPLETION_INDEX", "launcher", "text", "", "an indexed Kubernetes Job's index"),
    _v("PYTEST_XDIST_WORKER", "launcher", "text", "", "pytest-xdist's worker id (gw0, gw1, ...)"),
    # the system
    _v("OMP_NUM_THREADS", "system", "count", "every CPU", "OpenMP's threads per process"),
    _v("PATH", "system", "path-list", "", "where programs (an external ld.lld) are found"),
    _v("LD_LIBRARY_PATH", "system", "path-list", "", "folders ld.so searches first"),
    _v("LD_PRELOAD", "system", "text", "", "libraries ld.so loads first"),
    _v("PYTHONPATH", "system", "path-list", "", "folders Python imports from first"),
    _v("HOME", "system", "absolute-path", "", "the cache's home where XDG_CACHE_HOME is unset"),
    _v("XDG_CACHE_HOME", "system", "absolute-path", "$HOME/.cache", "the plugin's caches live under it"),
    _v("HOSTNAME", "system", "text", "", "the host's name as the shell or a pod sets it"),
    _v("VIRTUAL_ENV", "system", "absolute-path", "", "the active virtual environment"),
    _v("CONDA_PREFIX", "system", "absolute-path", "", "the active conda environment"),
    _v("RUNFILES_DIR", "system", "absolute-path", "", "Bazel's runfiles (development runs)"),
    _v("RUNFILES_MANIFEST_FILE", "system", "absolute-path", "", "Bazel's runfiles manifest"),
    _v("container", "system", "text", "", "set by podman and systemd-nspawn inside a container"),
    _v("SINGULARITY_NAME", "system", "text", "", "set inside a Singularity container"),
    _v("APPTAINER_NAME", "system", "text", "", "set inside an Apptainer container"),
)  # fmt: skip

FAMILIES = (
    ("JAX_", "jax", "jax's configuration"),
    ("XLA_", "XLA", "XLA's and jaxlib's configuration"),
    ("TF_", "XLA", "XLA's logging and TensorFlow-era switches XLA still reads"),
    ("PJRT_", "XLA", "PJRT's configuration"),
    ("HSA_", "ROCm", "ROCr's configuration"),
    ("HIP_", "ROCm", "HIP's configuration"),
    ("ROCR_", "ROCm", "ROCr's configuration"),
    ("ROCM_", "ROCm", "the ROCm install"),
    ("HCC_", "ROCm", "the old HIP compiler's configuration"),
    ("ROCPROFILER_", "ROCm", "rocprofiler's configuration"),
    ("DEBUG_HIP_", "ROCm", "HIP's debugging switches"),
    ("AMD_", "ROCm", "the ROCm runtime and comgr"),
    ("GPU_", "ROCm", "the ROCm runtime's GPU settings"),
    ("ROCBLAS_", "ROCm", "rocBLAS's configuration"),
    ("HIPBLASLT_", "ROCm", "hipBLASLt's configuration"),
    ("MIOPEN_", "ROCm", "MIOpen's configuration"),
    ("TENSILE_", "ROCm", "Tensile's configuration"),
    ("RCCL_", "RCCL", "RCCL's configuration"),
    ("NCCL_", "RCCL", "RCCL reads NCCL's variables"),
    ("GLOO_", "jax", "gloo's configuration (CPU collectives)"),
    ("SLURM_", "launcher", "Slurm's job description"),
    ("OMPI_", "launcher", "Open MPI's job description"),
    ("PMI_", "launcher", "PMI's job description (MPICH, Cray MPICH, Intel MPI)"),
    ("PMIX_", "launcher", "PMIx's job description"),
    ("MPI_", "launcher", "an MPI's job description"),
    ("MPICH_", "launcher", "MPICH's configuration"),
    ("UCX_", "RCCL", "UCX's transports (RDMA)"),
    ("FI_", "RCCL", "libfabric's transports (RDMA)"),
    ("RUNFILES_", "system", "Bazel's runfiles"),
    ("JAX_ROCM_", "plugin", "the plugin's own (each declared above: any other is a mistake the doctor names)"),
)

# The names alone are what a read checks: the records are built only where one is asked for (the doctor, a
# setting's grammar), so that the warm path and the extension stubs pay a frozenset, not 80 records.
_NAMES = frozenset(v[0] for v in (*_PLUGIN, *_DEVELOPMENT, *_OTHERS))
_FAMILY_PREFIXES = tuple(f[0] for f in FAMILIES)


@functools.cache
def declared_variables() -> dict[str, Variable]:
    """Every declared variable by name."""
    return {v[0]: Variable(*v) for v in (*_PLUGIN, *_DEVELOPMENT, *_OTHERS)}


@functools.cache
def families() -> tuple[Family, ...]:
    return tuple(Family(*f) for f in FAMILIES)


def declared(name: str) -> bool:
    """Is `name` a declared variable, or one of a declared family (and not an unknown JAX_ROCM_ name)?"""
    if name in _NAMES:
        return True
    return name.startswith(_FAMILY_PREFIXES) and not name.startswith(OWN_PREFIX)


def read(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of a declared variable as set (None: unset; "" is a value), in `environ` (default: this
    process's environment, read now)."""
    if name not in _NAMES and not declared(name):
        raise UndeclaredVariable(f"{name} is read but not declared in {__name__}")
    return (os.environ if environ is None else environ).get(name)


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return read(name, environ) is not None


def matching(prefixes: Iterable[str], environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Every variable set whose name starts with one of `prefixes` (each a declared family's prefix or a
    declared name), sorted by name."""
    wanted = tuple(prefixes)
    for prefix in wanted:
        if prefix not in _NAMES and not any(prefix.startswith(p) for p in _FAMILY_PREFIXES):
            raise UndeclaredVariable(f"{prefix}* is read but no family of {__name__} holds it")
    return sorted((k, v) for k, v in (os.environ if environ is None else environ).items() if k.startswith(wanted))


def listed(names: Iterable[str], environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Every variable of `names` that is set, for the doctor's check of the variables the stack under jax reads:
    those names are declared by _policy/stack_variables*.json, generated from their readers' sources (hundreds,
    of families of their own: PAL_, ROC_, ROCPROF_, ...)."""
    source = os.environ if environ is None else environ
    return sorted((n, source[n]) for n in set(names) if n in source)


def job_hosts(environ: Mapping[str, str] | None = None) -> int | None:
    """How many hosts the launcher gives this job: Slurm's node count, else Open MPI's world size over its
    local size (tasks spread evenly); None outside a launcher or where the values are not numbers."""
    for name in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        value = read(name, environ) or ""
        if value.isdigit() and int(value) > 0:
            return int(value)
    world, local = read("OMPI_COMM_WORLD_SIZE", environ) or "", read("OMPI_COMM_WORLD_LOCAL_SIZE", environ) or ""
    if world.isdigit() and local.isdigit() and int(local) > 0:
        return max(1, -(-int(world) // int(local)))
    return None


def everything(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Every variable set, for the two readers that must see all of them: the report's redaction (a secret can
    be anywhere) and the loader's account of what it changed. Nothing else reads the environment whole."""
    return sorted((os.environ if environ is None else environ).items())


def cache_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """This plugin's cache ($XDG_CACHE_HOME, else ~/.cache, /jax-rocm7-plugin): load verdicts and start-up plans
    live there; None where neither gives an absolute base."""
    base = read("XDG_CACHE_HOME", environ) or ""
    if not base.startswith("/"):
        home = read("HOME", environ) or ""
        if not home.startswith("/"):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / PLUGIN_DISTRIBUTION


# --- the plugin's variables by their grammar -----------------------------------------------------------------


def setting(name: str, environ: Mapping[str, str] | None = None) -> Setting:
    """A plugin variable read by its grammar; an invalid value gives the default and one sentence."""
    variable = declared_variables()[name]
    raw = read(name, environ)
    default = _typed_default(variable)
    if raw is None or not raw.strip():
        return Setting(default)
    text = raw.strip()
    value = _parse(variable, text)
    if value is _INVALID:
        return Setting(default, f"{name}={raw!r} {_refusal(variable)}")
    return Setting(value)


def switch(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """A plugin switch: on unless set to one of FALSE_WORDS (an invalid value keeps the default, on)."""
    return bool(setting(name, environ).value)


# What a valid value is, in words, by grammar (those not listed: "a value").
_WANTS = {
    "seconds": "a number of seconds above 0",
    "seconds-or-off": "a number of seconds above 0, or off",
    "count": "a whole number above 0",
    "absolute-path": "an absolute path",
    "names": "a comma-separated list of names",
}


def wants(variable: Variable) -> str:
    """What a valid value of `variable` is, in words."""
    if variable.grammar == "switch":
        return f"one of {', '.join(TRUE_WORDS)} (on) or {', '.join(FALSE_WORDS)} (off)"
    if variable.grammar == "choice":
        return f"one of {', '.join(variable.choices)}"
    return _WANTS.get(variable.grammar, "a value")


class Problem(NamedTuple):
    """A JAX_ROCM_* variable that is set but unknown (`suggestion`: the declared name it most resembles), or set
    to a value its grammar refuses."""

    name: str
    value: str
    problem: str
    fix: str


def problems(environ: Mapping[str, str] | None = None, *, skip: Iterable[str] = ()) -> list[Problem]:
    """Every JAX_ROCM_* variable set that the plugin does not declare, or whose value it cannot use, by name.
    `skip`: variables the caller checks itself (with the filesystem, say)."""
    skipped = set(skip)
    found: list[Problem] = []
    for name, value in matching((OWN_PREFIX,), environ):
        if name in skipped:
            continue
        variable = declared_variables().get(name)
        if variable is None:
            import difflib

            own = [v.name for v in declared_variables().values() if v.owner == "plugin" and not v.internal]
            close = difflib.get_close_matches(name, own, n=1, cutoff=0.6)
            if close:
                problem, fix = f"is no variable of this plugin (did you mean {close[0]}?)", f"spell it {close[0]}"
            else:
                problem, fix = (
                    "is no variable of this plugin and does nothing",
                    f"unset it; the plugin reads {', '.join(own)}",
                )
            found.append(Problem(name, value, problem, fix))
            continue
        if variable.grammar not in ("absolute-path", "text") and setting(name, environ).problem is not None:
            found.append(Problem(name, value, _refusal(variable), f"unset {name} or set it to {wants(variable)}"))
    return found


_INVALID: Any = object()


def _refusal(variable: Variable) -> str:
    return f"is not {wants(variable)}: {variable.default or 'nothing'} is used"


def _typed_default(variable: Variable) -> Any:
    if variable.grammar == "switch":
        return variable.default != "off"
    if variable.grammar in ("seconds", "seconds-or-off"):
        return float(variable.default) if variable.default not in ("", "off") else None
    if variable.grammar == "names":
        return frozenset()
    if variable.grammar == "count":
        return None
    return variable.default or None


def _parse(variable: Variable, text: str) -> Any:
    grammar = variable.grammar
    lowered = text.lower()
    if grammar == "switch":
        return True if lowered in TRUE_WORDS else False if lowered in FALSE_WORDS else _INVALID
    if grammar == "seconds-or-off" and lowered == "off":
        return None
    if grammar in ("seconds", "seconds-or-off"):
        try:
            seconds = float(text)
        except ValueError:
            return _INVALID
        return seconds if math.isfinite(seconds) and 0 < seconds < MAX_SECONDS else _INVALID
    if grammar == "choice":
        return lowered if lowered in variable.choices else _INVALID
    if grammar == "count":
        return int(text) if text.isdigit() and int(text) > 0 else _INVALID
    if grammar == "names":
        return frozenset(p.strip().lower() for p in text.split(",") if p.strip())
    return text
