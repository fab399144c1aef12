"""Device-selection variables, JAX_PLATFORMS and the XLA client variables, as pure functions."""

from __future__ import annotations

import os

import pytest

from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.topology import KfdNode
from jax_rocm7_plugin._machine.visibility import visible_device_findings, visible_selection
from jax_rocm7_plugin._settings import DeviceSelection, platforms_findings, read_settings, xla_client_problems


def devices(environ: dict[str, str]) -> DeviceSelection:
    """The device-selection variables as the plugin reads them (the one read of the environment)."""
    return read_settings(environ).devices


GPUS = [KfdNode(i + 1, {"simd_count": 304, "unique_id": 0x1000 + i}) for i in range(4)]


def ids(environ: dict[str, str]) -> list[str]:
    return [f.id for f in visible_device_findings(devices(environ), GPUS)]


@pytest.mark.parametrize(
    ("environ", "visible"),
    [
        ({}, [0, 1, 2, 3]),
        ({"HIP_VISIBLE_DEVICES": "2,0"}, [2, 0]),
        ({"ROCR_VISIBLE_DEVICES": "1,3", "HIP_VISIBLE_DEVICES": "1"}, [3]),  # HIP counts within ROCr's list
        ({"ROCR_VISIBLE_DEVICES": "GPU-1002"}, [2]),
        ({"ROCR_VISIBLE_DEVICES": "gpu-1003,0"}, [3, 0]),
        ({"HIP_VISIBLE_DEVICES": "0,7,1"}, [0]),  # read up to the first invalid entry
        ({"HIP_VISIBLE_DEVICES": "1,1"}, [1]),
        ({"CUDA_VISIBLE_DEVICES": "3"}, [3]),
        ({"CUDA_VISIBLE_DEVICES": "3", "HIP_VISIBLE_DEVICES": "0"}, [0]),  # HIP's own variable wins
        ({"GPU_DEVICE_ORDINAL": "1", "HIP_VISIBLE_DEVICES": "2,3"}, [3]),
    ],
)
def test_selection(environ: dict[str, str], visible: list[int]) -> None:
    assert visible_selection(devices(environ), GPUS)[1] == visible


@pytest.mark.parametrize(
    "environ",
    [
        {"HIP_VISIBLE_DEVICES": ""},
        {"HIP_VISIBLE_DEVICES": "-1"},
        {"HIP_VISIBLE_DEVICES": "4"},
        {"ROCR_VISIBLE_DEVICES": "abc"},
        {"ROCR_VISIBLE_DEVICES": "GPU-ffff"},
        {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "1"},
        {"GPU_DEVICE_ORDINAL": " "},
    ],
)
def test_hide_all(environ: dict[str, str]) -> None:
    found = visible_device_findings(devices(environ), GPUS)
    assert [f.id for f in found] == ["visible-devices-hide-all"] and found[0].severity == "error"
    assert any(next(iter(environ)) in line for line in found[0].evidence)


EIGHT = [KfdNode(i + 1, {"simd_count": 304, "unique_id": 0x2000 + i}) for i in range(8)]


def _index_finding(environ: dict[str, str]) -> Finding | None:
    found = visible_device_findings(devices(environ), EIGHT)
    return next((f for f in found if f.id in ("visible-devices-index-invalid", "visible-devices-hide-all")), None)


def test_hip_indices_count_what_rocr_leaves_and_the_value_meant_is_given() -> None:
    """ROCR_VISIBLE_DEVICES=4,5,6,7 with HIP_VISIBLE_DEVICES=4,5 (counting the machine's GPUs): every entry is
    past the 4 GPUs ROCr leaves, so HIP gets none; the user meant HIP_VISIBLE_DEVICES=0,1."""
    hidden = _index_finding({"ROCR_VISIBLE_DEVICES": "4,5,6,7", "HIP_VISIBLE_DEVICES": "4,5"})
    assert hidden is not None and hidden.id == "visible-devices-hide-all"
    assert "meant: HIP_VISIBLE_DEVICES=0,1 with ROCR_VISIBLE_DEVICES=4,5,6,7" in hidden.evidence


def test_an_index_past_rocrs_list_is_named_when_others_remain() -> None:
    found = _index_finding({"ROCR_VISIBLE_DEVICES": "2,3,4,5", "HIP_VISIBLE_DEVICES": "3,5"})
    assert found is not None and found.id == "visible-devices-index-invalid" and found.severity == "warning"
    assert "names 5" in found.summary and "(0-3)" in found.summary
    assert "HIP_VISIBLE_DEVICES=1,3" in found.fix and "unset ROCR_VISIBLE_DEVICES" in found.fix


def test_an_index_past_the_machine_without_rocr() -> None:
    found = _index_finding({"HIP_VISIBLE_DEVICES": "0,9"})
    assert found is not None and found.id == "visible-devices-index-invalid"
    assert "the machine's 8 GPU(s)" in found.summary and "0-7" in found.fix


@pytest.mark.parametrize(
    "environ",
    [{}, {"HIP_VISIBLE_DEVICES": "7,0"}, {"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "1"}],
)
def test_valid_indices_say_nothing(environ: dict[str, str]) -> None:
    assert _index_finding(environ) is None


def test_cuda_visible_devices_on_an_amd_machine() -> None:
    assert ids({"CUDA_VISIBLE_DEVICES": "0,1"}) == ["cuda-visible-devices-set"]
    assert ids({"CUDA_VISIBLE_DEVICES": "-1"}) == ["visible-devices-hide-all", "cuda-visible-devices-set"]
    assert visible_device_findings(devices({"CUDA_VISIBLE_DEVICES": "0"}), []) == []  # no AMD GPU: not our business


@pytest.mark.parametrize(
    ("value", "excluded"),
    [
        ("cpu", True),
        ("cuda,cpu", True),
        ("tpu", True),
        ("rocm", False),
        ("gpu", False),
        ("CPU, ROCM", False),
        ("", False),
    ],
)
def test_platforms(value: str, excluded: bool) -> None:
    found = platforms_findings(read_settings({"JAX_PLATFORMS": value}))
    assert [f.id for f in found] == (["jax-platforms-excludes-rocm"] if excluded else [])


def test_platform_aliases_match_jax() -> None:
    from jax._src import xla_bridge

    from jax_rocm7_plugin._settings import PLATFORM_ALIASES

    for alias, platforms in PLATFORM_ALIASES.items():
        assert tuple(xla_bridge.expand_platform_alias(alias)) == platforms
    # Every alias jax knows, ours knows too (the doctor reads JAX_PLATFORMS without jax).
    theirs = xla_bridge._alias_to_platforms
    assert {name: tuple(platforms) for name, platforms in theirs.items()} == PLATFORM_ALIASES


XLA_VALUES = [
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "platform"),
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "BFC"),
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "arena"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "half"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "1.5"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0"),
    ("XLA_CLIENT_MEM_FRACTION", ".75"),
    ("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
    ("XLA_PYTHON_CLIENT_PREALLOCATE", "FALSE"),
    ("XLA_PYTHON_CLIENT_PREALLOCATE", "no"),
    ("XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB", "256"),
    ("XLA_PYTHON_CLIENT_COLLECTIVE_MEM_SIZE_MB", "1g"),
    ("XLA_PYTHON_CLIENT_ABORT_COLLECTIVES_ON_FAILURE", "true"),
    ("XLA_PYTHON_CLIENT_USE_TFRT_GPU_CLIENT", "1"),
]
STRICTER_THAN_JAXLIB = {("XLA_PYTHON_CLIENT_MEM_FRACTION", "1.5"), ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0")}
STRICTER_THAN_JAXLIB |= {("XLA_PYTHON_CLIENT_PREALLOCATE", "FALSE"), ("XLA_PYTHON_CLIENT_PREALLOCATE", "no")}


@pytest.mark.parametrize(("name", "value"), XLA_VALUES)
def test_xla_client_checks_agree_with_jaxlib(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    """Whatever jaxlib rejects we reject; we also reject what jaxlib silently misreads."""
    from jaxlib import xla_client

    for variable in [k for k in os.environ if k.startswith("XLA_")]:
        monkeypatch.delenv(variable)
    monkeypatch.setenv(name, value)
    try:
        xla_client.generate_pjrt_gpu_plugin_options()
        jaxlib_rejects = False
    except ValueError:
        jaxlib_rejects = True
    ours = xla_client_problems({name: value})
    assert bool(ours) == (jaxlib_rejects or (name, value) in STRICTER_THAN_JAXLIB), ours
    assert all(name in problem for problem in ours)


def test_both_fractions_set() -> None:
    problems = xla_client_problems({"XLA_CLIENT_MEM_FRACTION": "0.5", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"})
    assert problems and "both set" in problems[0]
