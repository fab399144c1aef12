"""The figures of `cluster --deep`: message sizes, a step's time for the job, bandwidths as nccl-tests defines
them, and the processes whose own work is slow. Pure: the courier measures, process 0's parent reads.

Bandwidth (nccl-tests, doc/PERFORMANCE.md; rccl-tests the same): for a collective over n ranks (devices) that
took t seconds on a buffer of S bytes, algbw = S / t. The bus bandwidth corrects for what the operation must
move, so that it compares with the hardware's peak whatever n is: all-reduce busbw = algbw x 2(n-1)/n;
all-gather busbw = algbw x (n-1)/n, where S is the gathered (output) size. A collective ends when its slowest
rank does: the job's time for a step is the largest of the processes' times.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from jax_rocm7_plugin._findings import Concerns
from jax_rocm7_plugin._job import catalog
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._job.phrases import hosts_phrase, processes_phrase
from jax_rocm7_plugin._names import PLUGIN_PACKAGE
from jax_rocm7_plugin._pages.svg import size_text as size_text  # the tables write sizes as the pages do
from jax_rocm7_plugin._policy.grammar import parse_size
from jax_rocm7_plugin._record import NamedTuple

K = TypeVar("K")  # what slow_processes ranks: process ids, or places (host and pair groups)
KIB, MIB = 1024, 1024 * 1024
# 8 B to 128 MiB in powers of 4 (8 x 4^k), then 256 MiB: the range where latency gives way to bandwidth.
DEFAULT_SIZES: tuple[int, ...] = (*(8 * 4**k for k in range(13)), 256 * MIB)
OPERATIONS = ("all-reduce", "all-gather")
# A process whose own work runs below this fraction of the job's median is named as slow. A healthy node runs
# within a few percent of its peers (same model, same clocks); half is far outside noise and still catches a
# node throttled, shared or in a degraded power state.
SLOW_FRACTION = 0.5


def parse_sizes(text: str) -> tuple[int, ...]:
    """ "8,1K,16M,256MiB" -> bytes, ascending and each once; ValueError naming the entry that is none."""
    sizes: set[int] = set()
    for entry in text.split(","):
        value = parse_size(entry)  # the one reading of sizes (_policy/grammar.py)
        if value is None:
            raise ValueError(f"{entry.strip()!r} is not a size (e.g. 8, 64K, 16M, 1G)")
        if not 4 <= value <= 4 * 1024 * MIB:
            raise ValueError(f"{entry.strip()!r}: sizes go from 4 B (one float32) to 4 GiB")
        sizes.add(value)
    return tuple(sorted(sizes))


class Figure(NamedTuple):
    """One collective at one size in one group of the job (what `--json` lists under `collectives`)."""

    op: str  # "all-reduce", "all-gather"
    bytes: int
    seconds: float
    ranks: int  # devices taking part
    group: str  # "job", "host:<name>", "pair:<a>,<b>"
    algbw_gbps: float
    busbw_gbps: float | None  # None (JSON null) for one rank: nothing crosses a link, so there is no bus figure

    def to_json(self) -> dict[str, object]:
        return dict(self._asdict())  # every field a JSON scalar, in order; Figure(**entry) reads it back


def bus_factor(op: str, ranks: int) -> float:
    if ranks < 2:
        return 0.0  # nothing crosses a bus
    if op == "all-reduce":
        return 2 * (ranks - 1) / ranks
    if op == "all-gather":
        return (ranks - 1) / ranks
    raise ValueError(f"no bus bandwidth rule for {op!r}")


def figure(op: str, size: int, seconds: float, ranks: int, group: str = "job") -> Figure:
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return Figure(op, size, seconds, ranks, group, algbw, algbw * bus_factor(op, ranks) if ranks > 1 else None)


def job_seconds(per_process: Mapping[int, float]) -> float:
    """The job's time for a collective: its slowest process's."""
    return max(per_process.values())


def slow_processes(rates: Mapping[K, float], fraction: float = SLOW_FRACTION) -> tuple[K, ...]:
    """The processes (or places) whose rate is below `fraction` of the median rate of them all."""
    if len(rates) < 2:
        return ()
    median = statistics.median(rates.values())
    return tuple(sorted(p for p, rate in rates.items() if rate < fraction * median))


class DeepResult(NamedTuple):
    figures: tuple[Figure, ...]
    findings: tuple[ClusterFinding, ...]
    rates: dict[int, float]  # each process's local work, GFLOP/s
    rccl: Mapping[int, tuple[str, str]] = MappingProxyType({})  # each process's network as RCCL's lines say it


def slow_local_work(
    rates: Mapping[int, float], host_of: Mapping[int, str], shared_cores: bool
) -> tuple[tuple[int, ...], float, str]:
    """The processes whose local work ran slow, the median they fell below, and what that median is of. With
    `shared_cores` (the CPU platform) the processes of one host share its cores, and which of them the scheduler
    favoured says nothing of the host: there each host's median rate is compared with the other hosts', and a
    slow host's processes are named."""
    if not rates:
        return (), 0.0, "the job's median rate"
    if not shared_cores:
        return slow_processes(rates), statistics.median(rates.values()), "the job's median rate"
    by_host: dict[str, list[float]] = {}
    for process, rate in rates.items():
        by_host.setdefault(host_of.get(process, "unknown host"), []).append(rate)
    host_rates = {host: statistics.median(r) for host, r in by_host.items()}
    slow_hosts = set(slow_processes(host_rates))
    slow = tuple(sorted(p for p in rates if host_of.get(p, "unknown host") in slow_hosts))
    return (
        slow,
        statistics.median(host_rates.values()),
        "the median of the hosts' rates (their processes share each host's CPU)",
    )


def read_steps(
    steps: list[dict[str, Any]],
    count: int,
    host_of: Mapping[int, str],
    step_timeout: float,
    shared_cores: bool = False,
) -> DeepResult:
    """Process 0's courier's gathering (each step with every process's outcome) as figures and findings.
    `shared_cores`: the devices are the hosts' CPUs (--platform cpu), shared by each host's processes."""
    figures: list[Figure] = []
    findings: list[ClusterFinding] = []
    rates: dict[int, float] = {}

    def concerns(processes: list[int]) -> tuple[tuple[int, ...], tuple[str, ...]]:
        ordered = tuple(sorted(set(processes)))
        return ordered, tuple(sorted({host_of.get(p, "unknown host") for p in ordered}))

    for step in steps:
        outcomes = {int(p): o for p, o in step.get("outcomes", {}).items()}
        name = str(step["name"])
        silent = [p for p in range(count) if p not in outcomes]
        stuck = [p for p, o in outcomes.items() if o.get("timeout")]
        if silent or stuck:
            culprits = silent or stuck
            processes, hosts = concerns(culprits)
            waited = f"; {processes_phrase(sorted(stuck))} waited it out" if silent and stuck else ""
            findings.append(
                catalog.mismatch(
                    "cluster-collective-hung",
                    "error",
                    f"{name} did not finish: {processes_phrase(list(processes))} on {hosts_phrase(hosts)} never "
                    f"reported it (stopped, killed or hung){waited}"
                    if silent
                    else f"{name} did not finish within {step_timeout:g} s in {processes_phrase(list(processes))}",
                    "look at the processes named first (their host's dmesg, the job's log of that rank); raise "
                    "--step-timeout only if the step is merely slow",
                    processes,
                    hosts,
                    tuple(f"process {p}: {o.get('error')}" for p, o in sorted(outcomes.items()) if not o.get("ok"))[
                        :16
                    ],
                )
            )
            break  # later steps did not run
        wrong = sorted(p for p, o in outcomes.items() if o.get("wrong"))
        failed = sorted(p for p, o in outcomes.items() if not (o.get("ok") or o.get("wrong") or o.get("aborted")))
        if wrong:
            processes, hosts = concerns(wrong)
            findings.append(
                catalog.mismatch(
                    "cluster-collective-wrong",
                    "error",
                    f"{name} gave a wrong result in {processes_phrase(wrong)} on {hosts_phrase(hosts)}",
                    "do not run the job on these hosts until the GPU, driver and RCCL there pass again; "
                    f"`python -m {PLUGIN_PACKAGE} doctor --deep` on each",
                    processes,
                    hosts,
                    tuple(f"process {p}: {outcomes[p].get('error')}" for p in wrong[:16]),
                )
            )
        if failed:
            processes, hosts = concerns(failed)
            first = outcomes[failed[0]].get("error")
            # The cause is said once: in the summary for the processes that share it, in the evidence for the others.
            others = [p for p in failed if outcomes[p].get("error") != first]
            sharing = [p for p in failed if p not in others]
            findings.append(
                catalog.mismatch(
                    "cluster-deep-failed",
                    "error",
                    f"{name} failed in {processes_phrase(sharing)} on {hosts_phrase(hosts)}: {first}",
                    f"run `python -m {PLUGIN_PACKAGE} doctor --deep` on the hosts named",
                    processes,
                    hosts,
                    tuple(f"process {p}: {outcomes[p].get('error')}" for p in others[:16]),
                )
            )
        if name == "local-work":
            rates = {p: float(o["gflops"]) for p, o in outcomes.items() if o.get("ok") and o.get("gflops")}
            found, median, of_what = slow_local_work(rates, host_of, shared_cores)
            slow = list(found)
            if slow:
                processes, hosts = concerns(slow)
                findings.append(
                    catalog.mismatch(
                        "cluster-process-slow",
                        "warning",
                        f"{processes_phrase(slow)} on {hosts_phrase(hosts)} ran the same local work below "
                        f"{SLOW_FRACTION:.0%} of {of_what} ({median:.1f} GFLOP/s): every collective waits for them",
                        "look for throttling (amd-smi metric: power, temperature, clocks), other jobs on the host, "
                        "or a GPU in a degraded state; move the job off these hosts meanwhile",
                        processes,
                        hosts,
                        tuple(f"process {p}: {rates[p]:.1f} GFLOP/s" for p in slow[:16]),
                    )
                )
        elif "groups" in step and not wrong and not failed:
            for group, members in step["groups"].items():
                times = {p: float(outcomes[p]["seconds"]) for p in members if "seconds" in outcomes.get(p, {})}
                if len(times) == len(members):
                    ranks = int(outcomes[members[0]].get("ranks", len(members)))
                    figures.append(figure(str(step["op"]), int(step["bytes"]), job_seconds(times), ranks, group))
        elif "op" in step and len(outcomes) == count and all(o.get("ok") for o in outcomes.values()):
            seconds = job_seconds({p: float(o["seconds"]) for p, o in outcomes.items()})
            ranks = int(next(iter(outcomes.values())).get("ranks", count))
            figures.append(figure(str(step["op"]), int(step["bytes"]), seconds, ranks))
    group_of = {g: m for step in steps for g, m in step.get("groups", {}).items()}
    findings.extend(_slow_links(figures, group_of, host_of, concerns))
    return DeepResult(tuple(figures), tuple(findings), rates, rccl_chosen(steps))


def rccl_chosen(steps: list[dict[str, Any]]) -> dict[int, tuple[str, str]]:
    """Each process's network from RCCL's INIT/NET lines, as its first collective's outcome carries it."""
    chosen: dict[int, tuple[str, str]] = {}
    for step in steps:
        for process, outcome in step.get("outcomes", {}).items():
            said = outcome.get("rccl") if isinstance(outcome, dict) else None
            if isinstance(said, dict) and int(process) not in chosen:
                chosen[int(process)] = (str(said.get("network") or "none"), str(said.get("said", "")))
    return chosen


def read_lost(
    steps: list[dict[str, Any]],
    count: int,
    host_of: Mapping[int, str],
    step_timeout: float,
    dead: tuple[int, ...],
    evidence: str,
    shared_cores: bool = False,
) -> DeepResult:
    """Process 0's courier ended by jaxlib (the service declared `dead` silent) with the steps it had seen (each
    with the outcomes published so far): the steps every process finished, read as usual, then where the dead
    processes stopped (the first step not every process reported). `dead` empty: no finding of this kind."""
    complete = []
    for step in steps:
        if len(step.get("outcomes", {})) < count:
            break
        complete.append(step)
    result = read_steps(complete, count, host_of, step_timeout, shared_cores)
    if not dead:
        return result
    where = str(steps[len(complete)]["name"]) if len(complete) < len(steps) else "the report"
    processes = tuple(sorted(set(dead)))
    hosts = tuple(sorted({host_of.get(p, "unknown host") for p in processes}))
    finding = catalog.mismatch(
        "cluster-collective-hung",
        "error",
        f"{where} did not finish: {processes_phrase(list(processes))} on {hosts_phrase(hosts)} stopped answering "
        f"jax's coordination service, which declared {'it' if len(processes) == 1 else 'them'} dead (stopped, "
        "killed, or the host is gone)",
        "look at the processes named first (their host's dmesg, the job's log of that rank, the launcher's exit "
        "status); the others ended because jax ends every process of a job where one is declared dead",
        processes,
        hosts,
        (evidence,),
    )
    return result._replace(findings=(*result.findings, finding))


def _slow_links(
    figures: list[Figure], group_of: Mapping[str, list[int]], host_of: Mapping[int, str], concerns: Any
) -> list[ClusterFinding]:
    """Hosts (their own devices) and pairs of hosts whose bus bandwidth is below SLOW_FRACTION of the median of
    their kind: where a job's collectives lose their time, by place. Where one host is in every slow pair (two
    or more), its own link is the place: the finding names it alone and gives the pairs as evidence."""
    found = []
    for kind, words in (("host:", "within"), ("pair:", "between")):
        mine = {f.group: f.busbw_gbps for f in figures if f.group.startswith(kind) and f.busbw_gbps is not None}
        slow = set(slow_processes(mine))
        if not slow:
            continue
        median = statistics.median(mine.values())
        groups = [g for g in mine if g in slow]  # in the order they ran
        members = [g.removeprefix(kind).split(",") for g in groups]
        places = "; ".join(" and ".join(m) for m in members)
        shared = set.intersection(*map(set, members)) if kind == "pair:" and len(groups) > 1 else set()
        summary = (
            f"collectives {words} {places} reach less than {SLOW_FRACTION:.0%} of the median bus bandwidth of the "
            f"job's {'hosts' if kind == 'host:' else 'host pairs'} ({median:.3g} GB/s)"
        )
        located = next(iter(shared)) if len(shared) == 1 else None
        if located is not None:
            summary += f": {located} is in every slow pair, its own link first"
        processes, hosts = concerns(
            [p for g in groups for p in group_of.get(g, []) if located is None or host_of.get(p) == located]
        )
        found.append(
            catalog.mismatch(
                "cluster-link-slow",
                "warning",
                summary,
                "check the links named: a fallback from RDMA to sockets (NCCL_DEBUG=INFO says which transport "
                "RCCL chose), a port at a lower speed (ibstat, ethtool), or xGMI/PCIe errors (amd-smi, dmesg)",
                processes,
                hosts,
                tuple(f"{g}: {mine[g]:.3g} GB/s" for g in groups[:16]),
                Concerns(groups=tuple(groups)),
            )
        )
    return found


def table_lines(figures: tuple[Figure, ...]) -> list[str]:
    """The bus-bandwidth table, one line per operation and size."""
    if not figures:
        return []
    lines = [f"  {'op':<11}{'size':>10}{'time':>12}{'algbw':>14}{'busbw':>14}  group (ranks)"]
    for f in figures:
        time_text = f"{f.seconds * 1e3:.3f} ms" if f.seconds < 1 else f"{f.seconds:.3f} s"
        algbw = f"{f.algbw_gbps:.3g} GB/s"
        busbw = f"{f.busbw_gbps:.3g} GB/s" if f.busbw_gbps is not None else "-"
        lines.append(
            f"  {f.op:<11}{size_text(f.bytes):>10}{time_text:>12}{algbw:>14}{busbw:>14}  {f.group} ({f.ranks})"
        )
    if any(f.ranks == 1 for f in figures):
        lines.append("  busbw -: one rank moves nothing over a link (nccl-tests' factor (n-1)/n is 0)")
    return lines
