"""The figures of `cluster --deep` (_cluster/collectives.py): sizes, nccl-tests' bandwidths, and the findings
read from process 0's gathering of the steps."""

from __future__ import annotations

from typing import Any

import pytest

from jax_rocm7_plugin._cluster.collectives import (
    DEFAULT_SIZES,
    bus_factor,
    figure,
    parse_sizes,
    read_steps,
    size_text,
    slow_local_work,
    slow_processes,
    table_lines,
)

HOSTS = {0: "gpu-0", 1: "gpu-0", 2: "gpu-1", 3: "gpu-1"}


def test_sizes() -> None:
    assert parse_sizes("1M, 8,64K,8") == (8, 64 * 1024, 1024 * 1024)
    assert parse_sizes("256MiB,4kb,16B") == (16, 4096, 256 * 1024 * 1024)
    for bad in ("", "8,,16", "lots", "2", "8G"):
        with pytest.raises(ValueError):
            parse_sizes(bad)
    assert DEFAULT_SIZES[0] == 8 and DEFAULT_SIZES[-1] == 256 * 1024 * 1024 and DEFAULT_SIZES[-2] == 128 * 1024**2
    assert [size_text(s) for s in (8, 2048, 3 * 1024 * 1024, 1000)] == ["8 B", "2 KiB", "3 MiB", "1000 B"]


def test_bandwidths_as_nccl_tests_defines_them() -> None:
    one = figure("all-reduce", 1_000_000_000, 0.5, 8)
    assert one.algbw_gbps == 2.0 and one.busbw_gbps == pytest.approx(2.0 * 2 * 7 / 8)
    gather = figure("all-gather", 1_000_000_000, 1.0, 4)
    assert gather.busbw_gbps == pytest.approx(1.0 * 3 / 4)
    assert bus_factor("all-reduce", 1) == 0.0
    alone = figure("all-reduce", 8, 0.001, 1)  # one rank: no bus figure, null in --json, "-" in the table
    assert alone.busbw_gbps is None and alone.to_json()["busbw_gbps"] is None
    assert "-" in table_lines((alone,))[1].split() and "busbw -" in table_lines((alone,))[-1]
    with pytest.raises(ValueError):
        bus_factor("broadcast", 4)


def test_slow_processes_against_the_median() -> None:
    assert slow_processes({0: 100.0, 1: 98.0, 2: 40.0, 3: 101.0}) == (2,)
    assert slow_processes({0: 100.0, 1: 60.0}) == ()
    assert slow_processes({0: 100.0}) == ()


def _step(name: str, outcomes: dict[int, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra, "outcomes": {str(p): o for p, o in outcomes.items()}}


def _ok(seconds: float = 0.01, **extra: Any) -> dict[str, Any]:
    return {"ok": True, "seconds": seconds, **extra}


def test_a_healthy_gathering_gives_one_figure_per_collective_from_the_slowest_process() -> None:
    steps = [
        _step("backend", {p: _ok() for p in range(4)}),
        _step("local-work", {p: _ok(gflops=100.0 + p) for p in range(4)}),
        _step("all-reduce/1024", {p: _ok(0.001 * (p + 1), ranks=4) for p in range(4)}, op="all-reduce", bytes=1024),
    ]
    result = read_steps(steps, 4, HOSTS, 10.0)
    assert result.findings == ()
    (only,) = result.figures
    assert (only.op, only.bytes, only.seconds, only.ranks) == ("all-reduce", 1024, 0.004, 4)
    assert len(table_lines(result.figures)) == 2 and result.rates[3] == 103.0


def test_a_silent_process_is_named_as_the_hang_and_later_steps_are_not_read() -> None:
    stuck = {"ok": False, "timeout": True, "error": "not done within 10 s"}
    steps = [
        _step("all-reduce/8", {0: stuck, 1: stuck, 3: stuck}, op="all-reduce", bytes=8),
        _step("all-gather/8", {p: _ok(ranks=4) for p in range(4)}, op="all-gather", bytes=8),
    ]
    result = read_steps(steps, 4, HOSTS, 10.0)
    (hung,) = result.findings
    assert hung.id == "cluster-collective-hung" and hung.processes == (2,) and hung.hosts == ("gpu-1",)
    assert "never reported" in hung.summary and "waited it out" in hung.summary and result.figures == ()


def test_wrong_results_failures_and_slow_processes_are_named() -> None:
    steps = [
        _step("first-jit", {0: _ok(), 1: {"ok": False, "error": "RuntimeError: boom"}, 2: _ok(), 3: _ok()}),
        _step("local-work", {0: _ok(gflops=100.0), 1: _ok(gflops=100.0), 2: _ok(gflops=20.0), 3: _ok(gflops=99.0)}),
        _step(
            "all-reduce/8",
            {0: _ok(ranks=4), 1: _ok(ranks=4), 2: _ok(ranks=4), 3: {"ok": False, "wrong": True, "error": "gave 7"}},
            op="all-reduce",
            bytes=8,
        ),
    ]
    found = {f.id: f for f in read_steps(steps, 4, HOSTS, 10.0).findings}
    assert found["cluster-deep-failed"].processes == (1,) and "boom" in found["cluster-deep-failed"].summary
    assert found["cluster-process-slow"].processes == (2,) and found["cluster-process-slow"].severity == "warning"
    assert found["cluster-collective-wrong"].processes == (3,)


def test_group_steps_cover_every_host_and_every_ring_pair_in_few_rounds() -> None:
    from jax_rocm7_plugin._cluster.deep import group_steps

    for hosts in (2, 3, 4, 5, 8):
        host_of = {p: f"h{p // 2}" for p in range(2 * hosts)}
        steps = group_steps(host_of, [8, 1024, 128 * 1024 * 1024])
        assert steps[0]["name"] == "hosts/1024" and len(steps[0]["groups"]) == hosts
        rounds = steps[1:]
        assert len(rounds) == (0 if hosts == 2 else 2 if hosts % 2 == 0 else 3)
        pairs = [g for step in rounds for g in step["groups"]]
        if hosts > 2:
            assert sorted(pairs) == sorted({f"pair:h{i},h{(i + 1) % hosts}" for i in range(hosts)})
        for step in rounds:  # a process is in at most one group per round
            members = [p for m in step["groups"].values() for p in m]
            assert len(members) == len(set(members))
    assert group_steps({0: "a", 1: "b"}, [8]) == []  # one device per host, two hosts: the job step says it all


def test_a_slow_host_and_its_links_are_named() -> None:
    groups = {"host:a": [0, 1], "host:b": [2, 3], "host:c": [4, 5]}
    outcomes = {p: _ok(0.002, ranks=2) for p in range(6)}
    outcomes[2] = outcomes[3] = _ok(0.02, ranks=2)
    steps = [_step("hosts/1024", outcomes, op="all-reduce", bytes=1024, groups=groups)]
    result = read_steps(steps, 6, {p: "abc"[p // 2] for p in range(6)}, 10.0)
    assert [f.group for f in result.figures] == ["host:a", "host:b", "host:c"]
    (slow,) = result.findings
    assert slow.id == "cluster-link-slow" and slow.processes == (2, 3) and slow.hosts == ("b",)


def _pair_rounds(slow_pairs: set[str], hosts: int = 4) -> list[dict[str, Any]]:
    """The ring's pair steps over `hosts` hosts of one process each; the pairs in `slow_pairs` 20 times slower."""
    from jax_rocm7_plugin._cluster.deep import group_steps

    steps = group_steps({p: f"h{p}" for p in range(hosts)}, [1024])
    for step in steps:
        outcomes = {}
        for group, members in step["groups"].items():
            for p in members:
                outcomes[p] = {**_ok(0.02 if group in slow_pairs else 0.001, ranks=2), "group": group}
        step["outcomes"] = {str(p): o for p, o in outcomes.items()}
    return steps


def test_a_host_in_every_slow_pair_is_named_alone() -> None:
    steps = _pair_rounds({"pair:h0,h1", "pair:h1,h2"})
    (slow,) = read_steps(steps, 4, {p: f"h{p}" for p in range(4)}, 10.0).findings
    assert slow.id == "cluster-link-slow" and slow.hosts == ("h1",) and slow.processes == (1,)
    assert "h0 and h1; h1 and h2" in slow.summary and "h1 is in every slow pair" in slow.summary
    assert len(slow.evidence) == 2


def test_one_slow_pair_names_both_of_its_hosts() -> None:
    steps = _pair_rounds({"pair:h2,h3"})
    (slow,) = read_steps(steps, 4, {p: f"h{p}" for p in range(4)}, 10.0).findings
    assert slow.hosts == ("h2", "h3") and slow.processes == (2, 3) and "every slow pair" not in slow.summary


def test_processes_that_skipped_a_step_on_the_abort_are_not_named() -> None:
    aborted = {"ok": False, "aborted": True, "error": "not run: another process stopped the job"}
    outcomes = {0: {"ok": False, "timeout": True, "error": "not done within 10 s"}, 1: aborted, 2: aborted}
    steps = [_step("pairs-2/1024", outcomes, op="all-reduce", bytes=1024, groups={"pair:a,b": [0, 3]})]
    (hung,) = read_steps(steps, 4, {p: "ab"[p // 2] for p in range(4)}, 10.0).findings
    assert hung.id == "cluster-collective-hung" and hung.processes == (3,) and "never reported" in hung.summary
    only_aborted = [_step("all-reduce/8", {0: _ok(ranks=2), 1: aborted}, op="all-reduce", bytes=8)]
    assert read_steps(only_aborted, 2, {0: "a", 1: "a"}, 10.0).findings == ()


def test_a_failure_says_its_cause_once() -> None:
    """The summary holds the first cause (for the processes that share it); the evidence only the other causes."""
    failing = {"ok": False, "error": "RuntimeError: gloo connect refused"}
    steps = [_step("first-jit", {0: _ok(), 1: failing, 2: failing, 3: {"ok": False, "error": "OSError: no memory"}})]
    (failed,) = read_steps(steps, 4, HOSTS, 10.0).findings
    said = [failed.summary, *failed.evidence]
    assert sum("gloo connect refused" in line for line in said) == 1
    assert failed.evidence == ("process 3: OSError: no memory",) and failed.processes == (1, 2, 3)


def test_one_rank_has_no_bus_bandwidth_and_the_table_says_why() -> None:
    lines = table_lines((figure("all-reduce", 1024, 0.001, 1, "host:a"), figure("all-reduce", 1024, 0.001, 4)))
    assert lines[1].count("GB/s") == 1 and lines[1].split()[-3] == "-" and lines[2].count("GB/s") == 2
    assert lines[-1] == "  busbw -: one rank moves nothing over a link (nccl-tests' factor (n-1)/n is 0)"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short enough", 40, "short enough"),
        ("RuntimeError: the collective timed out waiting for peers", 31, "RuntimeError: the collective..."),
        ("x" * 50, 20, "x" * 17 + "..."),  # one word longer than the limit: cut inside it, marked
    ],
)
def test_text_is_cut_at_a_word_with_an_ellipsis(text: str, limit: int, expected: str) -> None:
    from jax_rocm7_plugin._job.phrases import clipped

    assert clipped(text, limit) == expected and len(clipped(text, limit)) <= limit


def test_on_shared_cores_hosts_are_compared_not_the_processes_of_one_host() -> None:
    """--platform cpu: processes of one host share its cores; the scheduler's favourite among them names nothing,
    a host whose processes all ran slow is named with its processes."""
    one_host = {0: "a", 1: "a", 2: "a", 3: "a"}
    uneven = {0: 90.0, 1: 20.0, 2: 85.0, 3: 80.0}
    assert slow_local_work(uneven, one_host, shared_cores=False)[0] == (1,)
    assert slow_local_work(uneven, one_host, shared_cores=True)[0] == ()
    two_each = {p: "ab"[p // 2] for p in range(4)}
    assert slow_local_work({0: 30.0, 1: 80.0, 2: 50.0, 3: 60.0}, two_each, shared_cores=True)[0] == ()
    three_hosts = {p: "abc"[p // 2] for p in range(6)}
    rates = {0: 80.0, 1: 70.0, 2: 20.0, 3: 15.0, 4: 75.0, 5: 90.0}
    slow, median, of_what = slow_local_work(rates, three_hosts, shared_cores=True)
    assert slow == (2, 3) and median == 75.0 and "hosts" in of_what
    steps = [_step("local-work", {p: _ok(gflops=r) for p, r in rates.items()})]
    (finding,) = read_steps(steps, 6, three_hosts, 10.0, shared_cores=True).findings
    assert finding.id == "cluster-process-slow" and finding.processes == (2, 3) and finding.hosts == ("b",)
    assert read_steps(steps[:1], 6, {p: "a" for p in range(6)}, 10.0, shared_cores=True).findings == ()
