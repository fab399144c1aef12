"""The invariants of a working machine, each on a machine that breaks it and on the nearest healthy one, and the
doctor's proof of its own fix: it diagnoses again with the fix made, and the fix must clear what it was for.

Machines are synthetic sysroots (tests/support/fleet.py builds them from the documented formats; test fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.proof import NO_ERROR, prove
from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding, Remedy
from jax_rocm7_plugin._settings import read_settings
from tests.support.fleet import HEALTHY, Host, diagnose_host

MI300X = HEALTHY[0]
RELEASE, ROCM = "0.12.0", "7.14.0"


def _loud(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.severity != "info"]


def _diagnose(host: Host, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> Report:
    return diagnose_host(host, ROCM, RELEASE, tmp_path, build, monkeypatch)


def assert_proven(finding: Finding) -> None:
    """The finding's fix is a change the doctor made and checked: with it, the doctor finds no error."""
    assert finding.remedy is not None, finding
    assert finding.remedy.checked is True, finding.remedy.outcome
    assert f"checked: {NO_ERROR}" in finding.fix


# --- Access by number, not by name -----------------------------------------------------------------------------

# A container whose /etc/group calls gid 109 'render' (Ubuntu's number), on a host whose render group is 110
# (Debian's): the nodes are owned by 110. The user is "in render" by name, and still refused.
CONTAINER_USER = MI300X.but(
    name="MI300X x8 in a container, user in 'render' by name (gid 109), nodes owned by the host's 110",
    container=True,
    uid=1000,
    groups=(1000, 44, 109),
    node_gid=110,
    group_names={"video": 44, "render": 109, "user": 1000},
)


def test_a_group_held_by_name_but_not_by_number_is_named_by_number(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(CONTAINER_USER, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert kfd.severity == "error" and not report.ok
    assert "--group-add 110" in kfd.fix
    assert "--group-add render" not in kfd.fix and "usermod" not in kfd.fix  # names it already holds
    assert any("gid 110 (no name here)" in line for line in kfd.evidence)
    assert any("gid 109 ('render' here)" in line for line in kfd.evidence)
    assert kfd.remedy == Remedy(groups=(110,), checked=True, outcome=NO_ERROR)
    assert_proven(kfd)


def test_the_process_holding_the_nodes_group_by_number_is_healthy(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = CONTAINER_USER.but(groups=(1000, 44, 110))  # docker run --group-add 110
    report = _diagnose(healthy, tmp_path, build, monkeypatch)
    assert report.ok and _loud(report) == [], [f.sentence() for f in _loud(report)]


def test_a_host_user_outside_the_group_is_told_its_name_there(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_user = MI300X.but(uid=1000, groups=(1000,), node_gid=110, group_names={"render": 110, "user": 1000})
    report = _diagnose(host_user, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert "usermod -aG render" in kfd.fix and "110" in kfd.fix
    assert_proven(kfd)


def test_a_group_the_user_namespace_does_not_map_is_no_group_to_add(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In an unprivileged LXC guest the host's render group shows as the overflow id: adding 65534 is no fix."""
    lxc = MI300X.but(uid=1000, groups=(1000, 109), node_gid=65534, group_names={"render": 109, "nogroup": 65534})
    report = _diagnose(lxc, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert "lxc.idmap" in kfd.fix and "--group-add 65534" not in kfd.fix
    assert kfd.remedy is None  # not a change the doctor can make


# --- The proof itself ------------------------------------------------------------------------------------------


def test_a_remedy_that_does_not_clear_its_finding_says_so(tmp_path: Path) -> None:
    settings = read_settings({"HIP_VISIBLE_DEVICES": "7"}, sysroot=tmp_path)
    finding = Finding("visible-devices-hide-all", "error", "s", "f", remedy=Remedy((("HIP_VISIBLE_DEVICES", "0"),)))
    seen: list[str | None] = []

    def rerun(changed: object) -> list[Finding]:
        seen.append(changed.environ.get("HIP_VISIBLE_DEVICES"))  # type: ignore[attr-defined]
        return [finding._replace(remedy=None)]

    (checked,) = prove([finding], settings, rerun)
    assert seen == ["0"]  # the rerun saw the change
    assert checked.remedy is not None and checked.remedy.checked is False
    assert "not enough on its own" in checked.fix and "HIP_VISIBLE_DEVICES=0" in checked.fix


def test_a_remedy_is_checked_once_for_findings_that_share_it(tmp_path: Path) -> None:
    settings = read_settings({}, sysroot=tmp_path)
    remedy = Remedy((("X", None),))
    findings = [
        Finding("known-issue", "warning", "a", "f", remedy=remedy),
        Finding("shm-too-small", "warning", "b", "g", remedy=remedy),
    ]
    calls = []
    proven = prove(findings, settings, lambda changed: calls.append(changed) or [])
    assert len(calls) == 1 and all(f.remedy is not None and f.remedy.checked for f in proven)
