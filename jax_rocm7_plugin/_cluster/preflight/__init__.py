"""`python -m jax_rocm7_plugin cluster`: run in every process of a job; process 0 prints one report.

Each process starts its courier (which imports jax and joins the coordination service), runs the doctor meanwhile,
and hands the courier its record. Process 0 compares the records and publishes a verdict; every process exits with
its code (0 consistent, 1 problems, 2 usage), so the job step fails as a whole. Nothing here waits without a
deadline, and nothing jaxlib does can kill this process: the courier is a child.

The phases, each a module with typed inputs and outputs; this one only runs them in order and says the result:
join (join.py: who this process is, what jaxlib would crash on, why a join failed), exchange (exchange.py: this
process's record), compare (compare.py: process 0 reads the records), deep (deep.py: the job's collectives), verdict
(verdict.py: process 0 publishes it, the others take it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._cluster.courier import ACK_GRACE_SECONDS
from jax_rocm7_plugin._cluster.courier_link import CourierGone, CourierLink
from jax_rocm7_plugin._cluster.preflight import deep, exchange, join, verdict
from jax_rocm7_plugin._cluster.preflight.compare import compare_gathered
from jax_rocm7_plugin._cluster.preflight.options import KILL_GRACE_SECONDS, Here, Options
from jax_rocm7_plugin._cluster.report import ClusterReport, render_json, render_text
from jax_rocm7_plugin._job import catalog
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._names import PLUGIN_DISTRIBUTION

if TYPE_CHECKING:
    from jax_rocm7_plugin._job.record import ProcessRecord

__all__ = ["Options", "run"]


class _Run:
    """One process's preflight: the phases in order, and what to say at the end."""

    def __init__(self, options: Options, environ: Mapping[str, str], out: TextIO, err: TextIO) -> None:
        self.options, self.environ, self.out, self.err = options, dict(environ), out, err
        self.started = time.time()
        self.deadline = self.started + options.timeout
        # As far as known: the options, then the courier's detection (the report says them, even where they fail).
        self.process_id: int | None = options.process_id
        self.expected: int | None = options.num_processes
        self.coordinator: str | None = options.coordinator
        self.method: str | None = None
        self.host = "this host"
        self.join_count: int | None = None  # process 0: how many the coordinator saw join, where joining failed
        self.records: Mapping[int, ProcessRecord] = {}  # process 0: the records compared (for --html)
        self.steps: list[dict[str, Any]] = []  # process 0, --deep: the steps as gathered (for --trace)

    @property
    def here(self) -> Here:
        return Here(self.process_id, self.host, self.options.timeout)

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

    # --- the phases ---------------------------------------------------------------------------

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
        link.send(
            {
                "deadline": self.deadline,
                "timeout": options.timeout,
                "reserve": max(5.0, options.timeout * 0.25),
                "detect_timeout": int(options.timeout),
                "coordinator": options.coordinator,
                "num_processes": options.num_processes,
                "process_id": options.process_id,
                "local_device_ids": list(options.local_device_ids) if options.local_device_ids is not None else None,
                "deep": deep.deep_plan(options, self.host),
            }
        )
        diagnosis = exchange.diagnose(options, self.environ)  # while the courier imports jax
        # Join: who this process is, and what jaxlib would crash or hang on.
        try:
            detected = link.wait_for(("detected",), self.deadline)
        except CourierGone as gone:
            return self.finish([join.courier_gone(link, gone, "starting", self.here)])
        if detected["event"] == "error":
            return self.finish([join.courier_error(link, detected, self.here, self.environ)])
        self.method, self.coordinator = detected.get("method"), detected.get("coordinator")
        self.expected, self.process_id = detected.get("num_processes"), detected.get("process_id")
        joined = join.joined_as(detected, self.environ)
        if not isinstance(joined, join.Joined):
            link.send({"stop": True})
            return self.finish([joined])
        self.say(
            f"joining {joined.coordinator} as process {joined.process_id} of {joined.expected} (via {self.method})"
        )
        blocked = join.before_join(joined, self.environ, self.host)
        if blocked is not None:
            link.send({"stop": True})
            return self.finish([blocked])
        link.send({"go": True})
        # Exchange: the record goes with the join; process 0's courier gathers everyone's.
        link.send({"record": exchange.record_text(diagnosis, exchange.join_fact(detected), self.environ, self.host)})
        probe = join.CoordinatorProbe(joined.coordinator) if joined.process_id != 0 else None
        try:
            joined_event: CourierGone | dict[str, Any] = link.wait_for(("joined",), self.deadline + KILL_GRACE_SECONDS)
        except CourierGone as gone:
            joined_event = gone
        finally:
            if probe is not None:
                probe.stop()
        if isinstance(joined_event, CourierGone) or joined_event["event"] == "error":
            failure = join.join_failure(joined, self.here, self.environ, link, joined_event, probe)
            self.join_count = failure.joined_count
            return self.finish([failure.finding], missing=failure.missing)
        self.say("joined")
        if joined.process_id != 0:
            awaited = verdict.await_verdict(link, joined, options, self.deadline, self.host, self.err, self.say)
            if awaited.no_verdict is not None:
                return self.finish([awaited.no_verdict])
            assert awaited.code is not None
            return awaited.code
        return self._compare_and_publish(link, joined)

    def _compare_and_publish(self, link: CourierLink, joined: join.Joined) -> int:
        """Process 0: compare, publish the verdict, then (--deep) the steps and the job's code."""
        try:
            gathered = link.wait_for(("records",), self.deadline + KILL_GRACE_SECONDS)
        except CourierGone as gone:
            return self.finish([join.courier_gone(link, gone, "gathering the records", self.here)])
        if gathered["event"] == "error":
            return self.finish([join.courier_error(link, gathered, self.here, self.environ)])
        compared = compare_gathered(gathered, joined, self.options, self.environ)
        self.records = compared.records
        report = self.report(compared.findings, tuple(sorted(compared.records)), compared.missing, compared.hosts)
        report = verdict.publish(link, report, compared.records, self.options)
        if not self.options.deep:
            return verdict.printed_then_final(link, lambda: self.show(report), "done", ACK_GRACE_SECONDS)
        host_of = {pid: r.host for pid, r in compared.records.items()}
        gathered_deep = deep.gather(link, self.options, joined.expected, host_of, self.here, self.environ, self.say)
        self.steps = gathered_deep.steps
        result = gathered_deep.result
        report = report._replace(
            findings=(*report.findings, *deep.judged(gathered_deep, report.findings, compared.records, self.options)),
            collectives=result.figures if result is not None else (),
            local_work=result.rates if result is not None else {},
            deep=True,
            elapsed_s=round(time.time() - self.started, 3),
        )
        report = verdict.publish_deep(link, report, compared.records)
        from jax_rocm7_plugin._cluster.deep import FINAL_ACK_SECONDS

        final = report
        return verdict.printed_then_final(link, lambda: self.show(final), "deep-finished", FINAL_ACK_SECONDS)


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
