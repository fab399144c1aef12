"""The Python side of the jax ROCm 7 plugin.

Public: this package's `__version__`, `version` (read by jaxlib), the extension modules
jaxlib imports by name (`jax_rocm7_plugin._solver`, ...: stubs over `_native/`),
`python -m jax_rocm7_plugin doctor` and `pytest_gpu_isolation`. Everything else is
private: `_loader` (what `jax_plugins.rocm7` calls), `_pipeline` (the ordered checks),
`_settings` (the environment, read once), `_findings` (the catalog), `_names`, and the
sub-packages `_machine`, `_binary`, `_policy`, `_doctor`.

Kept empty of imports on purpose: jax imports this package by name during `import jax`.
"""

from jax_rocm7_plugin.version import __version__

__all__ = ["__version__"]
