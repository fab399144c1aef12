"""Where the checkout is, and its `jax_rocm7_plugin`, imported by location.

The build packages the plugin source tree of this checkout and reads its data (the release
table, ROCm's policy, the names of things) from there. Importing the package from its file
location, rather than editing sys.path, keeps an installed jax-rocm7-plugin (in the same
venv, say) from standing in for the tree being built.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# The package's name, stated here because this module is what makes `_names` importable (a layout
# test keeps it equal to _names.PLUGIN_PACKAGE).
PACKAGE = "jax_rocm7_plugin"
REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / PACKAGE
CACHE_DIR = Path(os.environ.get("JAX_ROCM_BUILD_CACHE", Path.home() / ".cache" / "jax-rocm7-build"))


def use_checkout() -> None:
    """Make `import jax_rocm7_plugin` (and its submodules) load this checkout's tree."""
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None:
        where = Path(getattr(loaded, "__file__", "") or "").resolve().parent
        if where != PLUGIN_DIR:
            raise ImportError(f"{PACKAGE} was imported from {where} before the build could use {PLUGIN_DIR}")
        return
    spec = importlib.util.spec_from_file_location(
        PACKAGE, PLUGIN_DIR / "__init__.py", submodule_search_locations=[str(PLUGIN_DIR)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[PACKAGE]
        raise
