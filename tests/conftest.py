from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _real_amd_gpu() -> bool:
    from jax_rocm7_plugin.machine import probe_machine

    return bool(probe_machine(Path("/")).usable_gpus)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _real_amd_gpu():
        return
    skip = pytest.mark.skip(reason="needs an AMD GPU with ROCm 7 (no usable KFD GPU on this machine)")
    for item in items:
        if "rocm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def standin_library() -> Path:
    """OpenXLA's CPU PJRT plugin from PyPI (xla-cpu-pjrt==0.0.1): a real PJRT C-API library."""
    import xla_plugins.xla_cpu_pjrt as standin

    path = Path(standin.__file__).parent / "xla_cpu_pjrt.so"
    assert path.is_file(), f"xla-cpu-pjrt is installed without its library at {path}"
    return path
