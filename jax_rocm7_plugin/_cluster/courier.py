"""The courier: the child process that joins jax's coordination service and carries the records.

Run by the preflight as `python -m jax_rocm7_plugin._cluster.courier`, one per process of the
job. It is the only part that imports jax, and it never creates a backend. It runs in a child
because jaxlib's coordination client can only die when things go wrong: a busy coordinator port
is a SIGSEGV, and jax.distributed.initialize aborts every process when a peer never joins. Here a
death is read by the parent, which says what happened in one sentence.

It uses jax's own cluster detection (`ClusterEnv.auto_detect_unset_distributed_params`, what
`jax.distributed.initialize()` calls) and jaxlib's service and client (what initialize builds).
Where the service declares a task dead (no heartbeat for `heartbeat_seconds`), every client ends its
process with that verdict in its log (jaxlib's own fatal handler: a Python callback in its place
dies of std::bad_cast in jaxlib 0.10.2 before saying anything); the parent reads the log
(`failures.service_loss`). The heartbeat outlasts the preflight's own deadline, so only `--deep`'s
longer run meets it.

Protocol: JSON lines. Parent -> courier: the job, then {"go": true} or {"stop": ...}, the record,
and on process 0 the verdict. Courier -> parent: events `detected`, `joined`, `records` (process 0)
or `verdict` then `final` (the others: the job's exit code, where a process never took the verdict),
`done` (process 0: with the processes that never took it), or `error` with the stage it failed in.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from typing import Any

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._job.store import read_published, wait_ms

PREFIX = "jax_rocm7/cluster"  # every key of ours lives under jax_rocm7/ (README "Inside a job")
ACK_GRACE_SECONDS = 5.0
HEARTBEAT_MARGIN_SECONDS = 30
PARENT_VARIABLE = _environment.COURIER_PARENT  # the parent's pid, so a courier started after its parent died ends
# What each launcher's module in jax reads: named when their values do not parse.
LAUNCHER_VARIABLES: dict[str, tuple[str, ...]] = {
    "slurm": ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID"),
    "ompi": ("OMPI_MCA_orte_hnp_uri", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
    "k8s": ("KUBERNETES_SERVICE_HOST", "JOB_COMPLETION_INDEX", "HOSTNAME"),
}
_write_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    with _write_lock:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


def fail(stage: str, message: str, **fields: Any) -> None:
    emit("error", stage=stage, message=message, **fields)
    sys.stdout.flush()
    os._exit(3)


def read_message() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        os._exit(4)  # the parent is gone: nothing to report to
    message: dict[str, Any] = json.loads(line)
    return message


def remaining_ms(deadline: float) -> int:
    return wait_ms(deadline - time.time())


def detect(job: dict[str, Any]) -> dict[str, Any]:
    """The join parameters: as given, else from the environment as jax.distributed.initialize() finds them.
    jax itself (about a second of CPU) is imported only where its detection is needed."""
    coordinator = job.get("coordinator") or _environment.read("JAX_COORDINATOR_ADDRESS") or None
    num_processes, process_id = job.get("num_processes"), job.get("process_id")
    local_ids = job.get("local_device_ids")
    text = _environment.read("JAX_LOCAL_DEVICE_IDS")
    if local_ids is None and text:
        try:
            local_ids = [int(i) for i in text.split(",")]
        except ValueError:
            fail("launcher", f"JAX_LOCAL_DEVICE_IDS={text!r} is not a comma-separated list of integers")
    method = "arguments"
    local_process_id = None
    if None in (coordinator, num_processes, process_id, local_ids):
        from jax._src import clusters

        env = next(
            (e for e in clusters.ClusterEnv._cluster_types if not e.opt_in_only_method and e.is_env_present()),
            None,
        )
        if env is not None:
            method = env.name
            try:
                coordinator, num_processes, process_id, local_ids = (
                    clusters.ClusterEnv.auto_detect_unset_distributed_params(
                        coordinator, num_processes, process_id, local_ids, None, job["detect_timeout"]
                    )
                )
                local_process_id = env.get_local_process_id()
            except Exception as error:  # noqa: BLE001 - a launcher's variables that do not parse: said in one line
                names = LAUNCHER_VARIABLES.get(env.name, ())
                values = {n: v for n in names if (v := _environment.read(n)) is not None}
                fail("launcher", f"{type(error).__name__}: {error}", method=env.name, variables=values)
    return {
        "coordinator": coordinator,
        "num_processes": num_processes,
        "process_id": process_id,
        "local_device_ids": None if local_ids is None else [int(i) for i in local_ids],
        "local_process_id": local_process_id,
        "method": method,
    }


def heartbeat_seconds(timeout: float) -> int:
    """jax's failure detection for the courier's client: a task silent this long is declared dead. Longer than
    the preflight's whole --timeout (so its own deadlines name who is missing, with the records so far)."""
    return int(timeout) + HEARTBEAT_MARGIN_SECONDS


def join(found: dict[str, Any], job: dict[str, Any], join_seconds: int) -> tuple[Any, Any]:
    """Process 0 starts the service; every process connects. The service (None but on process 0) and the
    client, both kept alive by the caller until os._exit."""
    # jaxlib's extension, the one jax.distributed builds its service and client from; imported without jax.
    try:
        import jaxlib._jax as xla
    except ImportError:  # jaxlib releases before the module was renamed
        from jaxlib import xla_extension as xla  # type: ignore[no-redef]

    coordinator, process_id = found["coordinator"], found["process_id"]
    heartbeat = heartbeat_seconds(job["timeout"])
    service = None
    if process_id == 0:
        from jax_rocm7_plugin._policy.grammar import parse_address

        parsed = parse_address(coordinator)
        assert parsed is not None  # the preflight refused any other before starting this courier
        port = parsed.port
        bind = _environment.read("JAX_COORDINATOR_BIND_ADDRESS") or f"[::]:{port}"
        service = xla.get_distributed_runtime_service(
            bind,
            found["num_processes"],
            heartbeat_timeout=heartbeat,
            cluster_register_timeout=join_seconds,
            shutdown_timeout=5,
        )

    client = xla.get_distributed_runtime_client(
        coordinator,
        process_id,
        init_timeout=join_seconds,
        heartbeat_timeout=heartbeat,
        shutdown_on_destruction=False,
        use_compression=True,
    )
    try:
        client.connect()
    except Exception as error:  # noqa: BLE001 - jaxlib says "std::bad_cast" here: the parent explains
        fail("join", f"{type(error).__name__}: {error}")
    return service, client


def gather(client: Any, count: int, deadline: float) -> tuple[dict[int, str], list[int]]:
    """Process 0: every record that arrives before the deadline, and the process ids whose never did."""
    records = read_published(client, f"{PREFIX}/record", range(count), deadline, time.time)
    return records, [p for p in range(count) if p not in records]


def die_with_parent() -> None:
    """The courier never outlives its parent (killed by a launcher, interrupted before it could end us): the
    kernel sends SIGKILL when the parent goes (prctl PR_SET_PDEATHSIG), and a parent gone already ends it now."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != int(_environment.read(PARENT_VARIABLE) or os.getppid()):
        os._exit(4)


def main() -> None:
    die_with_parent()
    job = read_message()
    deadline = float(job["deadline"])
    try:
        found = detect(job)
    except Exception as error:  # noqa: BLE001 - jax missing or changed: the parent names it
        fail("detect", f"{type(error).__name__}: {error}")
    emit("detected", **found)
    answer = read_message()
    if not answer.get("go"):
        os._exit(0)
    # The exchange after joining needs a few seconds: the join may use the rest.
    join_seconds = max(1, int(deadline - time.time() - float(job["reserve"])))
    _service, client = join(found, job, join_seconds)  # the service lives in process 0 until os._exit
    emit("joined")
    process_id, count = found["process_id"], found["num_processes"]
    record = read_message()["record"]
    try:
        client.key_value_set(f"{PREFIX}/record/{process_id}", record)
    except Exception as error:  # noqa: BLE001
        fail("publish", f"{type(error).__name__}: {error}")
    if process_id == 0:
        records, missing = gather(client, count, deadline)
        emit("records", records=records, missing=missing)
        verdict = read_message()["verdict"]
        try:
            client.key_value_set(f"{PREFIX}/verdict", json.dumps(verdict))
        except Exception as error:  # noqa: BLE001
            fail("verdict", f"{type(error).__name__}: {error}")
        # Stay until the others have read the verdict: the service lives in this process.
        began = time.time()
        until = began + ACK_GRACE_SECONDS  # after the deadline too: the gathering may have used it all
        try:
            acked = read_published(client, f"{PREFIX}/ack", [p for p in records if p != 0], until, time.time)
        except Exception:  # noqa: BLE001 - the service is in this process; a listing that fails names nobody
            acked = {p: "" for p in records}
        unacked = sorted(p for p in records if p != 0 and p not in acked)
        if not job.get("deep"):  # --deep ends with a code of its own
            # The report is printed before anyone takes the job's code: under mpirun the first process to exit
            # non-zero ends the job, process 0 with it, which must not be before its report is out.
            emit("acked", unacked=unacked, waited=round(time.time() - began, 1))
            read_message()  # {"printed": true}; a parent that is gone ends this courier (exit 4)
            hand_final_code(client, int(verdict.get("code", 1)), unacked, acked)
        emit("done", unacked=unacked)
        if job.get("deep"):
            run_deep(client, _service, found, job)
        os._exit(0)
    else:
        try:
            # Process 0 gathers until the deadline where a record is missing, then compares: give it the grace.
            wait = remaining_ms(deadline + ACK_GRACE_SECONDS)
            verdict = json.loads(client.blocking_key_value_get(f"{PREFIX}/verdict", wait))
        except Exception as error:  # noqa: BLE001
            fail("verdict", f"{type(error).__name__}: {error}")
        emit("verdict", verdict=verdict)
        with contextlib.suppress(Exception):  # process 0 may be gone already; the verdict is ours
            client.key_value_set(f"{PREFIX}/ack/{process_id}", "1")
        if not job.get("deep"):
            final = None
            with contextlib.suppress(Exception):  # process 0 gone after the verdict: the verdict's code stands
                final = int(client.blocking_key_value_get(f"{PREFIX}/final", wait_ms(2 * ACK_GRACE_SECONDS)))
                client.key_value_set(f"{PREFIX}/final-ack/{process_id}", "1")
            emit("final", code=final)
    emit("done")
    if job.get("deep"):
        run_deep(client, _service, found, job)
    os._exit(0)  # no destructors: the client's shutdown is a barrier of its own


def hand_final_code(client: Any, code: int, unacked: list[int], acked: dict[int, str]) -> None:
    """Process 0: the job's exit code, which process 0's report will have: the verdict's, or 1 where a process
    never took the verdict (the report names it). The others exit with it; stay until they have read it."""
    final = code if code != 0 or not unacked else 1
    with contextlib.suppress(Exception):
        client.key_value_set(f"{PREFIX}/final", str(final))
        until = time.time() + ACK_GRACE_SECONDS
        read_published(client, f"{PREFIX}/final-ack", sorted(acked), until, time.time)


def run_deep(client: Any, service: Any, found: dict[str, Any], job: dict[str, Any]) -> None:
    """cluster --deep: the job's collectives, in this child (deep.py); then this courier ends."""
    from jax_rocm7_plugin._cluster import deep

    try:
        deep.run(client, service, found, job["deep"], emit, read_message)
    except Exception as error:  # noqa: BLE001 - jax's distributed state or a release without shard_map
        fail("deep", f"{type(error).__name__}: {error}")
    os._exit(0)


if __name__ == "__main__":
    main()
