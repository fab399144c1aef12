"""jaxlib's ROCm extension modules: what each gives, where the wheel keeps it, how it is loaded.

jaxlib imports `jax_rocm7_plugin.<name>` for each name of EXTENSION_MODULES during `import jax`
(jaxlib/plugin_support.py), before any plugin is initialised. A wheel that carries them keeps
each real module in the private folder `_native/` and puts a two-line module under the public
name that calls `load_native`: it raises ImportError at once on a machine without a usable AMD
GPU (the loader's cheap probe, done once per process), or for another jaxlib release than the
modules were built for, and otherwise loads the real extension under the public name. jaxlib
skips a module whose import raises ImportError; a missing ROCm library is named once, at debug
level, with the capability it costs.
"""

from __future__ import annotations

import json
import logging
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

logger = logging.getLogger("jax_rocm7_plugin")

NATIVE_DIR = "_native"
BUILD_INFO = "build_info.json"  # in _native/: per-module provenance, the CPython and jaxlib they serve
# Module -> what jax cannot do on the GPU without it.
CAPABILITIES: dict[str, str] = {
    "rocm_plugin_extension": "ROCm custom calls",
    "_solver": "GPU linear algebra",
    "_linalg": "GPU linear algebra helpers",
    "_prng": "the GPU PRNG kernel",
    "_sparse": "GPU sparse matrices",
    "_hybrid": "GPU eigendecomposition (hybrid CPU/GPU)",
    "_rnn": "the MIOpen RNN",
    "_triton": "Pallas/Triton kernels",
}
EXTENSION_MODULES = tuple(CAPABILITIES)
_reported: set[str] = set()  # modules whose loss was logged already: once per process
_HERE = Path(__file__).resolve().parent


def native_dir() -> Path:
    return _HERE / NATIVE_DIR


def native_path(module: str) -> Path:
    return native_dir() / f"{module}.so"


def public_stub_source(module: str) -> str:
    """The module build.py writes under the public name for each native module it ships."""
    return (
        f'"""{CAPABILITIES[module]}: the ROCm extension {module} lives in {NATIVE_DIR}/ (see extensions.py)."""\n\n'
        "from jax_rocm7_plugin.extensions import load_native\n\n"
        "load_native(__name__)\n"
    )


def build_info() -> dict[str, Any] | None:
    """What build.py recorded about the shipped modules, or None for a wheel without them."""
    try:
        data: dict[str, Any] = json.loads((native_dir() / BUILD_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


@cache
def machine_can_use_gpu() -> bool:
    """The loader's cheap probe: a usable AMD GPU (KFD and a render node we may open), or WSL's."""
    import os

    from jax_rocm7_plugin.environment import variable_findings
    from jax_rocm7_plugin.findings import Finding, first_blocking
    from jax_rocm7_plugin.machine import machine_findings, probe_within_deadline
    from jax_rocm7_plugin.sysroot import sysroot

    if first_blocking(variable_findings(os.environ)) is not None:
        return False
    state = probe_within_deadline(sysroot())
    return not isinstance(state, Finding) and first_blocking(machine_findings(state)) is None


def lost(module: str, cause: str) -> str:
    """One sentence: which capability is gone and why ("GPU linear algebra unavailable: ...")."""
    return f"{CAPABILITIES.get(module, module)} unavailable: {cause}"


def _jaxlib_version() -> str | None:
    try:
        from jaxlib.version import __version__
    except ImportError:
        return None
    return str(__version__)


def _report_once(module: str, sentence: str) -> None:
    if module not in _reported:
        _reported.add(module)
        logger.debug("%s", sentence)


def load_native(name: str) -> ModuleType:
    """Load the real extension `name` (jax_rocm7_plugin.<module>) in place of its public stub.

    Raises ImportError (which jaxlib treats as "not available") when the machine has no usable
    AMD GPU, the installed jaxlib is not the release the modules were built for, or the module
    cannot be loaded (a ROCm library missing).
    """
    module = name.rpartition(".")[2]
    if not machine_can_use_gpu():
        raise ImportError(f"{name}: no usable AMD GPU on this machine, so the ROCm extension is not loaded")
    from jax_rocm7_plugin import versions
    from jax_rocm7_plugin.version import JAX_RELEASE

    jaxlib = _jaxlib_version()
    if jaxlib is not None and versions.check_jaxlib(JAX_RELEASE, jaxlib) is not None:  # the loader's rule
        raise ImportError(f"{name} was built for jaxlib {JAX_RELEASE}, but jaxlib {jaxlib} is installed")
    import importlib.machinery
    import importlib.util

    path = native_path(module)
    from jax_rocm7_plugin import library_probe

    verdict = library_probe.probe(path, "module")  # in a child first: a module that dies loading must not kill us
    if verdict.crashed:
        sentence = lost(module, f"loading {path.name} kills the process ({verdict.crashed})")
        _report_once(module, sentence)
        raise ImportError(sentence)
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    try:
        real = importlib.util.module_from_spec(spec)
        loader.exec_module(real)
    except ImportError as error:
        from jax_rocm7_plugin.pjrt_api import missing_dependency

        library = missing_dependency(str(error), path)
        sentence = lost(module, f"{library} not found" if library else str(error))
        _report_once(module, sentence)
        raise ImportError(sentence) from None
    sys.modules[name] = real
    return real
