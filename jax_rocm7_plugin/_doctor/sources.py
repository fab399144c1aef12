"""The readers of the machine's other sources of configuration, as engine readers the rule families read
(rule_needs.py, rule_references.py, rule_providers.py, rule_effective.py): the kernel, this process's limits and
cgroup, the Python environment, the runtimes it would map, the installs against their manifests, and the folders
the stack writes. Each runs under its own deadline; one that runs
out gives None (unknown), and no rule judges what is unknown."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._machine.kernel import KernelFacts, read_kernel
from jax_rocm7_plugin._machine.manifests import ManifestCheck, read_manifests
from jax_rocm7_plugin._machine.process_limits import ProcessLimits, read_process_limits
from jax_rocm7_plugin._machine.python_env import PythonEnv, read_python_env
from jax_rocm7_plugin._machine.runtime_providers import Providers, read_runtime_providers
from jax_rocm7_plugin._machine.write_dirs import WriteDirs, read_write_dirs
from jax_rocm7_plugin._policy.machine_needs import manifest_policy
from jax_rocm7_plugin._safe_io import Deadline, with_deadline

READERS = RuleSet("sources")
READ_SECONDS = 5.0
T = TypeVar("T")


def _in_time(probe: Callable[[], T]) -> T | None:
    """`probe` under the readers' deadline; None (unknown) where it runs out."""
    try:
        return with_deadline(probe, READ_SECONDS)
    except Deadline:
        return None


@READERS.rule("read", reads=("settings",), gives="kernel")
def _kernel(facts: Mapping[str, Any]) -> KernelFacts | None:
    root = facts["settings"].sysroot
    return _in_time(lambda: read_kernel(root))


@READERS.rule("read", reads=("settings",), gives="process-limits")
def _process_limits(facts: Mapping[str, Any]) -> ProcessLimits | None:
    root = facts["settings"].sysroot
    return _in_time(lambda: read_process_limits(root))


@READERS.rule("read", reads=("settings", "checked"), gives="python-env")
def _python_env(facts: Mapping[str, Any]) -> PythonEnv | None:
    """The environment the doctor runs in: the one jax runs in when the doctor is run as the README says. Read only
    on a machine with AMD GPUs (what it costs, 20 ms and more for what its native code needs, buys nothing where the
    stack will not run)."""
    machine = facts["checked"].facts.machine
    if machine is None or not machine.topology.gpus:
        return None
    root = str(facts["settings"].sysroot)
    return _in_time(lambda: read_python_env(root=root))


@READERS.rule("read", reads=("settings",), gives="write-dirs")
def _write_dirs(facts: Mapping[str, Any]) -> WriteDirs | None:
    settings = facts["settings"]
    return _in_time(lambda: read_write_dirs(settings.sysroot, settings.environ or {}))


@READERS.rule("read", reads=("python-env", "checked", "settings"), gives="runtime-providers")
def _runtime_providers(facts: Mapping[str, Any]) -> Providers | None:
    env: PythonEnv | None = facts["python-env"]
    settings = facts["settings"]
    runtime = facts["checked"].facts.runtime
    closure = runtime.dependencies.found if runtime is not None and runtime.dependencies is not None else {}
    return _in_time(lambda: read_runtime_providers(env, closure, settings.sysroot, settings.ld_library_path))


@READERS.rule("read", reads=("python-env", "settings"), gives="manifests")
def _manifests(facts: Mapping[str, Any]) -> tuple[ManifestCheck, ...] | None:
    """The stack's installed files against their packages' manifests, on a machine with AMD GPUs (the Python
    environment is read there only)."""
    env: PythonEnv | None = facts["python-env"]
    if env is None:
        return None
    root = facts["settings"].sysroot
    return _in_time(lambda: read_manifests(root, env, manifest_policy()))
