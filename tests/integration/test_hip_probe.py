"""--deep against a real HIP runtime: Debian's libamdhip64-5 (HIP 5.2), which finds no GPU here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from jax_rocm7_plugin._binary.hip_child import version_text as hip_version_text
from jax_rocm7_plugin._doctor.deep import run_probe
from tests.support.environment import REPO
from tests.support.snippets import clean_env


def test_hip_version_encoding() -> None:
    assert hip_version_text(50221153) == "5.2.21153"
    assert hip_version_text(70051831) == "7.0.51831"


def test_real_hip_runtime_reports_no_device(debian_hip_runtime: Path) -> None:
    probe = run_probe(debian_hip_runtime, None)
    assert probe.ok, probe.failure
    assert probe.hip["device_count"] == {"code": 100, "name": "hipErrorNoDevice", "value": 0}
    assert probe.hip["runtime_version"]["text"].startswith("5.2.")


def test_doctor_deep_names_the_runtime_error_and_its_version(debian_hip_runtime: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--json", "--deep"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(),
    )
    report = json.loads(done.stdout)
    by_id = {f["id"]: f for f in report["findings"]}
    assert done.returncode == 1
    assert "hipErrorNoDevice" in by_id["hip-no-device"]["summary"]
    assert any("HIP runtime version 5.2." in e for e in by_id["rocm-major-mismatch"]["evidence"])
    assert report["rocm"]["hip"]["runtime"].endswith("libamdhip64.so.5")
