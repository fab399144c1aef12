from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.environment import REPO
from tests.support.snippets import clean_env
from tests.support.sysroots import make_sysroot


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jax_rocm7_plugin", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(**env),
    )


def test_healthy_machine_with_explicit_library(tmp_path: Path, standin_library: Path) -> None:
    root = make_sysroot(tmp_path)
    done = doctor("--json", "--sysroot", str(root), "--library", str(standin_library))
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"] is True, done.stdout
    assert report["gpus"] == [
        {
            "kfd_node": 1,
            "gfx_target": "gfx942",
            "product": "Instinct MI300X/MI300A/MI325X",
            "render_node": str(root / "dev/dri/renderD128"),
            "usable": True,
            "visible": True,
            "library_code": None,  # the CPU stand-in carries no GPU code objects
            "memory_bytes": 192 * 1024**3,  # the sysroot's frame buffer bank
            "apu": False,
        }
    ]
    assert report["library"]["source"] == "--library"  # what the user gave it with


def test_no_driver_text_report(tmp_path: Path) -> None:
    done = doctor("--sysroot", str(tmp_path), JAX_ROCM_SYSROOT="/nonexistent")
    assert done.returncode == 1
    first, second = done.stdout.splitlines()[:2]
    assert first == "ROCm backend: unavailable; jax will use CPU"
    assert "[error] amdgpu-driver-missing" in second


def test_sysroot_from_environment(tmp_path: Path, standin_library: Path) -> None:
    root = make_sysroot(tmp_path, kfd=False)
    done = doctor("--json", JAX_ROCM_SYSROOT=str(root), JAX_ROCM_PJRT_LIBRARY=str(standin_library))
    ids = [f["id"] for f in json.loads(done.stdout)["findings"]]
    assert done.returncode == 1 and ids == ["kfd-device-missing"]


def test_usage_error(tmp_path: Path) -> None:
    done = doctor("--sysroot", str(tmp_path / "missing"))
    assert done.returncode == 2 and f"--sysroot {tmp_path / 'missing'}: does not exist" in done.stderr
    (tmp_path / "file").write_text("")
    done = doctor("--sysroot", str(tmp_path / "file"))
    assert done.returncode == 2 and "not a directory" in done.stderr


def test_unforeseen_probe_failure_is_a_finding_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from jax_rocm7_plugin import __main__ as cli
    from jax_rocm7_plugin._doctor import diagnose as doctor_module

    def explode(*_: object, **__: object) -> None:
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(doctor_module, "diagnose", explode)
    status = cli.main(["doctor", "--json", "--sysroot", str(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    assert status == 1 and report["ok"] is False
    assert [f["id"] for f in report["findings"]] == ["doctor-internal-error"]
    assert "probe exploded" in report["findings"][0]["summary"]
