"""The Python side of the jax ROCm 7 plugin.

Public: this package's `__version__`, `version` (read by jaxlib), the extension modules
jaxlib imports by name (`jax_rocm7_plugin._solver`, ...: stubs over `_native/`),
`python -m jax_rocm7_plugin doctor` and `pytest_gpu_isolation`. Everything else is
private: `_loader` (what `jax_plugins.rocm7` calls), `_pipeline` (the ordered checks),
`_settings` (the environment, read once), `_findings` (the catalog), `_names`, and the
sub-packages `_machine`, `_binary`, `_policy`, `_job`, `_doctor`, `_cluster`.

Kept empty of imports on purpose: jax imports this package by name during `import jax`, and
jaxlib (importing the extension modules) catches only ImportError. So a damaged version.py (a
half-written install, a corrupt file) must not raise here: `__version__` is then None, and the
loader's import of the same file fails again inside the entry module, which names it in one line.
"""

try:
    from jax_rocm7_plugin.version import __version__
except Exception:  # noqa: BLE001 - anything escaping here would break `import jax` itself
    __version__ = None  # type: ignore[assignment]

__all__ = ["__version__"]
