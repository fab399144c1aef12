"""PJRT client options for the ROCm backend, with environment errors made readable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import findings as catalog
from jax_rocm7_plugin.findings import Finding

PLATFORM_NAME = "ROCM"
# The variables jaxlib reads when it builds GPU client options.
XLA_CLIENT_VARIABLES = (
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB",
    "XLA_PYTHON_CLIENT_ABORT_COLLECTIVES_ON_FAILURE",
    "XLA_PYTHON_CLIENT_USE_TFRT_GPU_CLIENT",
)


def rocm_client_options(environ: Mapping[str, str]) -> dict[str, Any] | Finding:
    """jaxlib's GPU plugin options with platform_name=ROCM, or the finding saying what is wrong.

    jaxlib raises a bare ValueError (or int()/float() errors) on bad values; that
    would surface as a traceback from jax's plugin discovery.
    """
    from jaxlib import xla_client

    try:
        options: dict[str, Any] = dict(xla_client.generate_pjrt_gpu_plugin_options())
    except ValueError as error:
        evidence = tuple(f"{name}={environ[name]!r}" for name in XLA_CLIENT_VARIABLES if name in environ)
        # jaxlib's own message (or float()'s "could not convert ..."); the evidence names the variables set.
        return catalog.xla_client_env_invalid(str(error).rstrip("."), evidence)
    options["platform_name"] = PLATFORM_NAME
    return options
