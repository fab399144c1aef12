"""The module jax discovers (entry point group `jax_plugins`): it only forwards.

Imports nothing at module level beyond the loader, so `import jax` pays
nothing for this plugin until jax asks for backends.
"""


def initialize() -> None:
    from jax_rocm7_plugin._loader import initialize as initialize_rocm

    initialize_rocm()
