"""Loading jaxlib's ROCm extension modules under their public names (`load_native`).

jaxlib imports `jax_rocm7_plugin.<name>` for each of its ROCm extension modules during
`import jax` (jaxlib/plugin_support.py), before any plugin is initialised. A wheel that
carries them keeps each real module in the private folder `_native/` and puts a two-line
module under the public name that calls `load_native`: it raises ImportError at once on a
machine without a usable AMD GPU (the pipeline's machine steps, once per process), or for
another jaxlib release than the modules were built for, and otherwise loads the real
extension under the public name. jaxlib skips a module whose import raises ImportError; a
missing ROCm library is named once, at debug level, with the capability it costs.
"""

from __future__ import annotations

import logging
import os
import sys
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._names import PLUGIN_PACKAGE

if TYPE_CHECKING:
    from jax_rocm7_plugin._settings import Settings

logger = logging.getLogger(PLUGIN_PACKAGE)
_reported: set[str] = set()  # modules whose loss was logged already: once per process


@cache
def _settings() -> Settings:
    from jax_rocm7_plugin._settings import read_settings

    # The modules serve whatever JAX_PLATFORMS says (jaxlib imports them before jax reads it).
    return read_settings(os.environ, platforms="")


def no_gpu_device_node() -> bool:
    """Neither /dev/kfd nor WSL's /dev/dxg (under JAX_ROCM_SYSROOT where set): no AMD GPU can be used here,
    whatever else the checks would find, so they are not imported to say it (a few stats inside every
    `import jax` on a machine without one). A sysroot that is no absolute folder is left to the checks."""
    root = _environment.read(_environment.SYSROOT) or "/"
    if not os.path.isabs(root) or not os.path.isdir(root):
        return False
    return not any(os.path.exists(os.path.join(root, node)) for node in ("dev/kfd", "dev/dxg"))


@cache
def machine_can_use_gpu() -> bool:
    """The loader's cheap checks, through the machine probe: a usable AMD GPU (KFD and a render node
    we may open), or WSL's."""
    if no_gpu_device_node():
        return False
    from jax_rocm7_plugin._pipeline import Facts, first_blocking_finding

    blocking, _ = first_blocking_finding(Facts(_settings()), through_machine=True)
    return blocking is None


def _report_once(module: str, sentence: str) -> None:
    if module not in _reported:
        _reported.add(module)
        logger.debug("%s", sentence)


def load_native(name: str) -> ModuleType:
    """Load the real extension `name` (jax_rocm7_plugin.<module>) in place of its public stub.

    Raises ImportError (which jaxlib treats as "not available") when the machine has no usable
    AMD GPU, the installed jaxlib is not the release the modules were built for, or the module
    cannot be loaded (a ROCm library missing), and for anything else that goes wrong (a damaged
    file of ours): jaxlib catches ImportError only, and `import jax` must survive.
    """
    try:
        return _load_native(name)
    except ImportError:
        raise
    except Exception as error:  # e.g. a SyntaxError from a corrupt version.py
        raise ImportError(f"{name}: {type(error).__name__}: {error}") from error


def _load_native(name: str) -> ModuleType:
    module = name.rpartition(".")[2]
    if not machine_can_use_gpu():
        raise ImportError(f"{name}: no usable AMD GPU on this machine, so the ROCm extension is not loaded")
    from jax_rocm7_plugin._machine.jaxlib_version import jaxlib_version
    from jax_rocm7_plugin._policy import versions
    from jax_rocm7_plugin.version import JAX_RELEASE

    jaxlib = jaxlib_version()  # the loader's source: jaxlib imports us after jaxlib.version
    if jaxlib is not None and versions.check_jaxlib(JAX_RELEASE, jaxlib) is not None:  # the loader's rule
        raise ImportError(f"{name} was built for jaxlib {JAX_RELEASE}, but jaxlib {jaxlib} is installed")
    import importlib.machinery
    import importlib.util

    from jax_rocm7_plugin._binary import load_test
    from jax_rocm7_plugin._machine.native_modules import lost, native_path

    path = native_path(module)
    settings = _settings()
    # In a child first: a module that dies loading must not kill us.
    verdict = load_test.probe(path, "module", settings)
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
        from jax_rocm7_plugin._binary.pjrt_api import missing_dependency

        library = missing_dependency(str(error), path.name)
        sentence = lost(module, f"{library} not found" if library else str(error))
        _report_once(module, sentence)
        raise ImportError(sentence) from None
    sys.modules[name] = real
    return real
