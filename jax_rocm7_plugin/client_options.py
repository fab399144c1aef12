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


ALLOCATORS = ("default", "platform", "bfc", "cuda_async", "vmm")
_BOOLEAN_WORDS = ("true", "True", "1", "false", "False", "0")


def xla_client_env_problems(environ: Mapping[str, str]) -> list[str]:
    """What is wrong with the XLA client variables, checked without jaxlib (the doctor imports no jax).

    Stricter than jaxlib where jaxlib silently misreads: it takes any
    XLA_PYTHON_CLIENT_PREALLOCATE other than false/False/0 as true (so FALSE
    preallocates), and passes a memory fraction of 0 or 1.5 on to the allocator.
    """
    problems: list[str] = []
    allocator = environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default")
    if allocator.lower() not in ALLOCATORS:
        problems.append(f"XLA_PYTHON_CLIENT_ALLOCATOR={allocator!r} is not one of {', '.join(ALLOCATORS)}")
    new, old = environ.get("XLA_CLIENT_MEM_FRACTION", ""), environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
    if new and old:
        problems.append("XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are both set; keep the first")
    for name, value in (("XLA_CLIENT_MEM_FRACTION", new), ("XLA_PYTHON_CLIENT_MEM_FRACTION", old)):
        if value:
            try:
                fraction = float(value)
            except ValueError:
                problems.append(f"{name}={value!r} is not a number")
                continue
            if not 0.0 < fraction <= 1.0:
                problems.append(f"{name}={value!r} is outside (0, 1]")
    preallocate = environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "")
    if preallocate and preallocate not in _BOOLEAN_WORDS:
        problems.append(
            f"XLA_PYTHON_CLIENT_PREALLOCATE={preallocate!r} is not true/false/1/0 (jaxlib would read it as true)"
        )
    for name in (
        "XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB",
        "XLA_PYTHON_CLIENT_ABORT_COLLECTIVES_ON_FAILURE",
        "XLA_PYTHON_CLIENT_USE_TFRT_GPU_CLIENT",
    ):
        value = environ.get(name, "")
        if value and not value.strip().isdigit():
            problems.append(f"{name}={value!r} is not a non-negative integer")
    return problems


def _evidence(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The XLA client variables that are set, as evidence lines."""
    return tuple(f"{name}={environ[name]!r}" for name in XLA_CLIENT_VARIABLES if name in environ)


def env_findings(environ: Mapping[str, str]) -> list[Finding]:
    problems = xla_client_env_problems(environ)
    if not problems:
        return []
    return [catalog.xla_client_env_invalid("; ".join(problems), _evidence(environ))]


def rocm_client_options(environ: Mapping[str, str]) -> dict[str, Any] | Finding:
    """jaxlib's GPU plugin options with platform_name=ROCM, or the finding saying what is wrong.

    Our own checks come first (the doctor makes the same ones). jaxlib raises a
    bare ValueError on what remains; that would surface as a traceback from
    jax's plugin discovery.
    """
    invalid = env_findings(environ)
    if invalid:
        return invalid[0]
    from jaxlib import xla_client

    try:
        options: dict[str, Any] = dict(xla_client.generate_pjrt_gpu_plugin_options())
    except ValueError as error:
        evidence = _evidence(environ)
        # jaxlib's own message (or float()'s "could not convert ..."); the evidence names the variables set.
        return catalog.xla_client_env_invalid(str(error).rstrip("."), evidence)
    options["platform_name"] = PLATFORM_NAME
    return options
