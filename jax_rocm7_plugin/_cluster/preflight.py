"""`python -m jax_rocm7_plugin cluster`: run in every process of a job; process 0 prints one report.

Each process starts its courier (which imports jax and joins the coordination service), runs the
doctor meanwhile, and hands the courier its record. Process 0 compares the records and publishes a
verdict; every process exits with its code (0 consistent, 1 problems, 2 usage), so the job step
fails as a whole. Nothing here waits without a deadline, and nothing jaxlib does can kill this
process: the courier is a child.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._cluster import courier, failures
from jax_rocm7_plugin._cluster.courier_link import CourierGone, CourierLink, death_description
from jax_rocm7_plugin._cluster.report import EXIT_PROBLEMS, ClusterReport, render_json, render_text
from jax_rocm7_plugin._job import catalog
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._job.phrases import hosts_phrase, processes_phrase
from jax_rocm7_plugin._names import PLUGIN_DISTRIBUTION, PLUGIN_PACKAGE
from jax_rocm7_plugin._policy.grammar import parse_address
from jax_rocm7_plugin._record import NamedTuple

DEFAULT_TIMEOUT = 60.0
DEFAULT_STEP_TIMEOUT = 60.0  # --deep: each step's deadline (the 256 MiB collectives over sockets take seconds)
# Process 0's courier hands the report's code to the others, then the final code (deep.VERDICT_WAIT_SECONDS and
# deep.FINAL_ACK_SECONDS), and a little more for the answer.
DEEP_VERDICT_SECONDS = 45.0
RESOLVE_SECONDS = 5.0
KILL_GRACE_SECONDS = 2.0
LINGER_SECONDS = 5.0  # a process other than 0 whose join failed waits this long at most for process 0's report
LINGER_AFTER_CLOSE_SECONDS = 1.0
POLL_SECONDS = 0.25  # the coordinator probe's pause between two connection attempts
WATCHDOG_SLACK_SECONDS = 15.0  # --deep: a watchdog that fired has said so by then (its probe of process 0: 4 s)
USAGE_FIX = (
    "launch it the way the job is launched (srun, mpirun, a Kubernetes JobSet), or give --coordinator-address "
    "HOST:PORT --num-processes N --process-id I"
)


class Options(NamedTuple):
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    local_device_ids: tuple[int, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    json: bool = False
    verbose: bool = False
    sysroot: Path | None = None
    library: Path | None = None
    deep: bool = False  # then run the job's collectives for real (deep.py)
    sizes: tuple[int, ...] = ()  # --deep's message sizes (collectives.DEFAULT_SIZES where empty)
    platform: str = "rocm"  # --deep's backend; "cpu" runs the same steps over gloo
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    html: Path | None = None  # process 0 writes the report as a page there (_pages/cluster.py)
    trace: Path | None = None  # --deep: process 0 writes the steps as Chrome trace-event JSON there
    force: bool = False  # replace those files


class _Seen:
    """--deep, in the parent: the step the courier is in, and (process 0) the plan and every outcome seen so far."""

    def __init__(self) -> None:
        self.step = "the backend"
        self.plan: list[dict[str, Any]] = []
        self.outcomes: dict[int, dict[str, Any]] = {}


class _Run:
    """One process's preflight: the courier, the doctor's record, and what to say at the end."""

    def __init__(self, options: Options, environ: Mapping[str, str], out: TextIO, err: TextIO) -> None:
        self.options, self.environ, self.out, self.err = options, dict(environ), out, err
        self.started = time.time()
        self.deadline = self.started + options.timeout
        self.process_id: int | None = options.process_id
        self.expected: int | None = options.num_processes
        self.coordinator: str | None = options.coordinator
        self.method: str | None = None
        self.host = "this host"
        self.join_missing: tuple[int, ...] = ()  # process 0: who the coordinator saw never join
        self.join_count: int | None = None  # process 0: how many it saw join, where joining failed
        self.seen = _Seen()  # --deep: what the courier said of the steps so far
        self.records: dict[int, Any] = {}  # process 0: the records compared (for --html)
        self.steps: list[dict[str, Any]] = []  # process 0, --deep: the steps as gathered (for --trace)

    # --- output -------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        if self.options.verbose:
            who = f"process {self.process_id}" if self.process_id is not None else "cluster"
            self.err.write(f"{who}: {text}\n")
            self.err.flush()

    def report(
        self,
        findings: list[ClusterFinding],
        reported: tuple[int, ...] = (),
        missing: tuple[int, ...] = (),
        hosts: tuple[str, ...] = (),
    ) -> ClusterReport:
        return ClusterReport(
            self.expected,
            reported,
            missing,
            hosts,
            tuple(findings),
            self.coordinator,
            self.method,
            round(time.time() - self.started, 3),
            self.join_count,
        )

    def finish(self, findings: list[ClusterFinding], missing: tuple[int, ...] = ()) -> int:
        return self.show(self.report(findings, missing=missing))

    def show(self, report: ClusterReport) -> int:
        """Process 0 (or a process that cannot know it is not 0) prints the report; others one line on stderr."""
        if self.process_id in (0, None):
            self.out.write((render_json(report) if self.options.json else render_text(report)) + "\n")
            self.out.flush()
            self._write_pictures(report)
        elif report.exit_code != 0:
            for finding in report.findings:
                self.err.write(f"cluster preflight, process {self.process_id}: {finding.summary}. Fix: {finding.fix}\n")
            self.err.flush()
        return report.exit_code

    def _write_pictures(self, report: ClusterReport) -> None:
        """--html and --trace, written by the process that prints the report, whatever the verdict; a file that
        cannot be written is said on stderr (the verdict stands)."""
        from jax_rocm7_plugin._pages import cluster, trace
        from jax_rocm7_plugin._pages.output import write

        wanted = []
        if self.options.html is not None:
            wanted.append((self.options.html, lambda: cluster.render(report.to_json(), self.records)))
        if self.options.trace is not None:
            host_of = {p: r.host for p, r in self.records.items()}
            figures = [f.to_json() for f in report.collectives]
            wanted.append((self.options.trace, lambda: trace.render(self.steps, figures, host_of)))
        for path, draw in wanted:
            try:
                failed = write(path, draw(), force=self.options.force)
            except Exception as error:  # noqa: BLE001 - a picture never costs the verdict
                failed = f"{type(error).__name__}: {error}"
            if failed is not None:
                self.err.write(f"cluster preflight: {path} was not written: {failed}\n")
                self.err.flush()

    # --- the run ------------------------------------------------------------------------------

    def run(self) -> int:
        from jax_rocm7_plugin._machine.host import host_name

        root = self.options.sysroot or Path(_environment.read(_environment.SYSROOT, self.environ) or "/")
        self.host = host_name(root)  # gethostname where the root has no kernel host name
        link = CourierLink(self._courier_environment())
        try:
            return self._run_with(link)
        finally:
            link.kill()

    def _courier_environment(self) -> dict[str, str]:
        environ = dict(self.environ)
        # Only --deep starts a backend there (the one asked for); else never let one start.
        environ["JAX_PLATFORMS"] = self.options.platform if self.options.deep else "cpu"
        environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")  # keep the service's log: it names who never joined
        if self.options.deep and self.options.platform != "cpu":  # RCCL's own word on the network it takes
            import atexit
            import shutil
            import tempfile

            from jax_rocm7_plugin._cluster.rccl_log import asked_environment

            folder = tempfile.mkdtemp(prefix=f"{PLUGIN_DISTRIBUTION}-rccl-")
            atexit.register(shutil.rmtree, folder, True)
            environ = asked_environment(environ, folder)
        return environ

    def _run_with(self, link: CourierLink) -> int:
        options = self.options
        reserve = max(5.0, options.timeout * 0.25)
        link.send(
            {
                "deadline": self.deadline,
                "timeout": options.timeout,
                "reserve": reserve,
                "detect_timeout": int(options.timeout),
                "coordinator": options.coordinator,
                "num_processes": options.num_processes,
                "process_id": options.process_id,
                "local_device_ids": list(options.local_device_ids) if options.local_device_ids is not None else None,
                "deep": self._deep_plan(),
            }
        )
        report_and_facts = self._doctor()  # while the courier imports jax
        try:
            detected = link.wait_for(("detected",), self.deadline)
        except CourierGone as gone:
            return self.finish([self._gone(link, gone, "starting")])
        if detected["event"] == "error":
            return self.finish([self._courier_error(link, detected)])
        problem = self._take_detected(detected)
        if problem is not None:
            link.send({"stop": True})
            return self.finish([problem])
        assert self.coordinator is not None and self.expected is not None and self.process_id is not None
        self.say(f"joining {self.coordinator} as process {self.process_id} of {self.expected} (via {self.method})")
        blocked = self._before_join()
        if blocked is not None:
            link.send({"stop": True})
            return self.finish([blocked])
        link.send({"go": True})
        link.send({"record": self._record(report_and_facts, detected)})
        probe = _CoordinatorProbe(self.coordinator) if self.process_id != 0 else None
        try:
            joined: CourierGone | dict[str, Any] = link.wait_for(("joined",), self.deadline + KILL_GRACE_SECONDS)
        except CourierGone as gone:
            joined = gone
        finally:
            if probe is not None:
                probe.stop()
        if isinstance(joined, CourierGone) or joined["event"] == "error":
            finding = self._join_failure(link, joined, probe)
            return self.finish([finding], missing=self.join_missing)
        self.say("joined")
        if self.process_id == 0:
            return self._compare(link)
        return self._await_verdict(link)

    def _deep_plan(self) -> dict[str, Any] | None:
        from jax_rocm7_plugin._cluster.collectives import DEFAULT_SIZES

        if not self.options.deep:
            return None
        sizes = self.options.sizes or DEFAULT_SIZES
        return {
            "platform": self.options.platform,
            "sizes": list(sizes),
            "step_timeout": self.options.step_timeout,
            "host": self.host,
        }

    def _deep_deadline(self) -> float:
        from jax_rocm7_plugin._cluster.deep import longest_run

        plan = self._deep_plan() or {"sizes": []}
        return time.time() + longest_run(list(plan["sizes"]), self.options.step_timeout) + KILL_GRACE_SECONDS

    def _deep_progress(self, link: CourierLink, last: str) -> dict[str, Any]:
        """The courier's events until `last` (or an error), each step said with --verbose. Besides the whole run's
        deadline, each phase has its own: a step ends by its deadline (the courier's watchdog), where process 0
        then gathers; the report's wait is bounded too. A courier silent for longer is stopped or hung. What
        process 0's courier hands on as it comes (the plan, the outcomes) is kept in `self.seen`."""
        from jax_rocm7_plugin._cluster.deep import report_seconds

        timeout = self.options.step_timeout
        deadline = self._deep_deadline()
        phase_ends = time.time() + timeout + WATCHDOG_SLACK_SECONDS  # the first step comes at once
        wanted = (last, "deep-step", "deep-report", "deep-plan", "deep-seen")
        while True:
            event = link.wait_for(wanted, min(deadline, phase_ends))
            kind = event["event"]
            if kind == "deep-plan":
                self.seen.plan = list(event["steps"])
            elif kind == "deep-seen":
                for index, outcomes in event["outcomes"].items():
                    self.seen.outcomes.setdefault(int(index), {}).update(outcomes)
            elif kind == "deep-report":
                self.seen.step = "the report"
                self.say("deep report")
                phase_ends = time.time() + report_seconds(timeout) + KILL_GRACE_SECONDS
            elif kind == "deep-step":
                self.seen.step = str(event.get("name"))
                # By then the courier's watchdog has fired and said so (deep-report); a courier silent past it is
                # stopped, or wedged in a call that never lets the watchdog run.
                phase_ends = time.time() + timeout + WATCHDOG_SLACK_SECONDS
                self.say(f"deep step {event.get('name')}")
            else:
                return event

    def _deep(self, link: CourierLink, host_of: Mapping[int, str]) -> tuple[Any, list[ClusterFinding]]:
        """Process 0: the courier's gathering of the deep steps, read as figures and findings. Where jaxlib ended
        the courier first (the service declared a process dead), the steps seen until then, and who died."""
        from jax_rocm7_plugin._cluster.collectives import read_lost, read_steps

        count, timeout = int(self.expected or 0), self.options.step_timeout
        shared = self.options.platform == "cpu"  # the hosts' CPUs: shared by each host's processes
        try:
            event = self._deep_progress(link, "deep")
        except CourierGone as gone:
            steps = [{**step, "outcomes": self.seen.outcomes.get(i, {})} for i, step in enumerate(self.seen.plan)]
            self.steps = steps
            loss = failures.service_loss(link.stderr_text()) if gone.why == "exited" else None
            if loss is not None and loss.dead:
                result = read_lost(steps, count, host_of, timeout, loss.dead, loss.line, shared)
                return result, list(result.findings)
            result = read_lost(steps, count, host_of, timeout, (), "", shared)
            return result, [*result.findings, self._gone(link, gone, f"the deep steps ({self.seen.step})")]
        if event["event"] == "error":
            return None, [self._courier_error(link, event)]
        self.steps = list(event["steps"])
        result = read_steps(self.steps, count, host_of, timeout, shared)
        return result, list(result.findings)

    def _doctor(self) -> tuple[Any, Any] | BaseException:
        from jax_rocm7_plugin._doctor.diagnose import diagnose_with_facts
        from jax_rocm7_plugin._settings import read_settings

        try:
            settings = read_settings(self.environ, sysroot=self.options.sysroot, library=self.options.library)
            # Fixes are not checked by a second diagnosis here: every process of the job waits for the slowest, and
            # `doctor` on the odd host checks them.
            return diagnose_with_facts(settings, prove=False)
        except Exception as error:  # noqa: BLE001 - reported in the record as this process's error
            return error

    def _launcher_prerequisite(self) -> ClusterFinding | None:
        """A launcher jax joins through a module that is not installed here, or that this jax does not detect
        (_policy/launchers.json): that is the cause, and its prerequisite the fix."""
        import importlib.util

        from jax_rocm7_plugin._machine.packages import installed_version
        from jax_rocm7_plugin._policy.launchers import missing_prerequisite

        found = missing_prerequisite(
            self.environ, lambda name: importlib.util.find_spec(name) is not None, installed_version("jax")
        )
        return catalog.usage_invalid(*found) if found is not None else None

    def _take_detected(self, detected: dict[str, Any]) -> ClusterFinding | None:
        self.method = detected.get("method")
        self.coordinator = detected.get("coordinator")
        self.expected = detected.get("num_processes")
        self.process_id = detected.get("process_id")
        if None in (self.coordinator, self.expected, self.process_id):
            prerequisite = self._launcher_prerequisite()
            if prerequisite is not None:
                return prerequisite
            allocation = self._slurm_allocation_without_a_step()
            if allocation is not None:
                return allocation
            unset = [
                name
                for name, value in (
                    ("--coordinator-address", self.coordinator),
                    ("--num-processes", self.expected),
                    ("--process-id", self.process_id),
                )
                if value is None
            ]
            return catalog.usage_invalid(
                f"no launcher was detected (Slurm, Open MPI, Kubernetes, mpi4py) and {', '.join(unset)} "
                f"{'is' if len(unset) == 1 else 'are'} not given",
                USAGE_FIX,
            )
        address = str(self.coordinator)
        if parse_address(address) is None:
            return catalog.usage_invalid(
                f"the coordinator address {address!r} is not HOST:PORT with a port from 1 to 65535", USAGE_FIX
            )
        expected, process = int(self.expected or 0), int(self.process_id or 0)
        if expected < 1 or not 0 <= process < expected:
            return catalog.usage_invalid(
                f"process id {process} is not within 0..{expected - 1} ({expected} processes)", USAGE_FIX
            )
        return None

    def _slurm_allocation_without_a_step(self) -> ClusterFinding | None:
        """An allocation's shell (salloc, or an sbatch script's own lines) has SLURM_JOB_ID but none of a task's
        variables: jax detects Slurm only in the tasks srun starts, so the fix is srun, not the three options."""
        job = _environment.read("SLURM_JOB_ID", self.environ)
        if job is None or _environment.read("SLURM_PROCID", self.environ) is not None:
            return None
        return catalog.usage_invalid(
            f"this shell is in Slurm job {job}'s allocation but not in a job step: jax detects a Slurm job only in "
            "the tasks srun starts",
            f"run it in every task: srun python -m {PLUGIN_PACKAGE} cluster (with the job's -N and --ntasks-per-node)",
        )

    def _before_join(self) -> ClusterFinding | None:
        """What jaxlib would only crash or hang on: an address that does not resolve, a port already taken."""
        from jax_rocm7_plugin._machine.network import resolves

        address = str(self.coordinator)
        parsed = parse_address(address)
        assert parsed is not None  # _usage_problem refused any other
        host, port = parsed.host, str(parsed.port)
        from jax_rocm7_plugin._safe_io import Deadline, with_deadline

        try:
            why = with_deadline(lambda: resolves(host), RESOLVE_SECONDS)
        except Deadline:
            why = f"no answer within {RESOLVE_SECONDS:g} s"
        if why is not None:
            return failures.does_not_resolve(address, why, self.process_id, self.host)
        if self.process_id == 0:
            bind = _environment.read("JAX_COORDINATOR_BIND_ADDRESS", self.environ) or f"[::]:{port}"
            taken = port_taken(bind)
            if taken is not None:
                return failures.port_in_use(port, self.host, (taken,))
        return None

    def _record(self, report_and_facts: tuple[Any, Any] | BaseException, detected: dict[str, Any]) -> str:
        from jax_rocm7_plugin._job.record import JoinFact, encode, failed_record

        ids = detected.get("local_device_ids")
        join = JoinFact(
            int(detected["process_id"]),
            int(detected["num_processes"]),
            detected.get("local_process_id"),
            tuple(ids) if ids is not None else None,
            str(detected["coordinator"]),
            str(detected.get("method") or "arguments"),
        )
        if isinstance(report_and_facts, BaseException):
            return encode(failed_record(join, self.host, report_and_facts))
        report, facts = report_and_facts
        try:
            return encode(record_of(report, facts, join, self.environ, self.host))
        except Exception as error:  # noqa: BLE001 - a probe we did not foresee failing: still a record
            return encode(failed_record(join, self.host, error))

    def _for_this_run(self, findings: list[ClusterFinding]) -> list[ClusterFinding]:
        """`--deep --platform cpu` runs the job's collectives on jax's CPU backend: a ROCm backend that would not
        come up is said (info), but does not decide that run's exit code."""
        if not (self.options.deep and self.options.platform == "cpu"):
            return findings
        return [
            f._replace(severity="info", summary=f"{f.summary} (not needed by this --platform cpu run)")
            if f.id == "cluster-backend-unavailable"
            else f
            for f in findings
        ]

    def _compare(self, link: CourierLink) -> int:
        from jax_rocm7_plugin._cluster.launcher import slurm_hosts
        from jax_rocm7_plugin._job.compare import compare, explained_by_health
        from jax_rocm7_plugin._job.record import decode

        try:
            gathered = link.wait_for(("records",), self.deadline + KILL_GRACE_SECONDS)
        except CourierGone as gone:
            return self.finish([self._gone(link, gone, "gathering the records")])
        if gathered["event"] == "error":
            return self.finish([self._courier_error(link, gathered)])
        records = {}
        findings: list[ClusterFinding] = []
        shared: dict[str, dict[str, Any]] = {}
        for key, text in gathered["records"].items():
            with contextlib.suppress(ValueError):  # a record that is none counts as missing
                records[int(key)] = decode(text, shared)
        missing = tuple(sorted({*gathered["missing"], *(int(k) for k in gathered["records"] if int(k) not in records)}))
        self.records = records
        expected = int(self.expected or 0)
        if missing:
            launcher = slurm_hosts(self.environ, expected) if self.method == "slurm" else None
            findings.append(failures.did_not_report(expected, missing, self.options.timeout, launcher))
        findings.extend(self._for_this_run(compare(records)))
        hosts = tuple(sorted({r.host for r in records.values()}))
        report = self.report(findings, tuple(sorted(records)), missing, hosts)
        link.send({"verdict": {"code": report.exit_code, "verdict": report.verdict}})
        wanted = ("done",) if self.options.deep else ("acked",)  # plain: the courier waits for the report first
        try:  # the verdict is out; the others say if they could not read it
            done = link.wait_for(wanted, time.time() + 2 * courier.ACK_GRACE_SECONDS + KILL_GRACE_SECONDS)
        except CourierGone:
            done = {}
        unread = [int(p) for p in done.get("unacked", ())]
        if unread and not self.options.deep:  # --deep names them at the step they never reached
            waited = float(done.get("waited", courier.ACK_GRACE_SECONDS))
            report = self._unread(report, unread, records, "the verdict", waited)
        if not self.options.deep:
            return self._printed_then_final(link, report, "done", courier.ACK_GRACE_SECONDS)
        result, deep_findings = self._deep(link, {pid: r.host for pid, r in records.items()})
        if result is not None:
            from jax_rocm7_plugin._job.compare import below_line_rate, rccl_findings

            deep_findings = [
                *deep_findings,
                *rccl_findings(result.rccl, records),
                *(below_line_rate(result.figures, records) if self.options.platform != "cpu" else ()),
            ]
        deep_findings = explained_by_health(deep_findings, report.findings, records)
        report = report._replace(
            findings=(*report.findings, *deep_findings),
            collectives=result.figures if result is not None else (),
            local_work=result.rates if result is not None else {},
            deep=True,
            elapsed_s=round(time.time() - self.started, 3),
        )
        from jax_rocm7_plugin._cluster.deep import FINAL_ACK_SECONDS, VERDICT_WAIT_SECONDS

        with contextlib.suppress(CourierGone, OSError):  # the others exit with the report's code too
            link.send({"deep-verdict": report.exit_code})
            acked = link.wait_for(("deep-acked",), time.time() + DEEP_VERDICT_SECONDS)
            unread = [int(p) for p in acked.get("unacked", ())]
            if unread:
                report = self._unread(
                    report, unread, records, "the job's exit code", float(acked.get("waited", VERDICT_WAIT_SECONDS))
                )
        return self._printed_then_final(link, report, "deep-finished", FINAL_ACK_SECONDS)

    def _printed_then_final(self, link: CourierLink, report: ClusterReport, last: str, seconds: float) -> int:
        """Process 0: the report out first, then the courier hands the others the job's code and waits (bounded)
        until they took it. Under mpirun the first process to exit non-zero ends the whole job, this one too."""
        code = self.show(report)
        link.send({"printed": True})
        with contextlib.suppress(CourierGone, OSError):
            link.wait_for((last,), time.time() + seconds + KILL_GRACE_SECONDS)
        return code

    def _unread(
        self, report: ClusterReport, unread: list[int], records: Mapping[int, Any], what: str, seconds: float
    ) -> ClusterReport:
        """Process 0: processes that handed everything in but never took `what` (stopped or gone at the end)."""
        hosts = tuple(sorted({records[p].host for p in unread if p in records}))
        finding = catalog.incomplete(
            f"{processes_phrase(unread)} on {hosts_phrase(hosts)} stopped answering at the end: "
            f"{'it' if len(unread) == 1 else 'they'} never took {what} within {seconds:g} s (stopped, killed or "
            "hung); the others exited with the code they took",
            "look at the processes named (their host's dmesg, the job's log of that rank, the launcher's exit status)",
            tuple(unread),
            hosts,
            (),
        )
        return report._replace(findings=(*report.findings, finding))

    def _await_verdict(self, link: CourierLink) -> int:
        try:
            event = link.wait_for(("verdict",), self.deadline + courier.ACK_GRACE_SECONDS + KILL_GRACE_SECONDS)
            why = str(event.get("message", ""))[:200] if event["event"] == "error" else None
        except CourierGone as gone:
            why = (
                "the deadline passed" if gone.why == "deadline" else f"the client {death_description(gone.returncode)}"
            )
        if why is not None:
            no_verdict = failures.no_verdict(str(self.coordinator), self.options.timeout, self._pid(), self.host, why)
            return self.finish([no_verdict])
        verdict = event["verdict"]
        self.say(f"process 0's verdict: {verdict.get('verdict')}")
        if self.options.deep:  # the courier runs the deep steps now; process 0 reports them, and the code
            try:
                done = self._deep_progress(link, "deep-done")
                code = int(done.get("code", EXIT_PROBLEMS)) if done["event"] == "deep-done" else EXIT_PROBLEMS
                if done.get("why"):
                    self.err.write(f"cluster preflight, process {self.process_id}: {done['why']}\n")
            except CourierGone as gone:
                self.err.write(f"cluster preflight, process {self.process_id}: {self._deep_loss(link, gone)}\n")
                code = EXIT_PROBLEMS
            link.close(time.time() + KILL_GRACE_SECONDS)
            return code if code in (0, 1, 2) else EXIT_PROBLEMS
        code = verdict.get("code")
        with contextlib.suppress(CourierGone):  # process 0's final code: 1 where a process never took the verdict
            final = link.wait_for(("final",), time.time() + 2 * courier.ACK_GRACE_SECONDS + KILL_GRACE_SECONDS)
            if final.get("code") is not None:
                code = final["code"]
        link.close(time.time() + KILL_GRACE_SECONDS)
        return code if code in (0, 1, 2) else EXIT_PROBLEMS

    # --- failures -----------------------------------------------------------------------------

    def _deep_loss(self, link: CourierLink, gone: CourierGone) -> str:
        """A process other than 0 whose deep courier ended early: who jax's failure detection blamed, if it did."""
        step = self.seen.step
        if gone.why == "deadline":
            return f"the deep steps' courier ran past its deadline in {step} (it is stopped or hung)"
        loss = failures.service_loss(link.stderr_text())
        if loss is not None and loss.dead:
            return (
                f"jax's coordination service declared {processes_phrase(list(loss.dead))} dead during "
                f"{step}, and jax ended this process's client; process 0 reports the job"
            )
        if loss is not None and loss.coordinator_lost:
            return (
                f"process 0 (the coordinator at {self.coordinator}, which holds jax's coordination service) stopped "
                f"answering during {step}: it is stopped, killed, or its host is gone; no report will come from it"
            )
        return f"the deep steps' courier {death_description(gone.returncode)} during {step}"

    def _pid(self) -> int:
        return int(self.process_id or 0)

    def _gone(self, link: CourierLink, gone: CourierGone, stage: str) -> ClusterFinding:
        if gone.why == "deadline":
            return catalog.join_failed(
                f"the preflight did not get past {stage} within {self.options.timeout:g} s",
                "raise --timeout if the file system or the launcher is slow",
                self.process_id,
                self.host,
                (),
            )
        return failures.courier_died(
            death_description(gone.returncode), stage, link.stderr_text(), self.process_id, self.host
        )

    def _courier_error(self, link: CourierLink, event: dict[str, Any]) -> ClusterFinding:
        stage, message = event.get("stage"), str(event.get("message", ""))
        if stage == "launcher":
            prerequisite = self._launcher_prerequisite()
            if prerequisite is not None:
                return prerequisite
            variables = ", ".join(f"{k}={v!r}" for k, v in (event.get("variables") or {}).items())
            method = event.get("method") or "the launcher"
            return catalog.usage_invalid(
                f"the {method} variables do not say how to join ({message})" + (f": {variables}" if variables else ""),
                "fix the launcher's variables (they come from the job script or the container spec), or give "
                "--coordinator-address, --num-processes and --process-id",
            )
        if stage == "detect":
            return catalog.usage_invalid(
                f"jax's cluster detection is not available here ({message})",
                "install jax in this environment (the preflight joins through jax.distributed)",
            )
        return failures.courier_died(f"failed ({message})", str(stage), link.stderr_text(), self.process_id, self.host)

    def _join_failure(
        self, link: CourierLink, cause: CourierGone | dict[str, Any], probe: _CoordinatorProbe | None
    ) -> ClusterFinding:
        from jax_rocm7_plugin._cluster.launcher import slurm_hosts
        from jax_rocm7_plugin._machine.network import is_loopback_host
        from jax_rocm7_plugin._policy.cluster_policy import loopback_names

        log = link.stderr_text()
        address = str(self.coordinator)
        parsed = parse_address(address)
        port = str(parsed.port) if parsed is not None else address
        if "Failed to add port" in log:
            return failures.port_in_use(port, self.host, tuple(filter(None, (failures.last_error_line(log),))))
        # jaxlib ends a client whose join timed out (the registration barrier) with its fatal handler: that is the
        # join's failure, told below; any other death while joining is the client's own.
        died = isinstance(cause, CourierGone) and cause.why == "exited" and (cause.returncode or 0) < 0
        if died and not failures.ended_by_jax(log):
            return failures.courier_died(
                death_description(cause.returncode), "joining", log, self.process_id, self.host
            )
        expected = int(self.expected or 0)
        if self.process_id == 0:
            launcher = slurm_hosts(self.environ, expected) if self.method == "slurm" else None
            finding, missing, self.join_count = failures.never_joined(expected, self.options.timeout, log, launcher)
            self.join_missing = missing
            return finding
        loopback = parsed is not None and is_loopback_host(parsed.host, loopback_names())
        seen = probe.answered() if probe is not None else False
        if seen and probe is not None:
            probe.linger_for_process_0()
        return failures.could_not_join(address, expected, self.options.timeout, seen, loopback, self._pid(), self.host)


class _CoordinatorProbe:
    """While a process waits to join: did anything ever answer at the coordinator's address?"""

    def __init__(self, address: str) -> None:
        parsed = parse_address(address)
        assert parsed is not None  # the preflight refused any other before joining
        self.target = (parsed.host, parsed.port)
        self.seen_up = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocm-coordinator-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and not self.seen_up:
            if self._answers():
                self.seen_up = True
            else:
                self._stop.wait(POLL_SECONDS)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(self.target, timeout=1.0):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        self._stop.set()

    def answered(self) -> bool:
        """After the join failed: did the coordinator ever answer? Asked once more now, because process 0 may have
        come up in the last moments of this process's wait, between two polls (seen in CI: the slowest process of a
        loaded machine was process 0, whose service took the late joiners' registrations and then their timeout)."""
        self.stop()
        self._thread.join(timeout=1.5)
        if not self.seen_up and self._answers():
            self.seen_up = True
        return self.seen_up

    def linger_for_process_0(self) -> None:
        """After a failed join, give process 0 the moment to write its report before this process exits: Open MPI
        ends the whole job (SIGTERM) at the first non-zero exit, and process 0's join deadline falls at about the
        same time as this one's. Waits until the coordinator stops answering (process 0's client has ended), then
        LINGER_AFTER_CLOSE_SECONDS for its report; LINGER_SECONDS at most."""
        deadline = time.monotonic() + LINGER_SECONDS
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(self.target, timeout=0.5):
                    pass
            except OSError:
                time.sleep(min(LINGER_AFTER_CLOSE_SECONDS, max(0.0, deadline - time.monotonic())))
                return
            time.sleep(0.2)


def port_taken(bind: str) -> str | None:
    """Why the coordinator could not listen at `bind` ("[::]:PORT", "0.0.0.0:PORT"), or None when it can."""
    import errno

    parsed = parse_address(bind)
    if parsed is None:
        return None  # not an address: the service says what it says of it
    family = socket.AF_INET6 if ":" in parsed.host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((parsed.host, parsed.port))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return f"bind({bind}): {error.strerror}"
        return None  # another reason (no IPv6 here, say): let the service try and say what it says
    return None


def run(options: Options, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """The preflight of this process; its exit code."""
    preflight = _Run(options, environ, out, err)
    try:
        return preflight.run()
    except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM: the courier is ended already (_Run.run)
        from jax_rocm7_plugin._interrupt import exit_code

        who = f"process {preflight.process_id}" if preflight.process_id is not None else "cluster"
        err.write(f"cluster preflight, {who}: interrupted ({interrupt}); its courier was ended, no report\n")
        return exit_code(interrupt)
    except Exception as error:  # noqa: BLE001 - one finding, never a traceback
        return preflight.finish([catalog.internal_error(error, preflight.host)])


def record_of(report: Any, facts: Any, join: Any, environ: Mapping[str, str], host: str) -> Any:
    """The preflight's record of this process: from the doctor's report and facts, with the host's probes."""
    from jax_rocm7_plugin._findings import first_blocking
    from jax_rocm7_plugin._job.record import BackendVerdict, build_record

    verdict = BackendVerdict.of(first_blocking(list(report.findings)))._replace(ok=report.ok)
    return build_record(facts, join, environ, host, verdict=verdict, packages=report.packages, host_probes=True)
