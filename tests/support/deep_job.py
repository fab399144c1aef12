"""A job of `cluster --deep --platform cpu` processes (or the plain preflight), with a real fault done to one
process (test fixture, never shipped): SIGSTOP (a hang), SIGKILL, or a SIGSTOP/SIGCONT duty cycle (a slow
process), to its courier alone or to the whole process (the command and its courier: a frozen or lost node),
at the moment that process's --verbose output names (a phase: joining, joined, a deep step, the report)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from tests.support.cluster import DEFAULT_INTERFACES, free_port, gpus_with_ids, host_sysroot, routable_address
from tests.support.environment import REPO
from tests.support.netlab import NetLab
from tests.support.node_health import Node
from tests.support.snippets import clean_env

SIZES = "8,4K,1M"
STEP_TIMEOUT = 5.0
LIMIT = 150.0


class Fault(NamedTuple):
    """What is done to one process, and when: as soon as a line of its --verbose output contains `at`."""

    process: int
    at: str  # "joining", "joined", "deep step all-reduce/8", "deep report" ...
    action: str  # stop | kill | slow | interrupt (SIGINT to the whole process: Ctrl-C)
    whole: bool = False  # the command and its courier (a node frozen or lost); else the courier alone

    @classmethod
    def of(cls, fault: Fault | tuple[int, str, str]) -> Fault:
        """(process, step name prefix, action): the courier, at that deep step (the older form)."""
        if isinstance(fault, Fault):
            return fault
        process, step, action = fault
        return cls(process, f"deep step {step}", action)


class DeepJob:
    """N processes of `cluster --deep --json --verbose` (on 'cpu' unless told); a fault may be done to one courier."""

    def __init__(
        self,
        tmp: Path,
        library: Path,
        count: int,
        python: Path = Path(sys.executable),
        pythonpath: str | None = None,
        *,
        per_host: int = 2,
        lab: NetLab | None = None,
        step_timeout: float = STEP_TIMEOUT,
        platform: str = "cpu",
        deep: bool = True,
        timeout: float = 60.0,
        sigint_ignored: bool = False,
        gpus: int = 2,
        nodes: dict[int, Node] | None = None,
    ) -> None:
        """`per_host` processes to a host name; with `lab`, host h's processes run on the lab's host h. `gpus`: each
        machine's (0: a node without an AMD GPU, whose processes then give no --local-device-ids). `nodes`: host
        h's GPUs as that node's boards, with their health files."""
        self.tmp, self.library, self.count, self.python = tmp, library, count, python
        self.per_host, self.lab, self.step_timeout, self.platform = per_host, lab, step_timeout, platform
        self.deep, self.timeout, self.gpus, self.nodes = deep, timeout, gpus, nodes or {}
        # The faulted process starts with SIGINT ignored, as a careless parent leaves it across exec (a background
        # job of a non-interactive shell): Ctrl-C must still end it.
        self.sigint_ignored = sigint_ignored
        self.pythonpath = str(REPO) if pythonpath is None and python == Path(sys.executable) else pythonpath
        self.stderr: list[list[str]] = [[] for _ in range(count)]
        self.faulted_at: float | None = None
        self.couriers: list[int] = []  # the faulted process's courier(s) at the fault
        self._eased = threading.Event()  # a slowed process's duty cycle ends when this is set

    def run(
        self,
        fault: Fault | tuple[int, str, str] | None = None,
        sizes: str | None = SIZES,
        limit: float = LIMIT,
        first: tuple[str, ...] = (),
    ) -> list[tuple[int | None, str, float]]:
        """(exit status, stdout, seconds since the job started) per process; a process still running at `limit`
        (the one stopped whole, say) is killed there and gets None. `sizes` None: the command's default sizes. `first`:
        options given to process 0 alone (--html, --trace)."""
        self.fault = Fault.of(fault) if fault is not None else None
        port = free_port()  # free here; a lab's namespaces have every port free
        address = f"{self.lab.address(0) if self.lab else routable_address()}:{port}"
        self.started = time.monotonic()
        processes = []
        for pid in range(self.count):
            host = pid // self.per_host
            interfaces = DEFAULT_INTERFACES
            if self.lab is not None:
                interfaces = {"lo": (True, ("127.0.0.1/8",)), "eth0": (True, (f"{self.lab.address(host)}/24",))}
            root = host_sysroot(
                self.tmp / f"p{pid}",
                f"node-{host}",
                gpus_with_ids(self.gpus),
                interfaces=interfaces,
                node=self.nodes.get(host),
            )
            env = clean_env(JAX_ROCM_SYSROOT=str(root), JAX_ROCM_PJRT_LIBRARY=str(self.library))
            env.pop("PYTHONPATH", None)
            if self.pythonpath:  # this checkout; none where `python` is a venv with our wheels
                env["PYTHONPATH"] = self.pythonpath
            argv = [str(self.python), "-m", "jax_rocm7_plugin", "cluster", "--coordinator-address", address]
            argv += ["--num-processes", str(self.count), "--process-id", str(pid)]
            argv += ["--local-device-ids", str(pid % self.per_host)] if self.gpus else []
            if self.deep:
                argv += ["--deep", "--platform", self.platform, "--step-timeout", str(self.step_timeout)]
                argv += ["--sizes", sizes] if sizes else []
            argv += ["--json", "--verbose", "--timeout", f"{self.timeout:g}"]
            argv += list(first) if pid == 0 else []
            if self.lab is not None:
                argv = self.lab.command(host, argv)
            processes.append(
                subprocess.Popen(
                    argv,
                    env=env,
                    cwd=self.tmp,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,  # its own process group: a whole-process fault reaches its courier
                    preexec_fn=_ignore_sigint
                    if self.sigint_ignored and self.fault is not None and pid == self.fault.process
                    else None,
                )
            )
        done = threading.Event()
        outputs: list[list[str]] = [[] for _ in processes]
        threads = [
            threading.Thread(target=self._read, args=(pid, process, done), daemon=True)
            for pid, process in enumerate(processes)
        ]
        threads += [
            threading.Thread(target=_collect, args=(process, outputs[pid]), daemon=True)
            for pid, process in enumerate(processes)
        ]
        for thread in threads:
            thread.start()
        ended: dict[int, float] = {}  # when each process exited, seen by a thread of its own
        waiters = [
            threading.Thread(target=_note_end, args=(process, pid, ended, self.started), daemon=True)
            for pid, process in enumerate(processes)
        ]
        for waiter in waiters:
            waiter.start()
        results: dict[int, tuple[int | None, str, float]] = {}
        # A process stopped whole never ends by itself: it is waited for last, and killed once the others ended.
        frozen = self.fault.process if self.fault and self.fault.whole and self.fault.action == "stop" else None
        order = [pid for pid in range(self.count) if pid != frozen] + ([frozen] if frozen is not None else [])
        try:
            for pid in order:
                process = processes[pid]
                try:
                    left = limit - (time.monotonic() - self.started)
                    process.wait(timeout=max(1, left) if pid != frozen or self.faulted_at is None else 0.1)
                    code: int | None = process.returncode
                except subprocess.TimeoutExpired:
                    code = None
                    _kill_group(process)
                waiters[pid].join(5)
                threads[self.count + pid].join(5)  # its stdout, to the end
                results[pid] = (code, "".join(outputs[pid]), ended.get(pid, time.monotonic() - self.started))
        finally:
            done.set()
            for process in processes:
                if process.poll() is None:
                    _kill_group(process)
        return [results[pid] for pid in range(self.count)]

    def _read(self, pid: int, process: subprocess.Popen[str], done: threading.Event) -> None:
        assert process.stderr is not None
        fault = self.fault
        for line in process.stderr:
            self.stderr[pid].append(line)
            if fault is None or fault.process != pid:
                continue
            if self.faulted_at is None and fault.at in line:
                self.faulted_at = time.monotonic()
                self.couriers = _children(process.pid)
                if fault.whole:
                    chosen = {"stop": signal.SIGSTOP, "kill": signal.SIGKILL, "interrupt": signal.SIGINT}
                    os.killpg(process.pid, chosen[fault.action])  # interrupt: Ctrl-C, as a terminal sends it
                    continue
                courier = _children(process.pid)
                assert courier, "no courier child"
                if fault.action == "stop":
                    os.kill(courier[0], signal.SIGSTOP)
                elif fault.action == "kill":
                    os.kill(courier[0], signal.SIGKILL)
                else:
                    threading.Thread(target=_duty_cycle, args=(courier[0], done, self._eased), daemon=True).start()
            elif fault.action == "slow" and "deep step all-" in line:
                self._eased.set()  # slowed through its own work; the collectives run at full speed


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _note_end(process: subprocess.Popen[str], pid: int, ended: dict[int, float], started: float) -> None:
    process.wait()
    ended[pid] = time.monotonic() - started


def _collect(process: subprocess.Popen[str], into: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        into.append(line)


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    process.wait()


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


def _duty_cycle(pid: int, done: threading.Event, eased: threading.Event) -> None:
    """Stopped 95% of the wall time until `done` or `eased`: a process at a twentieth of its speed, at most. Each
    stop lasts 19 times the span the process was let run, measured, not the 20 ms asked for: on a loaded machine
    this thread wakes late, and a fixed stop would let the process run a third of the time (a CI run measured it
    at 36% of process 0's rate). Its rate is compared with process 0's, taken at another moment, and process 0
    itself once ran at a third of its idle rate there."""
    while not (done.is_set() or eased.is_set()):
        try:
            resumed = time.monotonic()
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.02)
            os.kill(pid, signal.SIGSTOP)
            ran = time.monotonic() - resumed
            time.sleep(max(0.2, 19 * ran))
        except ProcessLookupError:
            return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def report_of(results: list[tuple[int | None, str, float]]) -> dict[str, Any]:
    code, out, _ = results[0]
    assert out.strip(), f"process 0 printed nothing (exit {code})"
    return dict(json.loads(out))


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in report["findings"]}
