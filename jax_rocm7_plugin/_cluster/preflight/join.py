"""The join phase: who this process is in the job (as the courier's launcher detection says), what jaxlib would only
crash or hang on before it joins, and what a failed join means (from the courier's log and the coordinator probe)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._cluster import failures
from jax_rocm7_plugin._cluster.courier_link import CourierGone, CourierLink, death_description
from jax_rocm7_plugin._cluster.preflight.options import Here
from jax_rocm7_plugin._job import catalog
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._names import PLUGIN_PACKAGE
from jax_rocm7_plugin._policy.grammar import parse_address
from jax_rocm7_plugin._record import NamedTuple

RESOLVE_SECONDS = 5.0
LINGER_SECONDS = 5.0  # a process other than 0 whose join failed waits this long at most for process 0's report
LINGER_AFTER_CLOSE_SECONDS = 1.0
POLL_SECONDS = 0.25  # the coordinator probe's pause between two connection attempts
USAGE_FIX = (
    "launch it the way the job is launched (srun, mpirun, a Kubernetes JobSet), or give --coordinator-address "
    "HOST:PORT --num-processes N --process-id I"
)


class Joined(NamedTuple):
    """This process's place in the job, checked: what it joins with."""

    process_id: int
    expected: int
    coordinator: str  # HOST:PORT
    method: str | None  # the launcher jax detected it from (None: the options)


class JoinFailure(NamedTuple):
    finding: ClusterFinding
    missing: tuple[int, ...] = ()  # process 0: who the coordinator saw never join
    joined_count: int | None = None  # process 0: how many it saw join


def joined_as(detected: Mapping[str, Any], environ: Mapping[str, str]) -> Joined | ClusterFinding:
    """The courier's detection (the options, else jax's launcher detection) checked: a place in the job, or why
    there is none."""
    coordinator, expected, process_id = (detected.get(k) for k in ("coordinator", "num_processes", "process_id"))
    if coordinator is None or expected is None or process_id is None:
        prerequisite = launcher_prerequisite(environ)
        if prerequisite is not None:
            return prerequisite
        allocation = _slurm_allocation_without_a_step(environ)
        if allocation is not None:
            return allocation
        given = (("--coordinator-address", coordinator), ("--num-processes", expected), ("--process-id", process_id))
        unset = [name for name, value in given if value is None]
        return catalog.usage_invalid(
            f"no launcher was detected (Slurm, Open MPI, Kubernetes, mpi4py) and {', '.join(unset)} "
            f"{'is' if len(unset) == 1 else 'are'} not given",
            USAGE_FIX,
        )
    address = str(coordinator)
    if parse_address(address) is None:
        return catalog.usage_invalid(
            f"the coordinator address {address!r} is not HOST:PORT with a port from 1 to 65535", USAGE_FIX
        )
    count, process = int(expected or 0), int(process_id or 0)
    if count < 1 or not 0 <= process < count:
        return catalog.usage_invalid(
            f"process id {process} is not within 0..{count - 1} ({count} processes)", USAGE_FIX
        )
    return Joined(process, count, address, detected.get("method"))


def launcher_prerequisite(environ: Mapping[str, str]) -> ClusterFinding | None:
    """A launcher jax joins through a module that is not installed here, or that this jax does not detect
    (_policy/launchers.json): that is the cause, and its prerequisite the fix."""
    import importlib.util

    from jax_rocm7_plugin._machine.packages import installed_version
    from jax_rocm7_plugin._policy.launchers import missing_prerequisite

    found = missing_prerequisite(
        environ, lambda name: importlib.util.find_spec(name) is not None, installed_version("jax")
    )
    return catalog.usage_invalid(*found) if found is not None else None


def _slurm_allocation_without_a_step(environ: Mapping[str, str]) -> ClusterFinding | None:
    """An allocation's shell (salloc, or an sbatch script's own lines) has SLURM_JOB_ID but none of a task's
    variables: jax detects Slurm only in the tasks srun starts, so the fix is srun, not the three options."""
    job = _environment.read("SLURM_JOB_ID", environ)
    if job is None or _environment.read("SLURM_PROCID", environ) is not None:
        return None
    return catalog.usage_invalid(
        f"this shell is in Slurm job {job}'s allocation but not in a job step: jax detects a Slurm job only in "
        "the tasks srun starts",
        f"run it in every task: srun python -m {PLUGIN_PACKAGE} cluster (with the job's -N and --ntasks-per-node)",
    )


def before_join(joined: Joined, environ: Mapping[str, str], host: str) -> ClusterFinding | None:
    """What jaxlib would only crash or hang on: an address that does not resolve, a port already taken."""
    from jax_rocm7_plugin._machine.network import resolves
    from jax_rocm7_plugin._safe_io import Deadline, with_deadline

    parsed = parse_address(joined.coordinator)
    assert parsed is not None  # joined_as refused any other
    try:
        why = with_deadline(lambda: resolves(parsed.host), RESOLVE_SECONDS)
    except Deadline:
        why = f"no answer within {RESOLVE_SECONDS:g} s"
    if why is not None:
        return failures.does_not_resolve(joined.coordinator, why, joined.process_id, host)
    if joined.process_id == 0:
        bind = _environment.read("JAX_COORDINATOR_BIND_ADDRESS", environ) or f"[::]:{parsed.port}"
        taken = port_taken(bind)
        if taken is not None:
            return failures.port_in_use(str(parsed.port), host, (taken,))
    return None


def join_failure(
    joined: Joined,
    here: Here,
    environ: Mapping[str, str],
    link: CourierLink,
    cause: CourierGone | dict[str, Any],
    probe: CoordinatorProbe | None,
) -> JoinFailure:
    """Why the join failed, read from the courier's log (jaxlib's words), and, for a process other than 0, whether
    the coordinator ever answered."""
    from jax_rocm7_plugin._cluster.launcher import slurm_hosts
    from jax_rocm7_plugin._machine.network import is_loopback_host
    from jax_rocm7_plugin._policy.cluster_policy import loopback_names

    log = link.stderr_text()
    parsed = parse_address(joined.coordinator)
    port = str(parsed.port) if parsed is not None else joined.coordinator
    if "Failed to add port" in log:
        return JoinFailure(failures.port_in_use(port, here.host, tuple(filter(None, (failures.last_error_line(log),)))))
    # jaxlib ends a client whose join timed out (the registration barrier) with its fatal handler: that is the
    # join's failure, told below; any other death while joining is the client's own.
    died = isinstance(cause, CourierGone) and cause.why == "exited" and (cause.returncode or 0) < 0
    if died and not failures.ended_by_jax(log):
        assert isinstance(cause, CourierGone)
        return JoinFailure(
            failures.courier_died(death_description(cause.returncode), "joining", log, joined.process_id, here.host)
        )
    if joined.process_id == 0:
        launcher = slurm_hosts(environ, joined.expected) if joined.method == "slurm" else None
        finding, missing, count = failures.never_joined(joined.expected, here.timeout, log, launcher)
        return JoinFailure(finding, missing, count)
    loopback = parsed is not None and is_loopback_host(parsed.host, loopback_names())
    seen = probe.answered() if probe is not None else False
    if seen and probe is not None:
        probe.linger_for_process_0()
    return JoinFailure(
        failures.could_not_join(
            joined.coordinator, joined.expected, here.timeout, seen, loopback, joined.process_id, here.host
        )
    )


def courier_error(
    link: CourierLink, event: Mapping[str, Any], here: Here, environ: Mapping[str, str]
) -> ClusterFinding:
    """The courier said it failed: the launcher's variables, jax's detection, or a stage of its own."""
    stage, message = event.get("stage"), str(event.get("message", ""))
    if stage == "launcher":
        prerequisite = launcher_prerequisite(environ)
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
    return failures.courier_died(f"failed ({message})", str(stage), link.stderr_text(), here.process_id, here.host)


def courier_gone(link: CourierLink, gone: CourierGone, stage: str, here: Here) -> ClusterFinding:
    """The courier ended, or ran past the deadline, in `stage`."""
    if gone.why == "deadline":
        return catalog.join_failed(
            f"the preflight did not get past {stage} within {here.timeout:g} s",
            "raise --timeout if the file system or the launcher is slow",
            here.process_id,
            here.host,
            (),
        )
    return failures.courier_died(
        death_description(gone.returncode), stage, link.stderr_text(), here.process_id, here.host
    )


class CoordinatorProbe:
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
