"""pytest plugin: one physical GPU per pytest-xdist worker. Enable it explicitly:

    JAX_ENABLE_ROCM_XDIST=<number of GPUs> pytest -n <workers> -p jax_rocm7_plugin.pytest_gpu_isolation

Worker gwK sees GPU K mod N: ROCR_VISIBLE_DEVICES=<K mod N> narrows the runtime to
that GPU, and HIP_VISIBLE_DEVICES=0 names it as HIP's device 0. Both are set when
the plugin loads in the worker, before any conftest or test module can import jax
and start HIP (HIP reads them once, at hipInit). The controller process, runs
without xdist, and runs without JAX_ENABLE_ROCM_XDIST are left untouched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._names import PLUGIN_DISTRIBUTION

ENABLE_VARIABLE = _environment.XDIST_GPUS
WORKER_VARIABLE = "PYTEST_XDIST_WORKER"  # set by xdist in each worker: gw0, gw1, ...


class IsolationError(ValueError):
    pass


def assignment(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The variables this worker should get, or None when isolation does not apply."""
    count_text = (_environment.read(ENABLE_VARIABLE, environ) or "").strip()
    worker = _environment.read(WORKER_VARIABLE, environ) or ""
    if not count_text or not worker:
        return None
    if not count_text.isdigit() or int(count_text) < 1:
        raise IsolationError(f"{ENABLE_VARIABLE}={count_text!r}: expected the number of GPUs (1 or more)")
    match = re.fullmatch(r"gw(\d+)", worker)
    if match is None:
        raise IsolationError(f"{WORKER_VARIABLE}={worker!r} is not an xdist worker id (gwN)")
    gpu = int(match.group(1)) % int(count_text)
    return {"ROCR_VISIBLE_DEVICES": str(gpu), "HIP_VISIBLE_DEVICES": "0"}


def isolate(environ: MutableMapping[str, str]) -> dict[str, str] | None:
    chosen = assignment(environ)
    if chosen is not None:
        environ.update(chosen)
    return chosen


# At import: the plugin is imported while pytest parses its options in the worker, which is
# before conftest files load (they may import jax at module level).
try:
    _CHOSEN = isolate(os.environ)
except IsolationError as _error:
    import pytest

    raise pytest.UsageError(str(_error)) from None


def pytest_report_header() -> str | None:
    if _CHOSEN is None:
        return None
    return f"{PLUGIN_DISTRIBUTION} GPU isolation: " + " ".join(f"{k}={v}" for k, v in _CHOSEN.items())
