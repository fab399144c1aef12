"""The Python side of the jax ROCm 7 plugin: loader, machine probes, doctor.

Kept empty of imports on purpose: jax imports this package by name (through
`jaxlib.plugin_support`) and `jax_plugins.rocm7` imports it during
`import jax`, so everything heavier is imported where it is used.
"""

from jax_rocm7_plugin.version import __version__

__all__ = ["__version__"]
