"""known_issues.json as data: every entry well formed, the matcher's rules, and the README generated from it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from jax_rocm7_plugin._policy import known_issues
from jax_rocm7_plugin._policy.known_issues import Situation, matches, version_tuple
from jax_rocm7_plugin._settings import RUNTIME_VARIABLE_PREFIXES, RUNTIME_VARIABLES, read_settings

REPO = Path(__file__).resolve().parents[2]


def test_at_least_twenty_entries_each_citing_public_threads() -> None:
    entries = known_issues.entries()
    assert len(entries) >= 20
    for entry in entries:
        thread = re.compile(r"https://github\.com/[^/]+/[^/]+/(issues|pull)/\d+")
        assert entry.sources and all(thread.fullmatch(s) for s in entry.sources)
        assert entry.workaround.text and entry.effect and entry.title


def test_the_settings_keep_every_variable_the_data_names() -> None:
    for name in known_issues.variables():
        assert name.startswith(RUNTIME_VARIABLE_PREFIXES) or name in RUNTIME_VARIABLES, name
    settings = read_settings({"AMD_COMGR_NAMESPACE": "1", "XLA_FLAGS": "--a=b", "PATH": "/bin", "SECRET_TOKEN": "x"})
    assert dict(settings.runtime_environment) == {"AMD_COMGR_NAMESPACE": "1", "XLA_FLAGS": "--a=b"}


def _load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, issue: dict[str, Any]) -> None:
    data = json.loads(known_issues.DATA.read_text())
    data["issues"] = [issue]
    path = tmp_path / "known_issues.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(known_issues, "DATA", path)
    known_issues.entries.cache_clear()


BASE = {
    "id": "some-bug",
    "title": "a bug",
    "sources": ["https://github.com/ROCm/ROCm/issues/1"],
    "affects": {"gfx": ["gfx942"]},
    "effect": {"kind": "crash", "what": "it crashes"},
    "workaround": {"text": "do this", "safe": False},
    "fixed_in": None,
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"id": "Some Bug"}, "kebab-case"),
        ({"affects": {"gpu": ["gfx942"]}}, "'affects' needs conditions"),
        ({"affects": {}}, "'affects' needs conditions"),
        ({"affects": {"platform": "macos"}}, "platform"),
        ({"affects": {"rocm": {}}}, "'from' and/or 'below'"),
        ({"sources": []}, "cites"),
        ({"sources": ["https://example.com/bug"]}, "cites"),
        ({"effect": {"kind": "sad", "what": "x"}}, "effect kind"),
        ({"workaround": {"text": "x", "xla_flags": {"--f": ""}, "safe": True, "documented_by": "X"}}, "variables only"),
        ({"workaround": {"text": "x", "variables": {"A": "1"}, "safe": True}}, "names who documents"),
        ({"workaround": {"text": "x", "variables": {"A": "{rocm}"}, "safe": True, "documented_by": "AMD"}}, "machine"),
        # Precision: a bug seen on one ROCm release is not assumed in every later one.
        ({"affects": {"rocm": {"from": "7.2.0"}}}, "its ROCm range has no end"),
        (
            {"affects": {"rocm": {"from": "7.2.0"}}, "confirmed": {"where": {"rocm": {"from": "7.2.0"}}, "seen": "x"}},
            "its ROCm range has no end",
        ),
        (
            {"affects": {"rocm": {"from": "7.2.0"}}, "confirmed": {"still_present": "https://example.com/x"}},
            "still_present",
        ),
        ({"confirmed": {"where": {"gfx": ["gfx942"]}}}, "'seen'"),
        ({"confirmed": {"where": {"gpu": ["gfx942"]}, "seen": "x"}}, "unknown conditions"),
    ],
)
def test_a_bad_entry_is_refused_with_its_id_and_the_problem(
    change: dict[str, Any], problem: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _load(monkeypatch, tmp_path, {**BASE, **change})
    with pytest.raises(ValueError, match=re.escape(problem)):
        known_issues.entries()
    known_issues.entries.cache_clear()


@pytest.mark.parametrize(
    ("confirmed", "on_a_later_release"),
    [
        ({"where": {"rocm": {"from": "7.2.0", "below": "7.3.0"}}, "seen": "on ROCm 7.2"}, "info"),
        ({"still_present": "https://github.com/ROCm/ROCm/issues/2"}, "warning"),
    ],
    ids=["bounded-where-seen", "a-source-says-it-is-still-there"],
)
def test_an_open_rocm_range_warns_on_later_releases_only_where_a_source_says_the_bug_is_still_there(
    confirmed: dict[str, Any], on_a_later_release: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _load(monkeypatch, tmp_path, {**BASE, "affects": {"rocm": {"from": "7.2.0"}}, "confirmed": confirmed})
    try:
        (seen,) = known_issues.matches(known_issues.Situation(rocm="7.2.1", gpu_count=1))
        (later,) = known_issues.matches(known_issues.Situation(rocm="7.14.0", gpu_count=1))
    finally:
        known_issues.entries.cache_clear()
    assert seen.severity == "warning" and later.severity == on_a_later_release


def test_a_duplicate_id_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = json.loads(known_issues.DATA.read_text())
    data["issues"] = [BASE, BASE]
    path = tmp_path / "known_issues.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(known_issues, "DATA", path)
    known_issues.entries.cache_clear()
    with pytest.raises(ValueError, match="twice"):
        known_issues.entries()
    known_issues.entries.cache_clear()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7.2.0-43", (7, 2, 0)),
        ("7.2.0.70200-43", (7, 2, 0)),
        ("7.13.0a20260415", (7, 13, 0)),
        ("0.10.2.post1", (0, 10, 2)),
        ("7", (7, 0, 0)),
        ("", None),
        ("unknown", None),
        (None, None),
    ],
)
def test_versions_as_rocm_pip_and_wheels_write_them(text: str | None, expected: tuple[int, int, int] | None) -> None:
    assert version_tuple(text) == expected


def test_the_last_xla_flag_wins_as_in_xla() -> None:
    here = Situation(environment=(("XLA_FLAGS", "--xla_gpu_autotune_level=4 --x=1 --xla_gpu_autotune_level=0"),))
    assert here.xla_flag("--xla_gpu_autotune_level") == "0" and here.xla_flag("--missing") is None


def test_unknown_facts_never_match() -> None:
    """A doctor that could not learn the ROCm version claims no bug of a ROCm release."""
    assert [m.issue.id for m in matches(Situation(gfx=("gfx90a",), gpu_count=1, rocm=None, release="0.12.0"))] == []


def test_multi_host_entries_only_where_the_job_spans_hosts() -> None:
    here = Situation(rocm="7.14.0", gfx=("gfx942",), gpu_count=8, release="0.12.0", hosts=2)
    assert "rccl-7.14-multinode-large-message-slow" in [m.issue.id for m in matches(here, multi_host=True)]
    assert [m.issue.id for m in matches(here._replace(hosts=1), multi_host=True)] == []
    assert all(not m.issue.multi_host for m in matches(here, multi_host=False))


def test_the_known_issues_table_is_generated_from_the_data() -> None:
    readme = (REPO / "jax_rocm7_plugin" / "_policy" / "README.md").read_text()
    table = readme.split("<!-- known-issues:begin -->\n", 1)[1].split("<!-- known-issues:end -->", 1)[0]
    assert table.strip().splitlines() == known_issues.readme_rows()


def test_no_workaround_widens_access() -> None:
    """The data's workarounds are fixes the doctor gives: none joins a privileged group or turns a protection off
    (_policy/access_policy.json; the doctor's own fixes are held to it in every in-process run)."""
    from jax_rocm7_plugin._policy.access_policy import widening

    widened = [(e.id, why) for e in known_issues.entries() if (why := widening(e.workaround.text)) is not None]
    assert widened == []
