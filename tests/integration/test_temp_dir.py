"""compile-temp-dir-unusable: XLA compiles each GPU kernel in the first existing temporary folder (TEST_TMPDIR,
TMPDIR, TMP, /tmp), as tsl picks it, and never checks it may write there. Machines: the healthy fleet's container
whose user 1000 holds the nodes' group (tests/support/fleet.py), its /tmp and TMPDIR changed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.render import render_text
from jax_rocm7_plugin._doctor.report import Report
from tests.support.fleet import HEALTHY, Host, build_host
from tests.support.inprocess import doctor

USER = HEALTHY[15]  # MI300X x8 in a container, user 1000 given the nodes' group by number
assert USER.uid == 1000


def _diagnose(
    host: Host, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch, *, tmp_mode: int | None = 0o1777,
    environ: dict[str, str] | None = None, folders: dict[str, tuple[int, int]] | None = None,
) -> Report:  # fmt: skip
    root, base, library = build_host(host, "7.14.0", tmp_path, build, monkeypatch)
    if tmp_mode is None:
        (root / "tmp").rmdir()
    else:
        (root / "tmp").chmod(tmp_mode)
    for folder, (uid, mode) in (folders or {}).items():
        path = root / folder.lstrip("/")
        path.mkdir(parents=True)
        os.chown(path, uid, uid)
        path.chmod(mode)
    return doctor({**base, **(environ or {})}, root, library)


def _found(report: Report) -> list[str]:
    return [f.sentence() for f in report.findings if f.id == "compile-temp-dir-unusable"]


def test_a_tmp_the_user_cannot_write_in_fails_every_jit(tmp_path: Path, build: Path, mp: pytest.MonkeyPatch) -> None:
    report = _diagnose(USER, tmp_path, build, mp, tmp_mode=0o755)  # a read-only /tmp of root's, as images ship it
    (finding,) = [f for f in report.findings if f.id == "compile-temp-dir-unusable"]
    assert finding.severity == "error" and "/tmp (taken from /tmp)" in finding.summary, finding.summary
    assert "mode 755, owner uid 0" in finding.summary and "this process is uid 1000" in finding.summary
    assert finding.fix.startswith("set TMPDIR to a folder this user can write in")
    assert finding.concerns is not None and finding.concerns.files == ("/tmp",)
    # The backend comes up; its programs do not.
    assert render_text(report).splitlines()[0].startswith("ROCm backend: comes up (8 GPU(s): gfx942), but programs")


def test_tmpdir_is_taken_before_tmp_and_named(tmp_path: Path, build: Path, mp: pytest.MonkeyPatch) -> None:
    report = _diagnose(
        USER, tmp_path, build, mp, environ={"TMPDIR": "/scratch/other"}, folders={"/scratch/other": (2000, 0o700)}
    )
    (finding,) = [f for f in report.findings if f.id == "compile-temp-dir-unusable"]
    assert "/scratch/other (taken from TMPDIR)" in finding.summary and "owner uid 2000" in finding.summary
    assert finding.fix == "set TMPDIR to a folder this user can write in, or unset it where /tmp is writable"
    assert finding.concerns is not None and finding.concerns.variables == ("TMPDIR",)
    assert finding.evidence == ("TMPDIR=/scratch/other: taken",)


def test_a_tmpdir_that_is_no_folder_is_passed_over_as_xla_does(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    """tsl passes over TMPDIR where it is no folder and takes /tmp: writable, so nothing to say."""
    report = _diagnose(USER, tmp_path, build, mp, environ={"TMPDIR": "/nowhere", "TMP": ""})
    assert _found(report) == []
    unwritable = _diagnose(USER, tmp_path / "2", build, mp, tmp_mode=0o755, environ={"TMPDIR": "/nowhere"})
    (finding,) = [f for f in unwritable.findings if f.id == "compile-temp-dir-unusable"]
    assert finding.evidence == ("TMPDIR=/nowhere: No such file or directory", "/tmp: taken")


def test_no_temporary_folder_at_all(tmp_path: Path, build: Path, mp: pytest.MonkeyPatch) -> None:
    report = _diagnose(USER, tmp_path, build, mp, tmp_mode=None)
    (sentence,) = _found(report)
    assert sentence.startswith("XLA finds no temporary folder to compile GPU kernels in (/tmp: No such file"), sentence


def test_root_and_machines_without_a_usable_gpu_are_quiet(tmp_path: Path, build: Path, mp: pytest.MonkeyPatch) -> None:
    as_root = USER.but(uid=None, groups=())
    assert _found(_diagnose(as_root, tmp_path, build, mp, tmp_mode=0o755)) == []
    no_gpu = USER.but(gpus=())
    assert _found(_diagnose(no_gpu, tmp_path / "2", build, mp, tmp_mode=0o755)) == []


def test_a_temporary_folder_that_does_not_answer_is_said_within_the_deadline(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    """A stat that waits (stands in for a stale network mount: no such mount can be made here) costs the reader's
    deadline, not the doctor, and names the folder it waited on."""
    from jax_rocm7_plugin._doctor import rule_temp_dir
    from jax_rocm7_plugin._machine import temp_dir
    from jax_rocm7_plugin._safe_io import stat_named

    stuck = threading.Event()

    def waits_on_scratch(path: str) -> os.stat_result:
        if str(path).endswith("/scratch/stale"):
            return stat_named(_Stuck(path, stuck))  # names the folder, then waits
        return stat_named(path)

    mp.setattr(temp_dir, "stat_named", waits_on_scratch)
    mp.setattr(rule_temp_dir, "READ_SECONDS", 0.3)
    began = time.monotonic()
    report = _diagnose(USER, tmp_path, build, mp, environ={"TMPDIR": "/scratch/stale"})
    stuck.set()
    (finding,) = [f for f in report.findings if f.id == "compile-temp-dir-unusable"]
    assert finding.summary.endswith(
        "/scratch/stale did not answer within 0.3 s: XLA looks there before compiling each GPU kernel"
    )
    assert finding.fix.startswith("set TMPDIR to a local folder") and finding.concerns is not None
    assert finding.concerns.variables == ("TMPDIR",)
    assert time.monotonic() - began < 60


class _Stuck(os.PathLike[str]):
    """A path named at once (the reader's first fspath) whose stat then waits, as on a stale mount."""

    def __init__(self, path: str, release: threading.Event) -> None:
        self.path, self.release, self.named = str(path), release, 0

    def __fspath__(self) -> str:
        self.named += 1
        if self.named > 1:  # the second call is os.stat's own
            self.release.wait(30)
        return self.path


@pytest.fixture
def mp(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    return monkeypatch
