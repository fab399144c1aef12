"""A library whose load never answers costs the doctor one load limit, not one per fix it checks, and the child
that loads it cannot outlive the process that started it, nor its own limit.

The hanging libraries are compiled here (test fixtures); the machine is a synthetic sysroot (tests/support/fleet.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jax_rocm7_plugin._binary import child, load_test
from jax_rocm7_plugin._doctor.proof import prove
from jax_rocm7_plugin._findings import Finding, Remedy
from jax_rocm7_plugin._settings import read_settings
from tests.support.fleet import HEALTHY, build_host
from tests.support.inprocess import doctor
from tests.support.native import compile_shared

HANGS = (
    "#include <unistd.h>\n__attribute__((constructor)) static void wait(void) { for (;;) pause(); }\n"
    "void* GetPjrtApi(void) { return 0; }\n"
)
LIMIT = 2.0  # JAX_ROCM_LOAD_TIMEOUT of these tests, seconds


@pytest.fixture
def hanging(tmp_path: Path) -> Path:
    return compile_shared(tmp_path / "lib", "hangs", HANGS)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Every child the runner starts: (its script, the limit it was given)."""
    started: list[tuple[str, float]] = []
    real = child.run_script

    def counting(script: str, arguments: list[str], **options: object) -> child.ChildRun:
        started.append((script, float(options["timeout"])))  # type: ignore[arg-type]
        return real(script, arguments, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(child, "run_script", counting)
    return started


def _doctor_on(hanging: Path, extra: dict[str, str], tmp_path: Path, build: Path, mp: pytest.MonkeyPatch) -> object:
    root, environ, _ = build_host(HEALTHY[0], "7.14.0", tmp_path, build, mp)
    environ.update(extra, JAX_ROCM_LOAD_TIMEOUT=f"{LIMIT:g}", XDG_CACHE_HOME=str(tmp_path / "cache"))
    return doctor(environ, root, hanging)


def test_checking_a_fix_that_cannot_change_the_load_loads_nothing_again(
    hanging: Path, loads: list[tuple[str, float]], tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _doctor_on(hanging, {"JAX_ENABLE_X64": "maybe"}, tmp_path, build, monkeypatch)
    checked = [f for f in report.findings if f.remedy is not None and f.remedy.outcome]  # type: ignore[attr-defined]
    assert checked, [f.id for f in report.findings]  # type: ignore[attr-defined]
    assert "pjrt-library-crashed" in {f.id for f in report.findings}  # type: ignore[attr-defined]
    assert loads == [("load_child.py", LIMIT)]  # the fix's rerun reused the verdict of the first reading


def test_fixes_that_change_the_load_share_one_limit(
    hanging: Path, loads: list[tuple[str, float]], tmp_path: Path
) -> None:
    """Fix checks whose reruns must load again (each changes LD_LIBRARY_PATH, part of the load's identity): the first
    gets the limit; once it is spent, a load is not started at all, and none is judged on a cut limit."""
    base = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "JAX_ROCM_LOAD_TIMEOUT": f"{LIMIT:g}"}
    outcomes = []
    with load_test.one_run(), load_test.checking_fixes(LIMIT):
        for folder in ("a", "b", "c"):
            settings = read_settings({**base, "LD_LIBRARY_PATH": str(tmp_path / folder)})
            try:
                outcomes.append(load_test.probe(hanging, "pjrt", settings).crashed)
            except load_test.OutOfTime as spent:
                outcomes.append(f"out of time: {spent}")
    assert loads == [("load_child.py", LIMIT)], loads
    assert outcomes[0] == f"no answer within {LIMIT:g} s"
    assert all(o.startswith("out of time") for o in outcomes[1:]), outcomes


def test_prove_gives_the_reruns_of_its_fixes_one_load_limit_in_all(
    hanging: Path, loads: list[tuple[str, float]], tmp_path: Path
) -> None:
    """`prove` itself opens the shared budget: three fixes, each of whose reruns must load the library again (each
    changes LD_LIBRARY_PATH, part of the load's identity), cost one load limit; the fixes it had no time for are said
    unchecked, never judged on a cut load."""
    environ = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "JAX_ROCM_LOAD_TIMEOUT": f"{LIMIT:g}"}
    settings = read_settings(environ)
    found = [
        Finding("environment-variable-invalid", "error", f"s{n}", "f", remedy=Remedy((("LD_LIBRARY_PATH", f"/{n}"),)))
        for n in "abc"
    ]

    def rerun(changed: object) -> list[Finding]:
        verdict = load_test.probe(hanging, "pjrt", changed)  # type: ignore[arg-type]
        return [Finding("pjrt-library-crashed", "error", str(verdict.crashed), "f")]

    with load_test.one_run():
        proved = prove(found, settings, rerun)
    assert loads == [("load_child.py", LIMIT)], loads
    outcomes = [(f.remedy.checked, f.remedy.outcome) for f in proved if f.remedy is not None]
    assert outcomes[0][0] is False and "pjrt-library-crashed" in outcomes[0][1], outcomes
    assert [checked for checked, _ in outcomes[1:]] == [None, None], outcomes
    assert all("could not check it in time" in outcome for _, outcome in outcomes[1:]), outcomes


def test_a_fix_the_doctor_had_no_time_to_check_is_said_unchecked(tmp_path: Path) -> None:
    settings = read_settings({"JAX_ENABLE_X64": "maybe"}, sysroot=tmp_path)
    finding = Finding("environment-variable-invalid", "error", "s", "f", remedy=Remedy((("JAX_ENABLE_X64", None),)))

    def rerun(changed: object) -> list[Finding]:
        raise load_test.OutOfTime("the 2 s the doctor gives load tests while checking fixes are spent")

    (proved,) = prove([finding], settings, rerun)
    assert proved.remedy is not None and proved.remedy.checked is None
    assert proved.checked_fix() == (
        "f (not checked: the doctor could not check it in time: the 2 s the doctor gives load tests while checking "
        "fixes are spent)"
    )


def test_the_load_child_dies_with_its_parent(hanging: Path, tmp_path: Path) -> None:
    parent = _parent_waiting_on(hanging, tmp_path, limit=120)
    try:
        loader = _child_of(parent.pid)
        os.kill(parent.pid, signal.SIGKILL)  # the doctor or `import jax` killed while it waits
        parent.wait()
        assert _gone(loader), f"load child {loader} outlived its parent"
    finally:
        parent.kill()


def test_the_load_child_ends_at_its_limit_when_its_parent_cannot_kill_it(hanging: Path, tmp_path: Path) -> None:
    parent = _parent_waiting_on(hanging, tmp_path, limit=1)
    try:
        loader = _child_of(parent.pid)
        os.kill(parent.pid, signal.SIGSTOP)  # stopped (a debugger, ^Z): its own limit never fires
        assert _gone(loader), f"load child {loader} outlived its limit while its parent was stopped"
    finally:
        os.kill(parent.pid, signal.SIGCONT)
        parent.kill()
        parent.wait()


def test_a_library_that_raises_sigalrm_at_once_is_a_crash_not_the_guards_alarm(tmp_path: Path) -> None:
    settings = read_settings({"XDG_CACHE_HOME": str(tmp_path / "cache"), "JAX_ROCM_LOAD_TIMEOUT": "20"})
    source = "#include <signal.h>\n__attribute__((constructor)) static void ring(void) { raise(SIGALRM); }\n"
    verdict = load_test.probe(compile_shared(tmp_path / "lib", "alarms", source), "pjrt", settings)
    assert verdict.crashed == "SIGALRM", verdict


def _parent_waiting_on(library: Path, folder: Path, *, limit: float) -> subprocess.Popen[str]:
    code = (
        "import sys; from jax_rocm7_plugin._binary.child import run_script; "
        f"run_script('load_child.py', [sys.argv[1], 'module', 'GetPjrtApi'], timeout={limit})"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(library)], cwd=Path(__file__).resolve().parents[2], text=True
    )


def _child_of(parent: int) -> int:
    """The load child's pid, once the parent has started it (10 s at most)."""
    ends = time.monotonic() + 10
    while time.monotonic() < ends:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"load_child.py" in command:
                return int(entry.name)
        time.sleep(0.05)
    raise AssertionError(f"process {parent} started no load child within 10 s")


def _gone(pid: int, wait: float = 15.0) -> bool:
    """Whether `pid` has ended (a zombie counts: it runs no code) within `wait` seconds."""
    ends = time.monotonic() + wait
    while time.monotonic() < ends:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False
