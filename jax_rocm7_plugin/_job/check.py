"""The job check at backend start: the processes of a multi-process job compare their records and all act on
one verdict, before any of them creates the ROCm client.

Each process but 0 publishes its record (record.py, without the preflight's host probes) at
`jax_rocm7/job-check/<start>/record/<process>` in jax's coordination service. Process 0 reads them (O(N)),
compares them and its own with the preflight's own rules (compare.py) and publishes one verdict at
`jax_rocm7/job-check/<start>/verdict`; every other process reads only that key (O(1)). Process 0 keeps its own
record: nobody else reads it, and a call less on the path every process waits on. A process that gives up
waiting publishes an "incomplete" verdict there instead. The service refuses to set a key twice, so the first
verdict set is the one every process acts on, whoever set it. `<start>` counts this process's backend starts
(the processes of a job start their backends in the same order), so a second start in one job, after
jax.clear_backends(), never reads the first one's keys.

Pure but for the store (anything with the coordination client's three methods) and the clock: the loader
passes jax's client, the tests a dict-backed store.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Literal

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._job.store import Store, process_of, read_published, wait_ms
from jax_rocm7_plugin._names import PLUGIN_PACKAGE
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:  # what the comparison needs is imported where it runs: a job whose records were seen agreeing
    # before settles without it (`Memory`), and the other processes only read the verdict
    from jax_rocm7_plugin._findings import Finding
    from jax_rocm7_plugin._job.catalog import ClusterFinding
    from jax_rocm7_plugin._job.record import JoinFact, ProcessRecord
    from jax_rocm7_plugin._machine.gpu_health import NodeHealth
    from jax_rocm7_plugin._pipeline import Facts

    # Type checkers' only (the records read their annotations by name): nothing built at import
    Mode = Literal["error", "warn", "off"]
    VerdictKind = Literal["agree", "refuse", "warn", "incomplete"]

MODE_VARIABLE = _environment.JOB_CHECK
TIMEOUT_VARIABLE = _environment.JOB_CHECK_TIMEOUT
# jax.distributed.initialize has already waited for every process to connect, so a healthy job's processes
# reach backend start seconds apart; the default (_environment) leaves minutes for one that loads data or
# compiles first. (The ROCm client's own start waits for every process too, so a late process costs the others
# that time either way.)
DEFAULT_TIMEOUT_SECONDS = _environment.DEFAULT_JOB_CHECK_TIMEOUT
# The others wait this much longer than process 0, which compares after its own wait.
VERDICT_GRACE_SECONDS = 5.0
# How long a process that could not set the verdict waits to read the one that was set first.
READ_BACK_SECONDS = 5.0
PREFIX = "jax_rocm7/job-check"
SUMMARY_MAX_CHARS = 300
CLUSTER_COMMAND = f"python -m {PLUGIN_PACKAGE} cluster"

_starts: Iterator[int] = itertools.count()


class CheckSettings(NamedTuple):
    mode: Mode
    timeout: float
    problems: tuple[str, ...]  # one sentence per bad value (the default is used)


def read_settings(environ: Mapping[str, str]) -> CheckSettings:
    """JAX_ROCM_JOB_CHECK (error, warn or off) and JAX_ROCM_JOB_CHECK_TIMEOUT (seconds, above 0), as declared."""
    mode, timeout = _environment.setting(MODE_VARIABLE, environ), _environment.setting(TIMEOUT_VARIABLE, environ)
    problems = tuple(p for p in (mode.problem, timeout.problem) if p is not None)
    return CheckSettings(mode.value, timeout.value, problems)


class Verdict(NamedTuple):
    """What every process of the job acts on. `line`: what each prints ("" where all agree)."""

    kind: VerdictKind
    line: str = ""
    processes: tuple[int, ...] = ()  # the odd ones: those a refusal or warning concerns, or those missing
    missing: tuple[int, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {"kind": self.kind, "line": self.line, "processes": list(self.processes), "missing": list(self.missing)}
        )

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        """A verdict as a peer (process 0, or whoever wrote the key first) published it: its line printable and cut
        to a line's length, its process ids whole numbers (_job/peer.py); ValueError where it is none."""
        from jax_rocm7_plugin._job import peer

        try:
            data = peer.loads(text)
            kind = data["kind"]
            if kind not in ("agree", "refuse", "warn", "incomplete"):
                raise ValueError(f"verdict kind {kind!r}")
            return cls(
                kind,
                peer.printable(data["line"]),
                tuple(peer.integer(p) for p in data["processes"]),
                tuple(peer.integer(p) for p in data["missing"]),
            )
        except (KeyError, TypeError, peer.Malformed) as error:
            raise ValueError(f"not a job-check verdict: {error}") from None


class Memory(NamedTuple):
    """Process 0's memory of jobs whose records agreed: `knows(digest)` and `keep(digest)` (the loader keeps it in
    its private cache, beside the start-up plans). `salt` names the comparison's code, so that another release's
    memory is never taken for this one's."""

    knows: Callable[[str], bool]
    keep: Callable[[str], None]
    salt: str


# The coordinator's port changes with every job; no rule reads it (the loopback rule reads its host). A pattern,
# compiled (and cached by re) where process 0 first takes a digest: the other processes never do.
_COORDINATOR_PORT = r'("coordinator":"[^"]*):\d+"'


def records_digest(texts: Mapping[int, str], salt: str) -> str:
    """What the comparison reads of a job's records, as one digest: every record as published, in process
    order, but for the coordinator's port."""
    digest = hashlib.sha256(salt.encode())
    for process in sorted(texts):
        digest.update(f"\0{process}\0".encode())
        digest.update(re.sub(_COORDINATOR_PORT, r'\1"', texts[process]).encode())
    return digest.hexdigest()


class Outcome(NamedTuple):
    verdict: Verdict
    findings: tuple[ClusterFinding, ...] = ()  # process 0's, for its table; empty elsewhere
    remembered: bool = False  # process 0 found these records in its memory of agreeing jobs
    # The keys this process found set by another when it wrote its own: "record" (a process other than 0), or
    # "verdict" (process 0, where the verdict set first is not one a process that gave up waiting writes).
    taken: tuple[str, ...] = ()


# What a process says where its own write was refused (Outcome.taken): nobody else can see it.
TAKEN_LINES = {
    "record": "the job check's record key of process {process} was already set when this process wrote its own: "
    "two processes were given id {process}, or something that is no process of this job writes to the "
    "coordination service; the job acts on the verdict it reads [cluster-record-taken]",
    "verdict": "the job's verdict was set before process 0 set its own, by a writer that is no process waiting "
    "for it: every process acts on that one ({line}) [cluster-record-taken]",
}


def _already_set(error: Exception) -> bool:
    """The service's refusal to set a key twice (jaxlib's ALREADY_EXISTS status, in its error's message)."""
    return "ALREADY_EXISTS" in str(error)


def next_start() -> int:
    """This process's backend starts, counted from 0."""
    return next(_starts)


def run(
    store: Store,
    process_id: int,
    num_processes: int,
    record: str,
    *,
    start: int,
    timeout: float,
    grace: float = VERDICT_GRACE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    memory: Memory | None = None,
) -> Outcome:
    """Publish `record` (encoded; process 0 keeps its own), then settle on the job's verdict: process 0 waits
    `timeout` for the others' records, the others `timeout + grace` for the verdict. Exceptions from the store
    other than a wait running out propagate: the caller steps aside. `memory`: where process 0 finds that these
    very records agreed before (then it settles on agreement without comparing again) and keeps them when they
    do."""
    base = f"{PREFIX}/{start}"
    if process_id == 0:
        others = read_published(store, f"{base}/record", range(1, num_processes), clock() + timeout, clock)
        texts = {0: record, **others}
        digest = records_digest(texts, memory.salt) if memory is not None and len(texts) == num_processes else None
        if digest is not None and memory is not None and memory.knows(digest):
            return Outcome(_settle(store, base, Verdict("agree")), (), remembered=True)
        records, unreadable = _parse(texts)
        taken = _taken(store, base, records, num_processes)
        records = {p: r for p, r in records.items() if p not in taken}
        missing = tuple(sorted({*(p for p in range(num_processes) if p not in texts), *unreadable} - set(taken)))
        findings = (*_taken_findings(taken), *_findings(records))
        verdict = decide(records, findings, missing, timeout, count=num_processes)
        settled = _settle(store, base, verdict)
        if digest is not None and memory is not None and settled.kind == "agree":
            memory.keep(digest)
        forged = settled != verdict and settled.kind != "incomplete"  # a process that gave up writes "incomplete"
        return Outcome(settled, findings if settled == verdict else (), taken=("verdict",) if forged else ())
    try:
        store.key_value_set(f"{base}/record/{process_id}", record)
        taken_key: tuple[str, ...] = ()
    except Exception as error:
        if not _already_set(error):
            raise
        taken_key = ("record",)  # said by this process; process 0 hears of it where this comes before it reads
        with contextlib.suppress(Exception):
            store.key_value_set(f"{base}/taken/{process_id}", record)
    try:
        text = store.blocking_key_value_get(f"{base}/verdict", wait_ms(timeout + grace))
    except Exception:  # noqa: BLE001 - jaxlib raises its runtime error when the wait runs out
        return Outcome(_without_verdict(store, base, process_id, num_processes, timeout), taken=taken_key)
    return Outcome(Verdict.from_json(text), taken=taken_key)


class _Taken(NamedTuple):
    host: str | None  # as the process's own record names it (None: unreadable)
    why: str


def _taken(store: Store, base: str, records: Mapping[int, ProcessRecord], num_processes: int) -> dict[int, _Taken]:
    """Processes whose record under their id is not theirs: those that said their key was taken (`taken/<id>`,
    holding their own record), and records that name another process id than their key's."""
    from jax_rocm7_plugin._job.record import decode

    found: dict[int, _Taken] = {}
    for process, record in records.items():
        if record.process_id != process:
            found[process] = _Taken(None, f"the record under process {process}'s key names process {record.process_id}")
    try:
        listed = store.key_value_dir_get(f"{base}/taken/")
    except Exception:  # noqa: BLE001 - an API this jaxlib lacks, a service gone: the records alone
        listed = []
    for key, text in listed:
        process = process_of(key)
        if not 0 < process < num_processes:
            continue
        try:
            host: str | None = decode(text).host
        except ValueError:
            host = None
        found[process] = _Taken(host, f"process {process} found its record key set when it wrote its own")
    return found


def _taken_findings(taken: Mapping[int, _Taken]) -> list[ClusterFinding]:
    if not taken:
        return []
    from jax_rocm7_plugin._job.catalog import record_taken

    processes = tuple(sorted(taken))
    hosts = tuple(sorted({t.host for t in taken.values() if t.host is not None}))
    return [record_taken(processes, hosts, tuple(taken[p].why for p in processes))]


def _without_verdict(store: Store, base: str, process_id: int, num_processes: int, timeout: float) -> Verdict:
    """Where no verdict came in time: "incomplete", naming process 0 and (as process 1 finds them) the processes
    whose record never came. Only process 1 lists the records: at 10,000 processes a listing is 15 MB, and every
    process listing them at once from the service of a stuck process 0 would bury it. The others first wait for
    process 1's verdict, then settle on process 0 alone (process 1 is silent too)."""
    if process_id != 1:
        try:
            return Verdict.from_json(store.blocking_key_value_get(f"{base}/verdict", wait_ms(READ_BACK_SECONDS)))
        except Exception:  # noqa: BLE001 - nothing came, or nothing readable
            return _settle(store, base, no_verdict((0,), timeout))
    present = {0, *(process_of(key) for key, _ in store.key_value_dir_get(f"{base}/record/"))}
    return _settle(store, base, no_verdict((0, *(p for p in range(num_processes) if p not in present)), timeout))


def _parse(texts: Mapping[int, str]) -> tuple[dict[int, ProcessRecord], tuple[int, ...]]:
    from jax_rocm7_plugin._job.record import decode

    records: dict[int, ProcessRecord] = {}
    unreadable: list[int] = []
    shared: dict[str, dict[str, object]] = {}
    for process, text in texts.items():
        try:
            records[process] = decode(text, shared)
        except ValueError:  # another release's record, or garbage: it counts as missing
            unreadable.append(process)
    return records, tuple(unreadable)


def _findings(records: Mapping[int, ProcessRecord]) -> list[ClusterFinding]:
    from jax_rocm7_plugin._job.compare import compare_at_backend_start

    if not any(r.ok for r in records.values()):
        return []  # no process would start the backend: each has said why, and nothing differs that matters
    return compare_at_backend_start(records)


def refuses(finding: ClusterFinding) -> bool:
    """Where the job's collectives would hang or compute wrongly: errors, but for known issues (which warn)."""
    return finding.severity == "error" and finding.id != "cluster-known-issue"


def decide(
    records: Mapping[int, ProcessRecord],
    findings: tuple[ClusterFinding, ...],
    missing: tuple[int, ...],
    timeout: float,
    count: int | None = None,
) -> Verdict:
    """Refuse where a finding refuses; else incomplete where processes are missing; else warn; else agree. `count`:
    the job's processes (where some are neither compared nor missing: their record was taken)."""
    count = count if count is not None else len(records) + len(missing)
    refusing = [f for f in findings if refuses(f)]
    if refusing:
        first = refusing[0]
        also = f"; {len(refusing) - 1} more reason(s)" if len(refusing) > 1 else ""
        from jax_rocm7_plugin._job.phrases import processes_phrase

        late = f"; {processes_phrase(missing)} did not report" if missing else ""
        line = (
            f"the ROCm backend starts in none of this job's {count} processes: {_bounded(first.summary)}{also}"
            f"{late}; process 0 printed the table, and `{CLUSTER_COMMAND}` checks a job before it runs [{first.id}]"
        )
        return Verdict("refuse", line, first.processes, missing)
    if missing:
        return no_verdict(missing, timeout)
    problems = [f for f in findings if f.is_problem]
    if problems:
        first = problems[0]
        also = f"; {len(problems) - 1} more" if len(problems) > 1 else ""
        line = f"this job's processes differ: {_bounded(first.summary)}{also}; the ROCm backend starts [{first.id}]"
        return Verdict("warn", line, first.processes)
    return Verdict("agree")


def no_verdict(missing: tuple[int, ...], timeout: float) -> Verdict:
    """The check could not conclude: never a reason to fail a job that may well be healthy. `missing`: the
    processes whose record never came, and process 0 where its verdict never came (it publishes no record)."""
    silent = tuple(p for p in missing if p != 0)
    heard = []
    if silent:
        from jax_rocm7_plugin._job.phrases import processes_phrase

        heard.append(f"heard nothing from {processes_phrase(silent)} (host unknown: no record came)")
    if 0 in missing or not missing:
        heard.append("got no verdict from process 0")
    line = f"the job check {' and '.join(heard)} within {timeout:g} s ({TIMEOUT_VARIABLE})"
    return Verdict("incomplete", f"{line}; the ROCm backend starts unchecked [cluster-incomplete]", missing, missing)


def _bounded(text: str) -> str:
    return text if len(text) <= SUMMARY_MAX_CHARS else text[: SUMMARY_MAX_CHARS - 3] + "..."


def _settle(store: Store, base: str, verdict: Verdict) -> Verdict:
    """Set the job's verdict unless one is set already; the one set first, either way."""
    key = f"{base}/verdict"
    try:
        store.key_value_set(key, verdict.to_json())
        return verdict
    except Exception:  # noqa: BLE001 - ALREADY_EXISTS: another process settled it first
        pass
    try:
        return Verdict.from_json(store.blocking_key_value_get(key, wait_ms(READ_BACK_SECONDS)))
    except Exception:  # noqa: BLE001 - unreadable: ours is the best this process knows
        return verdict


def local_record(
    facts: Facts,
    blocking: Finding | None,
    join: JoinFact,
    environ: Mapping[str, str],
    jax_version: str | None,
    node: NodeHealth | None = None,
) -> str:
    """This process's record at backend start, encoded: the loader's facts and verdict (`blocking`: its first
    blocking finding, None where the backend would come up), the versions every process states alike (also
    where the loader's checks stopped early), no host probes. `node`: the node's health, where read already."""
    from jax_rocm7_plugin._job.record import BackendVerdict, build_record, encode
    from jax_rocm7_plugin._machine.host import host_name
    from jax_rocm7_plugin._machine.jaxlib_version import jaxlib_version
    from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION
    from jax_rocm7_plugin.version import __version__ as plugin_version

    packages = (
        (PLUGIN_DISTRIBUTION, plugin_version),
        (PJRT_DISTRIBUTION, _pjrt_version(facts)),
        ("jax", jax_version),
        ("jaxlib", facts.jaxlib or jaxlib_version()),
    )
    host = host_name(facts.settings.sysroot)
    verdict = BackendVerdict.of(blocking)
    return encode(
        build_record(facts, join, environ, host, verdict=verdict, packages=packages, host_probes=False, node=node)
    )


def _pjrt_version(facts: Facts) -> str | None:
    """The pjrt wheel's release as its build_info states it (where the loader's checks did not get that far)."""
    if facts.library is not None and facts.library.pjrt_version is not None:
        return facts.library.pjrt_version
    import importlib
    import importlib.util

    from jax_rocm7_plugin._names import PJRT_PACKAGE

    try:
        if importlib.util.find_spec(PJRT_PACKAGE) is None:
            return None
        return str(importlib.import_module(PJRT_PACKAGE).build_info()["version"])
    except (ImportError, OSError, ValueError, KeyError, AttributeError):
        return None


def table(verdict: Verdict, findings: tuple[ClusterFinding, ...], count: int) -> str:
    """Process 0's full text: the verdict, then each finding as the preflight prints it."""
    head = {
        "refuse": "Job check: the ROCm backend does not start",
        "warn": "Job check: the ROCm backend starts; the processes differ",
        "incomplete": "Job check: incomplete",
        "agree": "Job check: consistent",
    }[verdict.kind]
    from jax_rocm7_plugin._job.catalog import finding_lines

    return "\n".join([f"{head} ({count} processes)", *finding_lines(findings)])
