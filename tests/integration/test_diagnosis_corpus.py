"""Recall: public failure reports (tests/support/fleet.py FAILURES), each rebuilt as the machine its thread
describes: the doctor names the cause in the summary or fix of an error or warning, gives the fix the thread
confirms, and checks every fix it can. Cases marked as gaps are checked to stay unnamed, so that the benchmark's
recall is not flattered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fleet import FAILURES, Case, diagnose_host, names_cause, remedy_outcome


@pytest.mark.parametrize("case", FAILURES, ids=[c.thread.removeprefix("https://github.com/") for c in FAILURES])
def test_the_doctor_names_the_cause_of_each_public_failure(
    case: Case, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.fleet import released_pairs

    release = case.release or released_pairs()[0][0]
    report = diagnose_host(case.host, case.rocm, release, tmp_path, build, monkeypatch)
    loud = [f"{f.id}: {f.sentence()}" for f in report.findings if f.severity != "info"]
    assert names_cause(report, case.cause) == case.named, (case.gap, loud)
    # A finding whose own fix is "nothing to do" is never a warning.
    assert all(f.severity == "info" for f in report.findings if f.fix.startswith("nothing to do")), loud
    # The thread's confirmed fix is the one the doctor gives; every fix the doctor could check, it checked, and
    # with it made the doctor found the problem gone (a fix the rerun does not clear is a defect of the doctor).
    if case.fix and case.named:  # a gap's confirmed fix is counted as not given by the benchmark
        assert remedy_outcome(report, case) in ("checked", "named"), (case.fix, loud)
    unproven = [f for f in report.findings if f.remedy is not None and f.severity != "info" and not f.remedy.checked]
    assert unproven == [], [f"{f.id}: {f.checked_fix()}" for f in unproven]
