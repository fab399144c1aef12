"""The modules jax imports from jax_rocm7_plugin by name (jaxlib.plugin_support.import_from_plugin).

Built from the pinned JAX sources (@jax//jaxlib/rocm). jax_rocm7_plugin/_names.py's
EXTENSION_MODULES lists the same names; a test keeps the two equal.
"""

EXTENSION_MODULES = [
    "rocm_plugin_extension",
    "_solver",
    "_linalg",
    "_prng",
    "_sparse",
    "_hybrid",
    "_rnn",
    "_triton",
]
