from __future__ import annotations

import os
from pathlib import Path

import pytest

from jax_rocm7_plugin.findings import first_blocking
from jax_rocm7_plugin.machine import machine_findings, probe_machine
from tests.sysroots import Gpu, make_sysroot


def ids(root: Path) -> list[tuple[str, str]]:
    return [(f.id, f.severity) for f in machine_findings(probe_machine(root))]


def test_healthy_machine_has_no_findings(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path)
    assert ids(root) == []
    assert len(probe_machine(root).usable_gpus) == 1


def test_no_driver(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, topology=False, amdgpu_module=False, kfd=False)
    assert ids(root) == [("amdgpu-driver-missing", "error")]


def test_empty_sysroot_is_no_driver(tmp_path: Path) -> None:
    assert ids(tmp_path) == [("amdgpu-driver-missing", "error")]


def test_module_without_topology(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, topology=False)
    assert ids(root) == [("no-gpu-nodes", "error")]


def test_topology_without_gpus(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, [])
    assert ids(root) == [("no-gpu-nodes", "error")]


def test_container_without_kfd(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, kfd=False)
    assert ids(root) == [("kfd-device-missing", "error")]
    assert probe_machine(root).usable_gpus == ()


def test_container_without_dri(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, render_nodes=False)
    assert ids(root) == [("render-node-missing", "error")]


def test_one_of_two_render_nodes_missing_is_a_warning(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, [Gpu(drm_render_minor=128), Gpu(drm_render_minor=129)])
    (root / "dev" / "dri" / "renderD129").unlink()
    assert ids(root) == [("render-node-missing", "warning")]
    assert len(probe_machine(root).usable_gpus) == 1


def test_wsl(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, topology=False, amdgpu_module=False, kfd=False, dxg=True)
    assert ids(root) == [("wsl-detected", "info")]
    assert first_blocking(machine_findings(probe_machine(root))) is None


@pytest.mark.skipif(os.getuid() == 0, reason="root may open any file; run as a normal user")
def test_permission_denied(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path)
    os.chmod(root / "dev" / "kfd", 0o600)
    os.chown(root / "dev" / "kfd", 0, 0)
    assert ("kfd-permission-denied", "error") in ids(root)
