"""`doctor --binary`: code objects LLVM assembled here, header-only ones for targets that LLVM lacks
(labelled in their file names), and host libraries with offload bundles compiled here, judged against
synthetic machines (sysroots). The published library and extension modules: tests/e2e."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._binary.code_objects import CodeObject, read_binary
from tests.support.bundles import compressed_bundle, plain_bundle
from tests.support.code_objects import assembled, header_only
from tests.support.environment import REPO
from tests.support.native import pjrt_library_with_code_for
from tests.support.sysroots import Gpu, make_sysroot

GFX90A, GFX942, GFX1031, GFX1100, GFX1151 = 90010, 90402, 100301, 110000, 110501
ECC = 0x80000


def _doctor(root: Path, *paths: Path, json_output: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--sysroot", str(root), "--binary", *map(str, paths)]
    environ = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **env}
    return subprocess.run(command + (["--json"] if json_output else []), env=environ, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("processor", "features", "expected"),
    [
        ("gfx906", (), CodeObject("gfx906", "any", "any")),
        ("gfx90a", ("+xnack", "+sramecc"), CodeObject("gfx90a", "on", "on")),
        ("gfx90a", ("-xnack",), CodeObject("gfx90a", "off", "any")),
        ("gfx1030", (), CodeObject("gfx1030", None, None)),
    ],
)
def test_code_objects_llvm_assembled_are_read_as_llvm_wrote_them(
    tmp_path: Path, processor: str, features: tuple[str, ...], expected: CodeObject
) -> None:
    binary = read_binary(assembled(tmp_path, processor, *features))
    assert binary.kind == "code object" and binary.code == (expected,)


def test_header_only_code_objects_for_newer_and_generic_targets(tmp_path: Path) -> None:
    cases = {
        header_only(tmp_path, 0x4C, name="gfx942", xnack="off", sramecc="on"): CodeObject("gfx942", "off", "on"),
        header_only(tmp_path, 0x41, name="gfx1100"): CodeObject("gfx1100"),
        header_only(tmp_path, 0x5F, name="gfx9-4-generic", version=6, xnack="any", generic_version=1): CodeObject(
            "gfx9-4-generic", "any", None, 1
        ),
        header_only(tmp_path, 0x99, name="unknown"): CodeObject("EF_AMDGPU_MACH 0x99"),
    }
    for path, expected in cases.items():
        assert read_binary(path).code == (expected,), path.name


def test_a_host_library_with_offload_bundles_lists_each_entry_with_its_features(tmp_path: Path) -> None:
    ids = [
        "host-x86_64-unknown-linux-gnu-",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
        "hipv4-amdgcn-amd-amdhsa--gfx11-generic",
    ]
    library = pjrt_library_with_code_for(tmp_path, compressed_bundle(plain_bundle(ids), version=3))
    binary = read_binary(library)
    assert binary.kind == "offload bundles"
    assert binary.code == (CodeObject("gfx90a", "off", "on"), CodeObject("gfx11-generic"))
    assert read_binary(Path(sys.executable).resolve()).kind == "no GPU code"


def test_one_line_per_binary_saying_where_it_runs(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "machine", [Gpu(GFX942, drm_render_minor=128), Gpu(GFX1151, drm_render_minor=129)])
    generic = header_only(tmp_path / "co", 0x5F, name="gfx9-4-generic", version=6, generic_version=1)
    exact = header_only(tmp_path / "co", 0x4A, name="gfx1151")
    done = _doctor(root, generic, exact)
    assert done.returncode == 1, done.stderr  # neither runs on both GPUs
    header, *lines = done.stdout.splitlines()
    assert header == "GPUs HIP will use: KFD node 1 gfx942, KFD node 2 gfx1151"
    assert lines == [
        f"{generic}: code object for gfx9-4-generic -> NOT on KFD node 2 (no code for gfx1151 (it carries "
        "gfx9-4-generic)); runs on KFD node 1: gfx942",
        f"{exact}: code object for gfx1151 -> NOT on KFD node 1 (no code for gfx942 (it carries gfx1151)); "
        "runs on KFD node 2: gfx1151",
    ]
    both = _doctor(root, tmp_path / "co")  # a folder: every binary in it
    assert both.returncode == 1 and len(both.stdout.splitlines()) == 3


def test_xnack_and_sramecc_must_match_the_gpu(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "machine", [Gpu(GFX90A, capability=ECC)])
    xnack_on = assembled(tmp_path / "co", "gfx90a", "+xnack", "+sramecc")
    refused = _doctor(root, xnack_on)
    assert refused.returncode == 1
    assert "XNACK is off (HSA_XNACK=1 turns it on), SRAM ECC is on" in refused.stdout
    assert _doctor(root, xnack_on, HSA_XNACK="1").returncode == 0
    no_ecc = make_sysroot(tmp_path / "no-ecc", [Gpu(GFX90A)])
    assert _doctor(no_ecc, xnack_on, HSA_XNACK="1").returncode == 1  # built for sramecc+ only


def test_generic_code_runs_on_a_family_member_and_the_override_changes_the_target(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "machine", [Gpu(GFX1031)])
    exact_sibling = assembled(tmp_path / "co", "gfx1030")
    assert _doctor(root, exact_sibling).returncode == 1  # gfx1030 code on a gfx1031: no
    generic = header_only(tmp_path / "co", 0x53, name="gfx10-3-generic", version=6, generic_version=1)
    assert _doctor(root, generic).returncode == 0
    assert _doctor(root, exact_sibling, HSA_OVERRIDE_GFX_VERSION="10.3.0").returncode == 0


def test_json_and_a_machine_without_a_gpu(tmp_path: Path) -> None:
    code = header_only(tmp_path / "co", 0x4C, name="gfx942")
    (tmp_path / "empty").mkdir()
    done = _doctor(tmp_path / "empty", code, json_output=True)
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["ok"] is False and data["gpus"] == []
    (entry,) = data["binaries"]
    assert entry["kind"] == "code object" and entry["code_objects"][0]["name"] == "gfx942"
    missing = _doctor(tmp_path / "empty", tmp_path / "nope.co")
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def test_a_driver_that_does_not_answer_is_said_not_waited_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine is read under the loader's deadline: a hung sysfs read (standing in for a hung driver)."""
    import threading

    from jax_rocm7_plugin._doctor.binaries import check_binaries
    from jax_rocm7_plugin._settings import read_settings

    release = threading.Event()
    monkeypatch.setattr("jax_rocm7_plugin._safe_io.DEADLINE_SECONDS", 0.2)
    monkeypatch.setattr(
        "jax_rocm7_plugin._machine.devices.probe_machine", lambda root, groups_added=(): release.wait(5)
    )
    code = header_only(tmp_path / "co", 0x4C, name="gfx942")
    try:
        lines, data, ok = check_binaries([code], read_settings({}, sysroot=make_sysroot(tmp_path / "machine")))
    finally:
        release.set()
    assert not ok and data["gpus"] == [] and "did not answer within 0.2 s" in data["machine_problem"]
    assert lines == [f"{code}: code object for gfx942; no GPU here to run it"]
