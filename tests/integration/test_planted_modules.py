"""What lies in the folder a user runs from is not code we run: the courier of `cluster` (the child that imports jax
and joins the job) starts without the caller's folder on its sys.path, so a `numpy.py`, a `jax/` or a
`jax_rocm7_plugin/` in a shared project folder is never imported in place of the real ones."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jax_rocm7_plugin._cluster.courier_link import CourierLink
from tests.support.snippets import clean_env

PLANTED = "import sys\nsys.stderr.write('PLANTED {name}\\n')\nraise SystemExit(7)\n"


def test_the_courier_imports_nothing_from_the_callers_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "shared-project"
    for name in ("numpy", "jax", "jax_rocm7_plugin"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(PLANTED.format(name=name))
    (folder / "json.py").write_text(PLANTED.format(name="json"))
    monkeypatch.chdir(folder)
    link = CourierLink(clean_env(JAX_PLATFORMS="cpu"))
    try:
        deadline = time.time() + 60
        link.send(
            {"deadline": deadline, "timeout": 60, "reserve": 5, "detect_timeout": 60, "coordinator": None,
             "num_processes": None, "process_id": None, "local_device_ids": None, "deep": None}
        )  # fmt: skip
        detected = link.wait_for(("detected",), deadline)
        link.send({"stop": True})
        code = link.process.wait(timeout=60)
    finally:
        link.kill()
    assert "PLANTED" not in link.stderr_text(), link.stderr_text()[-2000:]
    assert detected["event"] == "detected" and code == 0, (detected, code, link.stderr_text()[-2000:])
