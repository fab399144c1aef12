"""The names of things, stated once: distributions, modules, the library file, sonames, ROCm major.

The loader, the doctor, setup_*.py and build/ all take them from here, so a rename (a
ROCm 8 pair, say) is one edit. Stdlib only, imports nothing of ours.
"""

from __future__ import annotations

# The ROCm major this pair is built for, and the HIP runtime soname that major ships.
ROCM_MAJOR = 7
HIP_RUNTIME_PREFIX = "libamdhip64.so."
HIP_SONAME = f"{HIP_RUNTIME_PREFIX}{ROCM_MAJOR}"
ROCM = f"ROCm {ROCM_MAJOR}"  # as user messages say it

# jax's extra that installs this pair: pip install "jax[rocm7-local]".
JAX_EXTRA = f"rocm{ROCM_MAJOR}-local"
JAX_EXTRA_REQUIREMENT = f"jax[{JAX_EXTRA}]"

# The two wheels (distribution names as pip shows them) and their import packages.
PLUGIN_DISTRIBUTION = f"jax-rocm{ROCM_MAJOR}-plugin"
PJRT_DISTRIBUTION = f"jax-rocm{ROCM_MAJOR}-pjrt"
PLUGIN_PACKAGE = f"jax_rocm{ROCM_MAJOR}_plugin"
PJRT_PACKAGE = f"jax_rocm{ROCM_MAJOR}_pjrt"
# The PJRT plugin library inside the jax-rocm7-pjrt wheel (and Bazel's target of that name).
LIBRARY_FILE = "xla_rocm_plugin.so"
PJRT_ENTRY_SYMBOL = "GetPjrtApi"

# How jax finds us: entry point `rocm7 = jax_plugins.rocm7` in group `jax_plugins`.
ENTRY_POINT_GROUP = "jax_plugins"
ENTRY_POINT_NAME = f"rocm{ROCM_MAJOR}"
ENTRY_POINT_MODULE = f"{ENTRY_POINT_GROUP}.{ENTRY_POINT_NAME}"
DOCTOR_SCRIPT = "jax-rocm-doctor"

# jax's platform name for the backend, and XLA's platform name for custom calls.
BACKEND = "rocm"
XLA_PLATFORM = "ROCM"

# ROCm from pip (TheRock): the package holding its runtime.
PIP_ROCM_PACKAGE = "_rocm_sdk_core"
PIP_ROCM_DISTRIBUTION = "rocm-sdk-core"

# jaxlib's ROCm extension modules (jaxlib imports jax_rocm7_plugin.<name>), and what jax cannot
# do on the GPU without each.
EXTENSION_CAPABILITIES: dict[str, str] = {
    "rocm_plugin_extension": "ROCm custom calls",
    "_solver": "GPU linear algebra",
    "_linalg": "GPU linear algebra helpers",
    "_prng": "the GPU PRNG kernel",
    "_sparse": "GPU sparse matrices",
    "_hybrid": "GPU eigendecomposition (hybrid CPU/GPU)",
    "_rnn": "the MIOpen RNN",
    "_triton": "Pallas/Triton kernels",
}
EXTENSION_MODULES = tuple(EXTENSION_CAPABILITIES)
NATIVE_DIR = "_native"  # where a wheel with extension modules keeps the real ones
NATIVE_BUILD_INFO = "build_info.json"  # in _native/: per-module provenance, the CPython and jaxlib they serve
