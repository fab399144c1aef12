"""Precision: a healthy machine of a common configuration gets no error and no warning from the doctor of any
released pair, except a known issue whose sources confirm it for exactly that configuration; and `import jax`
prints nothing there.

The fleet (tests/support/fleet.py) is rebuilt as sysroots; each released pair's doctor runs in process with
its release and jaxlib (the PJRT library is the fake HIP 7 build, or TheRock's pip layout's own copy).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._policy import known_issues
from tests.support.fleet import HEALTHY, Host, diagnose_host, released_pairs

PAIRS = released_pairs()
# The warnings a healthy machine may get: known issues of the ROCm its release serves, each confirmed for that
# configuration by its sources. ROCm 7.2.0 (the 0.10.2 pair's): three bugs of that release everywhere, and on
# gfx950 the init hang seen on ROCm 7.2. ROCm 7.14 (the later pairs'): none.
ALLOWED = {
    "7.2.0": {
        "rocm-7.2.0-command-buffer-segfault",  # openxla/xla#40405: XLA moved its CI to 7.2.1 for it
        "miopen-7.2-conv-segfault",  # AMD rebuilds MIOpen in every rocm/jax image it ships on 7.2.x
        "rccl-7.2.0-single-gpu-alltoall-hang",  # one-GPU machines (RCCL's changelog)
    },
    "7.14.0": set(),
}
ALLOWED_ON = {("7.2.0", "gfx950"): {"gfx950-init-hang-comgr-namespace"}}


def allowed(host: Host, rocm: str, report: Report) -> set[str]:
    extra = {
        e
        for (r, gfx), entries in ALLOWED_ON.items()
        for e in entries
        if r == rocm and any(g.gfx_target == gfx for g in report.gpus)
    }
    return ALLOWED[rocm] | extra


@pytest.mark.parametrize("release,rocm", PAIRS, ids=[f"jax-{r}" for r, _ in PAIRS])
@pytest.mark.parametrize("host", HEALTHY, ids=[h.name for h in HEALTHY])
def test_no_error_and_no_warning_but_a_confirmed_known_issue(
    host: Host, release: str, rocm: str, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if host.layout == "therock" and rocm.startswith("7.2."):
        pytest.skip(
            "the 0.10.2 pair serves ROCm 7.2.0 from AMD's packages; on TheRock's tarball its library has a confirmed "
            "bug (known issue jax-0.10.2-bitcode-lld-not-found-therock), so that is no healthy configuration"
        )
    report = diagnose_host(host, rocm, release, tmp_path, build, monkeypatch)
    loud = [f for f in report.findings if f.severity != "info"]
    assert report.ok, [f.sentence() for f in loud]
    unexpected = [f for f in loud if f.id != "known-issue" or f.known_issue not in allowed(host, rocm, report)]
    assert unexpected == [], [f"{f.id}: {f.sentence()}" for f in unexpected]
    for finding in loud:  # each warning is a confirmed entry: its scope holds here
        entry = next(e for e in known_issues.entries() if e.id == finding.known_issue)
        assert "confirmed only" not in finding.summary and entry.severity == "warning"


def test_the_fleet_is_the_one_the_issue_names() -> None:
    names = " ".join(h.name for h in HEALTHY)
    for model in (
        "MI300X",
        "MI325X",
        "MI355X",
        "MI250X",
        "MI210",
        "MI100",
        "RX 7900 XTX",
        "RX 9070 XT",
        "W7900",
        "Strix Halo",
        "container",
        "pip ROCm",
        "TheRock's tarball",
    ):
        assert model in names
    assert len(HEALTHY) >= 12 and {h.layout for h in HEALTHY} == {"amd", "therock", "pip"}
