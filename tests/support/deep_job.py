"""A job of `cluster --deep --platform cpu` processes, with a real fault done to one process's courier (test
fixture, never shipped): SIGSTOP (a hang), SIGKILL, or a SIGSTOP/SIGCONT duty cycle (a slow process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.cluster import DEFAULT_INTERFACES, free_port, gpus_with_ids, host_sysroot, routable_address
from tests.support.environment import REPO
from tests.support.netlab import NetLab
from tests.support.snippets import clean_env

SIZES = "8,4K,1M"
STEP_TIMEOUT = 5.0
LIMIT = 150.0


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
    ) -> None:
        """`per_host` processes to a host name; with `lab`, host h's processes run on the lab's host h."""
        self.tmp, self.library, self.count, self.python = tmp, library, count, python
        self.per_host, self.lab, self.step_timeout, self.platform = per_host, lab, step_timeout, platform
        self.pythonpath = str(REPO) if pythonpath is None and python == Path(sys.executable) else pythonpath
        self.stderr: list[list[str]] = [[] for _ in range(count)]
        self.faulted_at: float | None = None
        self._eased = threading.Event()  # a slowed process's duty cycle ends when this is set

    def run(
        self, fault: tuple[int, str, str] | None = None, sizes: str | None = SIZES, limit: float = LIMIT
    ) -> list[tuple[int | None, str, float]]:
        """(exit status, stdout, seconds) per process. `fault`: (process, step name prefix, stop|kill|slow);
        `sizes` None: the command's default sizes; `limit`: seconds until every process is killed."""
        port = free_port()  # free here; a lab's namespaces have every port free
        address = f"{self.lab.address(0) if self.lab else routable_address()}:{port}"
        self.started = time.monotonic()
        processes = []
        for pid in range(self.count):
            host = pid // self.per_host
            interfaces = DEFAULT_INTERFACES
            if self.lab is not None:
                interfaces = {"lo": (True, ("127.0.0.1/8",)), "eth0": (True, (f"{self.lab.address(host)}/24",))}
            root = host_sysroot(self.tmp / f"p{pid}", f"node-{host}", gpus_with_ids(2), interfaces=interfaces)
            env = clean_env(JAX_ROCM_SYSROOT=str(root), JAX_ROCM_PJRT_LIBRARY=str(self.library))
            env.pop("PYTHONPATH", None)
            if self.pythonpath:  # this checkout; none where `python` is a venv with our wheels
                env["PYTHONPATH"] = self.pythonpath
            argv = [str(self.python), "-m", "jax_rocm7_plugin", "cluster", "--coordinator-address", address]
            argv += ["--num-processes", str(self.count), "--process-id", str(pid)]
            argv += ["--local-device-ids", str(pid % self.per_host)]
            argv += ["--deep", "--platform", self.platform, "--step-timeout", str(self.step_timeout)]
            argv += ["--sizes", sizes] if sizes else []
            argv += ["--json", "--verbose", "--timeout", "60"]
            if self.lab is not None:
                argv = self.lab.command(host, argv)
            processes.append(
                subprocess.Popen(argv, env=env, cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            )
        done = threading.Event()
        readers = [
            threading.Thread(target=self._read, args=(pid, process, fault, done), daemon=True)
            for pid, process in enumerate(processes)
        ]
        for reader in readers:
            reader.start()
        started = time.monotonic()
        results = []
        try:
            for process in processes:
                try:
                    out = process.stdout.read() if process.stdout else ""  # type: ignore[union-attr]
                    process.wait(timeout=max(1, limit - (time.monotonic() - started)))
                    results.append((process.returncode, out, time.monotonic() - started))
                except subprocess.TimeoutExpired:
                    process.kill()
                    results.append((None, "", time.monotonic() - started))
        finally:
            done.set()
            for process in processes:
                if process.poll() is None:
                    process.kill()
        return results

    def _read(
        self, pid: int, process: subprocess.Popen[str], fault: tuple[int, str, str] | None, done: threading.Event
    ) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.stderr[pid].append(line)
            if fault is not None and fault[0] == pid and self.faulted_at is None and f"deep step {fault[1]}" in line:
                courier = _children(process.pid)
                assert courier, "no courier child"
                self.faulted_at = time.monotonic()
                if fault[2] == "stop":
                    os.kill(courier[0], signal.SIGSTOP)
                elif fault[2] == "kill":
                    os.kill(courier[0], signal.SIGKILL)
                else:
                    threading.Thread(target=_duty_cycle, args=(courier[0], done, self._eased), daemon=True).start()
            elif fault is not None and fault[0] == pid and fault[2] == "slow" and "deep step all-" in line:
                self._eased.set()  # slowed through its own work; the collectives run at full speed


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


def _duty_cycle(pid: int, done: threading.Event, eased: threading.Event) -> None:
    """Stopped 90% of the time, in 200 ms periods, until `done` or `eased`: a process at a tenth of its speed.
    A tenth, not a quarter: its rate is compared with process 0's measured at another moment, and on a loaded
    two-core machine process 0 itself ran at a third of its idle rate there once."""
    while not (done.is_set() or eased.is_set()):
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.18)
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.02)
        except ProcessLookupError:
            return


def report_of(results: list[tuple[int | None, str, float]]) -> dict[str, Any]:
    code, out, _ = results[0]
    assert out.strip(), f"process 0 printed nothing (exit {code})"
    return dict(json.loads(out))


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in report["findings"]}
