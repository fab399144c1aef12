from __future__ import annotations

import os
from pathlib import Path

import pytest

from jax_rocm7_plugin._findings import first_blocking
from jax_rocm7_plugin._machine.devices import machine_findings, probe_machine
from tests.support.sysroots import Gpu, make_sysroot


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


NOBODY = 65534


def _findings_as_nobody(root: Path) -> list[list[str]]:
    """Probe as an unprivileged user (root may open anything): a forked child drops to nobody.

    Forked, not exec'd: the interpreter's own files may not be readable by nobody.
    """
    import grp  # noqa: F401 - loaded before the fork: nobody cannot read the interpreter's lib-dynload
    import json

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        status = 1
        try:
            os.close(read_end)
            if os.getuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            found = machine_findings(probe_machine(root))
            os.write(write_end, json.dumps([[f.id, f.severity, *f.evidence] for f in found]).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0 and data
    return json.loads(data)


@pytest.fixture
def shared_tmp() -> Path:
    """A directory an unprivileged user can traverse (pytest's tmp_path is private to root)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="jax-rocm-perm-"))
    path.chmod(0o755)
    yield path  # type: ignore[misc]
    shutil.rmtree(path)


@pytest.mark.skipif(os.getuid() != 0 and os.getuid() != NOBODY, reason="needs root to drop privileges")
@pytest.mark.parametrize(
    ("kfd_mode", "render_mode", "finding"),
    [(0o600, 0o666, "kfd-permission-denied"), (0o666, 0o660, "render-node-permission-denied")],
)
def test_permission_denied_for_unprivileged_user(
    shared_tmp: Path, kfd_mode: int, render_mode: int, finding: str
) -> None:
    root = make_sysroot(shared_tmp / "m")
    for directory, _, _ in os.walk(root):
        os.chmod(directory, 0o755)
    (root / "dev" / "kfd").chmod(kfd_mode)
    (root / "dev" / "dri" / "renderD128").chmod(render_mode)
    found = _findings_as_nobody(root)
    assert [f[:2] for f in found] == [[finding, "error"]]
    assert "owned by gid 0" in found[0][2]  # names the group by number
    assert f"holds gid {NOBODY}" in found[0][-1]  # and the process's own groups, by number
