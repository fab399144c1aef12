"""Precision: a healthy machine of a common configuration gets no error and no warning from the doctor of any
released pair, except a known issue whose sources confirm it for exactly that configuration; and `import jax`
prints nothing there.

The fleet (tests/support/fleet.py) is rebuilt as sysroots; each released pair's doctor runs in process with
its release and jaxlib (the PJRT library is the fake HIP 7 build, or TheRock's pip layout's own copy).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._policy import known_issues
from jax_rocm7_plugin.version import JAX_RELEASE
from tests.support.fleet import HEALTHY, Host, diagnose_host, false_alarms, released_pairs

PAIRS = released_pairs()


def _not_served(host: Host, rocm: str) -> bool:
    """The 0.10.2 pair serves ROCm 7.2.0 from AMD's packages: on TheRock's tarball its library has a confirmed bug,
    so that is no healthy configuration (test_the_0_10_2_pair_on_therocks_tarball_is_told_its_known_issue)."""
    return host.layout == "therock" and rocm.startswith("7.2.")


@pytest.mark.parametrize(
    ("host", "release", "rocm"),
    [
        pytest.param(host, release, rocm, id=f"{host.name}-jax-{release}")
        for host in HEALTHY
        for release, rocm in PAIRS
        if not _not_served(host, rocm)
    ],
)
def test_no_error_and_no_warning_but_a_confirmed_known_issue(
    host: Host, release: str, rocm: str, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = diagnose_host(host, rocm, release, tmp_path, build, monkeypatch)
    loud = [f for f in report.findings if f.severity != "info"]
    assert report.ok, [f.sentence() for f in loud]
    unexpected = false_alarms(report, rocm)
    assert unexpected == [], [f"{f.id}: {f.sentence()}" for f in unexpected]
    assert all(f.severity == "info" for f in report.findings if f.fix.startswith("nothing to do")), report.findings
    unproven = [f for f in loud if f.remedy is not None and not f.remedy.checked]  # the workaround, once made, holds
    assert unproven == [], [f"{f.id}: {f.checked_fix()}" for f in unproven]
    for finding in loud:  # each warning is a confirmed entry: its scope holds here
        entry = next(e for e in known_issues.entries() if e.id == finding.known_issue)
        assert "confirmed only" not in finding.summary and entry.severity == "warning"


def test_the_0_10_2_pair_on_therocks_tarball_is_told_its_known_issue(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is true on the one combination the fleet leaves out: the backend comes up, and the doctor warns of the
    0.10.2 library's bitcode and ld.lld search on TheRock's layout, with the variables that point it there."""
    (host,) = [h for h in HEALTHY if h.layout == "therock"]
    (release, rocm) = next((r, v) for r, v in PAIRS if _not_served(host, v))
    report = diagnose_host(host, rocm, release, tmp_path, build, monkeypatch)
    assert report.ok
    named = {f.known_issue: f for f in report.findings if f.id == "known-issue"}
    issue = named["jax-0.10.2-bitcode-lld-not-found-therock"]
    assert issue.severity == "warning" and "HIP_DEVICE_LIB_PATH=/opt/rocm/lib/llvm/amdgcn/bitcode" in issue.fix
    assert [f.id for f in report.findings if f.severity == "warning" and f.id != "known-issue"] == [
        "device-bitcode-missing"
    ]


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


# `import jax` for real (jax 0.10.2 of the test venv): the checkout's plugin registers the stand-in PJRT library
# (OpenXLA's CPU plugin) under 'rocm' on each healthy machine, as the 0.10.2 pair serves it (ROCm 7.2.0).
_IMPORT = "import jax; print(sorted({d.platform for d in jax.devices('rocm')}))"
CHECKOUT_ROCM = dict(PAIRS)[JAX_RELEASE]


@pytest.mark.slow
@pytest.mark.parametrize("host", [h for h in HEALTHY if h.layout != "therock"], ids=lambda h: h.name)
def test_import_jax_prints_nothing_on_a_healthy_machine(
    host: Host, tmp_path: Path, build: Path, standin_library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    from tests.support.environment import plugin_environment
    from tests.support.fleet import build_host

    with monkeypatch.context() as patch:
        root, environ, _ = build_host(host, CHECKOUT_ROCM, tmp_path, build, patch)
        paths = [p for p in sys.path if str(tmp_path) in p]  # a pip ROCm's site-packages
    environ = plugin_environment(root, standin_library, tmp_path / "cache", python_path=tuple(paths), **environ)
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT], env=environ, capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    # jax.devices('rocm') answered: the backend registered (the stand-in's devices call their platform 'cpu').
    assert done.stdout.strip() == "['cpu']", done.stdout
    assert done.stderr == "", done.stderr
