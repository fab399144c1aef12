"""The exchange phase: this process's record, from the doctor's run (made while the courier imports jax), handed to
the courier to publish; process 0's courier gathers everyone's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin._cluster.preflight.options import Options

if TYPE_CHECKING:
    from jax_rocm7_plugin._doctor.report import Report
    from jax_rocm7_plugin._job.record import JoinFact, ProcessRecord
    from jax_rocm7_plugin._pipeline import Facts

Diagnosis = tuple["Report", "Facts"]


def diagnose(options: Options, environ: Mapping[str, str]) -> Diagnosis | BaseException:
    """The doctor's report and facts of this process, or the error it failed with (said in the record)."""
    from jax_rocm7_plugin._doctor.diagnose import diagnose_with_facts
    from jax_rocm7_plugin._settings import read_settings

    try:
        settings = read_settings(environ, sysroot=options.sysroot, library=options.library)
        # Fixes are not checked by a second diagnosis here: every process of the job waits for the slowest, and
        # `doctor` on the odd host checks them.
        return diagnose_with_facts(settings, prove=False)
    except Exception as error:  # noqa: BLE001 - reported in the record as this process's error
        return error


def join_fact(detected: Mapping[str, Any]) -> JoinFact:
    from jax_rocm7_plugin._job.record import JoinFact

    ids = detected.get("local_device_ids")
    return JoinFact(
        int(detected["process_id"]),
        int(detected["num_processes"]),
        detected.get("local_process_id"),
        tuple(ids) if ids is not None else None,
        str(detected["coordinator"]),
        str(detected.get("method") or "arguments"),
    )


def record_text(diagnosis: Diagnosis | BaseException, join: JoinFact, environ: Mapping[str, str], host: str) -> str:
    """The record as the courier publishes it; a run that failed is still a record (its error said)."""
    from jax_rocm7_plugin._job.record import encode, failed_record

    if isinstance(diagnosis, BaseException):
        return encode(failed_record(join, host, diagnosis))
    report, facts = diagnosis
    try:
        return encode(record_of(report, facts, join, environ, host))
    except Exception as error:  # noqa: BLE001 - a probe we did not foresee failing: still a record
        return encode(failed_record(join, host, error))


def record_of(report: Report, facts: Facts, join: JoinFact, environ: Mapping[str, str], host: str) -> ProcessRecord:
    """The preflight's record of this process: from the doctor's report and facts, with the host's probes."""
    from jax_rocm7_plugin._findings import first_blocking
    from jax_rocm7_plugin._job.record import BackendVerdict, build_record

    verdict = BackendVerdict.of(first_blocking(list(report.findings)))._replace(ok=report.ok)
    return build_record(facts, join, environ, host, verdict=verdict, packages=report.packages, host_probes=True)
