"""The job check at backend start, in front of the factory jax registered for our library: for the loader's cold
start (the record from what its checks learned) and for a warm start from a plan (the record the cold start of
an earlier job stated, with this process's own part stated now: how it joined, its host, its variables).

Imported only in a process of a multi-process job. What it imports up front is what every process needs to
publish its record and read the job's verdict; the comparison (process 0, and only where these records were not
seen agreeing before) and the record's building (the cold start) are imported where they run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._loader.warm import RocmUnavailable, distributed_job
from jax_rocm7_plugin._names import BACKEND, PLUGIN_PACKAGE

logger = logging.getLogger(PLUGIN_PACKAGE)

# How many jobs' agreeing records process 0 keeps a digest of (one empty file each, the oldest dropped first).
MEMORY_ENTRIES = 256
VERDICTS_FOLDER = "job-verdicts"  # beside the start-up plans, in the loader's private cache

MakeRecord = Callable[[dict[str, Any]], str]  # how this process joined -> its record, encoded


def join_fields(state: Any) -> dict[str, Any]:
    """How this process joined, as jax.distributed says (a record's `join`, in its field order): the local device
    ids are the visible devices jax.distributed.initialize gave the rocm backend (jax_rocm_visible_devices)."""
    from jax._src import xla_bridge

    visible = str(getattr(getattr(xla_bridge, "_ROCM_VISIBLE_DEVICES", None), "value", "all") or "all")
    ids = None if visible == "all" else [int(i) for i in visible.split(",") if i.strip()]
    return {
        "process_id": int(state.process_id),
        "num_processes": int(state.num_processes),
        "local_process_id": None,
        "local_device_ids": ids,
        "coordinator": str(getattr(state, "coordinator_address", None) or ""),
        "method": "jax.distributed",
    }


def jax_version() -> str | None:
    version = getattr(sys.modules.get("jax.version"), "_version", None)
    return str(version) if version is not None else None


# Set once a ROCm client has started (or failed to) through the job gate: the hang watcher reads its first GPU
# counters after it, not while the job starts.
backend_started = threading.Event()


def install(make_record: MakeRecord, required: bool) -> None:
    """In a multi-process job (the loader runs inside jax's plugin discovery, after jax.distributed is
    initialized), put the job check in front of the factory jax registered for our library.

    A refusal then falls back to CPU with one line where rocm was not required (`required`), as the loader's own
    refusals do (jax registers plugins to fail loudly); so that a client that fails to start is not hidden by
    that, it gets its one line too (rocm-client-failed). Where jax keeps its factories otherwise, the check steps
    aside."""
    from jax._src import xla_bridge

    if distributed_job() is None:
        return  # a single process: jax's factory as registered, nothing new
    registration = getattr(xla_bridge, "_backend_factories", {}).get(BACKEND)
    create = getattr(registration, "factory", None)
    if registration is None or create is None or not hasattr(registration, "fail_quietly"):
        logger.debug("the job check steps aside: jax keeps its backend factories in another form")
        return

    def checked() -> Any:
        try:
            return check_then_create()
        finally:
            backend_started.set()

    def check_then_create() -> Any:
        refusal = check(make_record, blocking=False, required=required)
        if refusal is not None:
            raise RocmUnavailable(refusal)
        try:
            return create()
        except Exception as error:
            if not required:
                from jax_rocm7_plugin._findings import rocm_client_failed

                finding = rocm_client_failed(error)
                logger.warning(
                    "ROCm backend unavailable, jax falls back to CPU: %s [%s]", finding.sentence(), finding.id
                )
            raise

    registration.factory = checked
    registration.fail_quietly = not required


def check(make_record: MakeRecord, *, blocking: bool, required: bool) -> str | None:
    """At backend start in a process of a multi-process job: the job's processes compare their records and all
    act on one verdict (_job/check.py). `blocking`: this process's own checks refused the backend already.
    Returns the sentence to raise where the verdict refuses the backend; None to go on. Never raises; single
    processes do nothing."""
    state = distributed_job()
    if state is None:
        return None
    client, count, process_id = state.client, int(state.num_processes), int(state.process_id)
    from jax_rocm7_plugin._job import check as job_check

    settings = job_check.read_settings(os.environ)
    for problem in settings.problems:
        logger.warning("ROCm backend: %s", problem)
    if settings.mode == "off":
        return None
    began, cpu = time.perf_counter(), time.thread_time()
    try:
        record = make_record(join_fields(state))
        outcome = job_check.run(
            client,
            process_id,
            count,
            record,
            start=job_check.next_start(),
            timeout=settings.timeout,
            memory=memory(os.environ) if process_id == 0 else None,
        )
    except Exception as error:  # noqa: BLE001 - an API this jaxlib lacks, a service gone: never worse than today
        logger.debug("the job check steps aside: %s: %s", type(error).__name__, error)
        return None
    verdict = outcome.verdict
    for key in outcome.taken:  # what only this process can see: its own write refused
        logger.warning(
            "ROCm backend: %s", job_check.TAKEN_LINES[key].format(process=process_id, line=verdict.line or verdict.kind)
        )
    wall, work = (time.perf_counter() - began) * 1000, (time.thread_time() - cpu) * 1000
    seen = " (these records agreed before)" if outcome.remembered else ""
    logger.debug("job check: %s in %.1f ms (%.1f ms of this process's CPU)%s", verdict.kind, wall, work, seen)
    if verdict.kind == "agree" or (verdict.kind == "warn" and process_id != 0):
        return None
    if process_id == 0 and verdict.kind == "refuse" and outcome.findings:
        logger.warning("%s", job_check.table(verdict, outcome.findings, count))
    if verdict.kind == "refuse" and settings.mode == "error":
        if not blocking and not required:
            logger.warning("ROCm backend unavailable, jax falls back to CPU: %s", verdict.line)
        elif blocking:
            logger.warning("ROCm backend: %s", verdict.line)
        return verdict.line
    logger.warning("ROCm backend: %s", verdict.line)
    return None


def memory(environ: Mapping[str, str]) -> Any | None:
    """Process 0's memory of jobs whose records agreed, in the loader's private cache (None where it has none:
    then it compares every time)."""
    from jax_rocm7_plugin._job.check import Memory
    from jax_rocm7_plugin._loader.warm import own_files, plans_dir
    from jax_rocm7_plugin._safe_io import read_trusted, write_private

    plans = plans_dir(environ)
    if plans is None:
        return None
    root = plans.parent
    folder = root / VERDICTS_FOLDER

    def knows(digest: str) -> bool:
        try:
            return read_trusted(folder / digest, 64, root) == "agree"
        except (OSError, ValueError):
            return False

    def keep(digest: str) -> None:
        if write_private(folder, digest, "agree", root):
            _forget_the_oldest(folder)

    return Memory(knows, keep, own_files())


def _forget_the_oldest(folder: Path) -> None:
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for stale in entries[: max(0, len(entries) - MEMORY_ENTRIES)]:
        with contextlib.suppress(OSError):
            stale.unlink()


def from_plan(job: Mapping[str, Any]) -> None:
    """A warm start in a job: the job check in front of jax's factory, with the record the plan's cold start
    stated (what the checks learned, the same for every process of this key) and this process's own part stated
    now; and the hang watcher, as the cold start starts it. Never raises."""
    try:
        install(lambda join: record_from_plan(job, join, os.environ), bool(job.get("required")))
    except Exception as error:  # noqa: BLE001 - the backend is registered; the check never costs it
        logger.debug("the job check steps aside: %s: %s", type(error).__name__, error)
    watch_for_hangs(rocm=True)


def record_from_plan(job: Mapping[str, Any], join: dict[str, Any], environ: Mapping[str, str]) -> str:
    """This process's record, encoded as _job/record.py encodes it: its own part (how it joined, its host, the
    variables that steer collectives, stated now by the rules the plan carries), then the plan's shared part. A
    record past the policy's bound (a very large environment) is re-encoded by the record's own rules."""
    from jax_rocm7_plugin._job.steering import steering_environment
    from jax_rocm7_plugin._loader.warm import sysroot
    from jax_rocm7_plugin._safe_io import host_name

    own = {
        "schema": job["schema"],
        "join": join,
        "host": host_name(sysroot(environ)),
        "environment": dict(steering_environment(environ, job.get("steering"))),
        "truncated": list(job.get("truncated", ())),
    }
    text = f"{json.dumps(own, separators=(',', ':'), ensure_ascii=True)}\n{job['shared']}"
    if len(text.encode()) > int(job["limit"]):
        from jax_rocm7_plugin._job.record import decode, encode

        text = encode(decode(text))
    return text


_hang_watcher: Any = None


def watch_for_hangs(*, rocm: bool) -> None:
    """In a process of a multi-process job, the hang watcher (_job/hang.py): where the ROCm backend was
    registered, or JAX_ROCM_HANG_PLATFORMS names another backend to watch (tests: cpu). Once per process."""
    global _hang_watcher
    state = distributed_job()
    if state is None or _hang_watcher is not None:
        return
    from jax_rocm7_plugin._job import hang

    settings = hang.read_settings(os.environ)
    if not rocm and not settings.platforms:
        return
    try:
        _hang_watcher = hang.start(
            state.client,
            int(state.process_id),
            int(state.num_processes),
            settings,
            alive=lambda: state.client is not None,
            baseline_after=backend_started if rocm else None,
        )
    except Exception as error:  # noqa: BLE001 - the watcher never harms the job
        logger.debug("the hang watcher steps aside: %s: %s", type(error).__name__, error)
