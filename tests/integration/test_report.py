"""`python -m jax_rocm7_plugin report`: real bundles from real runs, opened with tarfile and checked
against their manifest. The program bundled runs jax with the stand-in PJRT plugin registered as
'rocm' on a synthetic 2-GPU machine (sysroot); secrets are planted in the environment and printed
by the program, and must appear in no byte of the bundle."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.browser import open_page
from tests.support.environment import REPO
from tests.support.sysroots import Gpu, make_sysroot

TOKEN = "hf_planted-token-7f3a9c"
PASSWORD = "s3cr3t-pa55w0rd"
INDEX_URL = f"https://alice:{PASSWORD}@pypi.internal.example/simple"
PROGRAM = """
import os, jax, jax.numpy as jnp
print("token:", os.environ["HF_TOKEN"], "index:", os.environ["PIP_INDEX_URL"])
def matmul_then_sum(x):
    return (x @ x.T).sum()
print(jax.jit(matmul_then_sum)(jnp.arange(12.0).reshape(3, 4)))
"""


def _report(tmp_path: Path, root: Path, library: Path | None, *args: str, env: dict[str, str] | None = None):
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))},
        "PYTHONPATH": str(REPO),
        "JAX_ROCM_SYSROOT": str(root),
        "HF_TOKEN": TOKEN,
        "PIP_INDEX_URL": INDEX_URL,
        "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true",
        **(env or {}),
    }
    if library is not None:
        environ["JAX_ROCM_PJRT_LIBRARY"] = str(library)
    command = [sys.executable, "-m", "jax_rocm7_plugin", "report", *args]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=240, cwd=tmp_path)


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as archive:
        return {m.name.split("/", 1)[1]: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _gpu_machine(tmp_path: Path) -> Path:
    return make_sysroot(tmp_path / "machine", [Gpu(drm_render_minor=128), Gpu(drm_render_minor=129)])


@pytest.fixture
def bundled(tmp_path: Path, standin_library: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, bytes]]:
    bundle = tmp_path / "out" / "bug.tar.gz"
    bundle.parent.mkdir()
    done = _report(
        tmp_path, _gpu_machine(tmp_path), standin_library, "--output", str(bundle), "--", sys.executable, "-c", PROGRAM
    )
    assert done.returncode == 0, done.stderr
    return done, _members(bundle)


def test_the_bundle_holds_what_its_manifest_says(bundled) -> None:  # type: ignore[no-untyped-def]
    done, members = bundled
    assert done.stdout.strip().splitlines()[-1].endswith("MB)")  # its path and size, last
    manifest = json.loads(members.pop("MANIFEST.json"))
    listed = {entry["file"]: entry for entry in manifest["files"]}
    assert set(listed) == set(members)
    for name, data in members.items():
        assert listed[name]["size"] == len(data) and listed[name]["sha256"] == hashlib.sha256(data).hexdigest()


def test_the_bundle_s_index_is_the_doctor_s_page_linking_every_file(bundled, tmp_path: Path, browser) -> None:  # type: ignore[no-untyped-def]
    _, members = bundled
    unpacked = tmp_path / "unpacked"
    for name, data in members.items():
        (unpacked / name).parent.mkdir(parents=True, exist_ok=True)
        (unpacked / name).write_bytes(data)
    seen = open_page(browser, unpacked / "index.html", "report-index")
    assert seen.console_errors == [] and seen.requests == [] and seen.overflow == 0
    assert seen.verdict.endswith(members["doctor.txt"].decode().splitlines()[0])
    links = set(re.findall(r'<a href="([^"]+)">', members["index.html"].decode()))
    assert links == set(members) - {"index.html", "MANIFEST.json"}  # every file, each one there
    assert TOKEN.encode() not in members["index.html"]


def test_the_bundle_holds_the_hlo_the_doctor_and_the_variables(bundled) -> None:  # type: ignore[no-untyped-def]
    _, members = bundled
    hlo = [name for name in members if name.startswith("xla_dump/") and "matmul_then_sum" in name]
    assert any(name.endswith("before_optimizations.txt") for name in hlo), sorted(members)
    text = b"".join(members[name] for name in hlo if name.endswith(".txt")).decode()
    assert "HloModule" in text and ("dot(" in text or "dot." in text) and "reduce" in text
    doctor = json.loads(members["doctor.json"])
    assert {"ok", "findings"} <= set(doctor)
    # A usable GPU (here, the synthetic machine's): the doctor ran with --deep, once, first jit included.
    assert json.loads(members["MANIFEST.json"])["doctor_deep"] is True and doctor["first_jit"]["ok"] is True
    environment = members["environment.txt"].decode()
    assert "JAX_ROCM_SYSROOT=" in environment and "XLA_FLAGS=--xla_cpu_use_thunk_runtime=true" in environment
    assert not any(line.startswith("HOME=") for line in environment.splitlines())  # an allowlist, not all
    outcome = json.loads(members["command/outcome.json"])
    assert outcome["outcome"] == "exit status 0" and outcome["wall_seconds"] > 0
    assert "command/stderr-tail.txt" in members
    assert members["command/stdout-tail.txt"].startswith(b"token: <redacted> index: https://<redacted>@")


def test_planted_secrets_are_in_no_byte_of_the_bundle(bundled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, members = bundled
    for secret in (TOKEN, PASSWORD, f"alice:{PASSWORD}"):
        leaks = [name for name, data in members.items() if secret.encode() in data or secret in name]
        assert leaks == [], f"{secret!r} leaked into {leaks}"
    manifest = json.loads(members["MANIFEST.json"])
    assert manifest["redacted"] == ["HF_TOKEN", "password in a URL in PIP_INDEX_URL"]


def test_a_command_that_crashes_is_bundled_with_its_signal(tmp_path: Path, standin_library: Path) -> None:
    crash = "import os, signal; print('about to crash', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    done = _report(tmp_path, tmp_path, None, "--output", "crash.tar.gz", "--", sys.executable, "-c", crash)
    # The bundle is written, the terminal says how the command ended, and report exits as a shell would (128 + 11).
    assert done.returncode == 139, done.stderr
    assert "report: the command was killed by SIGSEGV" in done.stderr
    assert done.stdout.startswith("about to crash\n")  # its output passed through as it ran
    members = _members(tmp_path / "crash.tar.gz")
    outcome = json.loads(members["command/outcome.json"])
    assert outcome["outcome"] == "SIGSEGV" and outcome["returncode"] == -11 and outcome["exit_status"] == 139
    assert members["command/stdout-tail.txt"] == b"about to crash\n"


@pytest.mark.parametrize(
    ("command", "status", "said"),
    [
        (["-c", "import sys; print('partial'); sys.exit(3)"], 3, "the command exited with status 3"),
        (None, 127, "the command could not start: [Errno 2] No such file or directory"),
    ],
    ids=["exits 3", "not found"],
)
def test_how_the_command_ended_is_said_and_is_the_exit_status(
    tmp_path: Path, command: list[str] | None, status: int, said: str
) -> None:
    argv = [sys.executable, *command] if command else [str(tmp_path / "no-such-program")]
    done = _report(tmp_path, tmp_path, None, "--output", "r.tar.gz", "--", *argv)
    assert done.returncode == status, done.stderr
    assert f"report: {said}" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "r.tar.gz").is_file() and f"{tmp_path / 'r.tar.gz'}" in done.stdout
    assert json.loads(_members(tmp_path / "r.tar.gz")["command/outcome.json"])["exit_status"] == status


def test_a_command_that_hangs_is_ended_with_its_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    hang = (
        "import subprocess, sys, time; "
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        f"open({str(marker)!r}, 'w').write(str(child.pid)); time.sleep(120)"
    )
    done = _report(
        tmp_path, tmp_path, None, "--output", "hang.tar.gz", "--timeout", "3", "--", sys.executable, "-c", hang
    )
    assert done.returncode == 124, done.stderr  # as timeout(1) says "ran out of time"
    assert "report: the command was stopped at the 3 s limit" in done.stderr
    outcome = json.loads(_members(tmp_path / "hang.tar.gz")["command/outcome.json"])
    assert outcome["outcome"] == "ran past the 3 s limit: killed with its process group"
    assert outcome["timed_out_after_seconds"] == 3 and outcome["returncode"] is None
    grandchild = int(marker.read_text())
    assert _dead(grandchild), "the command's own child outlived the time limit"


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for whoever inherited it (this container's init may reap late)."""
    import time

    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_the_dump_cap_keeps_the_newest_and_lists_what_it_dropped(tmp_path: Path, standin_library: Path) -> None:
    done = _report(
        tmp_path, _gpu_machine(tmp_path), standin_library,
        "--output", "capped.tar.gz", "--max-mb", "0.01", "--", sys.executable, "-c", PROGRAM,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    members = _members(tmp_path / "capped.tar.gz")
    manifest = json.loads(members["MANIFEST.json"])
    kept = sum(len(data) for name, data in members.items() if name.startswith("xla_dump/"))
    assert kept <= 0.01 * 1024 * 1024
    assert manifest["dumps_dropped"] and all(entry["size"] > 0 for entry in manifest["dumps_dropped"])


def test_an_unwritable_destination_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    done = _report(tmp_path, tmp_path, None, "--output", str(tmp_path / "missing" / "dir" / "r.tar.gz"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "cannot write in" in done.stderr


def test_an_existing_bundle_is_replaced_only_with_force(tmp_path: Path) -> None:
    existing = tmp_path / "r.tar.gz"
    existing.write_bytes(b"keep me")
    refused = _report(tmp_path, tmp_path, None, "--output", str(existing))
    assert refused.returncode == 2 and "use --force" in refused.stderr and existing.read_bytes() == b"keep me"
    forced = _report(tmp_path, tmp_path, None, "--output", str(existing), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "doctor.json" in _members(existing)
    assert not list(tmp_path.glob(".r.tar.gz.*.partial"))  # nothing half-written left beside it


def test_a_machine_without_a_gpu_still_gets_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "empty-machine").mkdir()
    done = _report(tmp_path, tmp_path / "empty-machine", None, "--output", "nogpu.tar.gz")
    assert done.returncode == 0, done.stderr
    members = _members(tmp_path / "nogpu.tar.gz")
    doctor = json.loads(members["doctor.json"])
    assert doctor["ok"] is False and doctor["findings"][0]["id"] == "amdgpu-driver-missing"
    assert json.loads(members["MANIFEST.json"])["doctor_deep"] is False
    assert "command/outcome.json" not in members


def test_the_bundle_holds_the_gpus_health(tmp_path: Path) -> None:
    """gpu-health.json: every GPU's health as the doctor reads it, by name, from the machine's own files."""
    from tests.support.node_health import HEALTHY_NODES, make_node

    # A credential on the kernel command line, known to no variable (so no redaction finds it): it stays here.
    secret = "iscsi_password=kernel-only-s3cret-77"
    healthy = HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"]
    # Without iommu=pt: the doctor's finding on it (in doctor.json) shows what it read of the line too.
    node = healthy.with_board(3, ras={"umc": (2, 0)}).but(cmdline=f"BOOT_IMAGE=/vmlinuz ro {secret} numa_balancing=0")
    root = make_node(tmp_path / "machine", node)
    done = _report(tmp_path, root, None, "--output", "health.tar.gz")
    assert done.returncode == 0, done.stderr
    members = _members(tmp_path / "health.tar.gz")
    health = json.loads(members["gpu-health.json"])
    assert not any(b"kernel-only-s3cret-77" in data for data in members.values())
    assert [g["pci"] for g in health["gpus"]] == [b.pci for b in node.boards]
    umc = next(b for b in health["gpus"][3]["ras"] if b["name"] == "umc")
    assert (umc["ue"], health["gpus"][3]["link"]["width"]) == (2, 16)
    assert health["host"]["cmdline"] == "numa_balancing=0"  # the words the rules read, nothing else
    assert "host-iommu-not-pt" in [f["id"] for f in json.loads(members["doctor.json"])["findings"]]


def _deaf_parent(inherited: str) -> Callable[[], None]:
    """What a careless parent leaves a child across exec: SIGINT/SIGTERM ignored or blocked (a background job of a
    non-interactive shell ignores SIGINT)."""
    import signal

    def prepare() -> None:
        if inherited == "ignored":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif inherited == "blocked":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})

    return prepare


def _why_still_running(pid: int) -> str:
    """The signal state and the Python stacks of a report that did not end (faulthandler, on SIGABRT)."""
    import signal

    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "(it ended meanwhile)"
    wanted = [line for line in status.splitlines() if line.startswith(("State", "SigBlk", "SigIgn", "SigCgt"))]
    os.kill(pid, signal.SIGABRT)  # PYTHONFAULTHANDLER=1: every thread's stack on stderr
    return "; ".join(wanted)


@pytest.mark.parametrize(
    ("signum", "inherited"),
    [("SIGINT", "default"), ("SIGTERM", "default"), ("SIGINT", "ignored"), ("SIGINT", "blocked")],
)
def test_ctrl_c_while_the_command_runs_leaves_nothing_behind(tmp_path: Path, signum: str, inherited: str) -> None:
    import signal
    import time

    out, started, pid_file = tmp_path / "out", tmp_path / "started", tmp_path / "pid"
    out.mkdir()
    # The command starts a grandchild of its own: the whole process group must go with it.
    program = (
        f"import os, subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', 'import time; "
        f"time.sleep(60)']); open({str(pid_file)!r}, 'w').write(str(child.pid)); "
        f"open({str(started)!r}, 'w').close(); time.sleep(60)"
    )
    environ = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "JAX_ROCM_SYSROOT": str(tmp_path),
        "PYTHONFAULTHANDLER": "1",
    }
    command = [sys.executable, "-m", "jax_rocm7_plugin", "report", "--output", "r.tar.gz", "--"]
    process = subprocess.Popen(
        [*command, sys.executable, "-c", program],
        env=environ,
        cwd=out,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_deaf_parent(inherited),
    )
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "the command never started"
    sent = time.monotonic()
    process.send_signal(getattr(signal, signum))  # the report alone (the command runs in its own session)
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        state = _why_still_running(process.pid)
        _, stderr = process.communicate(timeout=30)
        pytest.fail(f"report had not ended 30 s after {signum} ({state}); its stderr: {stderr.decode()[-6000:]}")
    code = 128 + getattr(signal, signum)
    assert process.returncode == code and b"interrupted; nothing was written" in stderr, stderr
    assert list(out.iterdir()) == []
    grandchild = int(pid_file.read_text())
    while time.monotonic() < sent + 10 and Path(f"/proc/{grandchild}").exists():
        time.sleep(0.05)
    assert not Path(f"/proc/{grandchild}").exists(), "the command's own child outlived the report"
