"""Process 0's comparison: the records of a job's processes in, the catalog's cluster findings out.

Pure and linear in the number of records: each check groups processes by one value (a dict
pass) and names the groups outside the largest, so 512 processes read as a few lines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from jax_rocm7_plugin._environment import read
from jax_rocm7_plugin._findings import Concerns, GpuRef, Severity
from jax_rocm7_plugin._job import catalog
from jax_rocm7_plugin._job.catalog import ClusterFinding, ClusterFindingId
from jax_rocm7_plugin._job.phrases import describe_groups, hosts_phrase, outside_largest, processes_phrase
from jax_rocm7_plugin._job.record import GpuHealthFact, HealthFact, ProcessRecord, TransportFact
from jax_rocm7_plugin._machine.network import Interface, is_loopback_host
from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION, PLUGIN_PACKAGE
from jax_rocm7_plugin._policy import cluster_policy
from jax_rocm7_plugin._policy.grammar import parse_address, rccl_list
from jax_rocm7_plugin._policy.versions import release_str

if TYPE_CHECKING:
    from jax_rocm7_plugin._findings import Finding
    from jax_rocm7_plugin._policy import known_issues
    from jax_rocm7_plugin._policy.known_issues import Situation

K = TypeVar("K", bound=Hashable)
Records = Mapping[int, ProcessRecord]
DOCTOR_COMMAND = f"python -m {PLUGIN_PACKAGE} doctor"


def compare(records: Records, *, host_probes: bool = True) -> list[ClusterFinding]:
    """Every cluster finding for the processes that reported, most decisive first. `host_probes`: the records
    carry the host's interfaces, RDMA devices, /dev/shm and open-file limit (the preflight's; at backend start
    they do not, and the rules that read them are left out)."""
    hosts = _by_host(records)
    found: list[ClusterFinding] = []
    for check in _RULES:
        if host_probes or check not in _HOST_PROBE_RULES:
            found.extend(check(records, hosts))
    return found


def compare_at_backend_start(records: Records) -> list[ClusterFinding]:
    """The job check's comparison: records without host probes, and where some processes' backends will not
    come up, that finding over every process, and the other rules over those whose backends will only (the
    others' records stop where their loader stopped: their library, C API and workarounds are unknown)."""
    up = {pid: r for pid, r in records.items() if r.ok}
    if len(up) == len(records):
        return compare(records, host_probes=False)
    rest = [f for f in compare(up, host_probes=False) if f.id != "cluster-backend-unavailable"]
    return [*_backend(records, _by_host(records)), *rest]


def _by_host(records: Records) -> dict[str, list[int]]:
    hosts: dict[str, list[int]] = defaultdict(list)
    for pid in sorted(records):
        hosts[records[pid].host].append(pid)
    return dict(hosts)


def _group(records: Records, key: Callable[[ProcessRecord], K]) -> dict[K, list[int]]:
    groups: dict[K, list[int]] = defaultdict(list)
    for pid, record in records.items():
        groups[key(record)].append(pid)
    return groups


def _host_of(records: Records) -> dict[int, str]:
    return {pid: r.host for pid, r in records.items()}


def _concerns(records: Records, processes: Sequence[int]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    ordered = tuple(sorted(processes))
    return ordered, tuple(sorted({records[p].host for p in ordered}))


def _mismatch(
    records: Records, groups: dict[K, list[int]], label: Callable[[K], str]
) -> tuple[str, tuple[int, ...], tuple[str, ...]]:
    text = describe_groups(groups, _host_of(records), {k: label(k) for k in groups})
    return (text, *_concerns(records, outside_largest(groups)))


def _backend(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    failing = {pid: r for pid, r in records.items() if not r.ok}
    if not failing:
        return []
    groups = _group(failing, lambda r: r.first_error[0] if r.first_error else "unknown")
    first = {key: failing[members[0]].first_error for key, members in groups.items()}
    text = describe_groups(groups, _host_of(failing), {k: k for k in groups})
    evidence = tuple(
        f"{processes_phrase(members)}: {first[key][1] if first[key] else 'no first error recorded'}"
        for key, members in groups.items()
    )
    top = max(groups, key=lambda k: len(groups[k]))
    fix = first[top][2] if first[top] else f"run `{DOCTOR_COMMAND}` there"
    processes, names = _concerns(records, list(failing))
    summary = f"the ROCm backend would not come up in {len(failing)} of {len(records)} processes: {text}"
    return [
        catalog.mismatch(
            "cluster-backend-unavailable",
            "error",
            summary,
            f"{fix} (on each host named; `{DOCTOR_COMMAND}` there says more)",
            processes,
            names,
            evidence,
        )
    ]


def _versions(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    differing: list[str] = []
    odd: set[int] = set()
    packages = sorted({name for r in records.values() for name, _ in r.versions})
    for package in packages:
        groups = _group(records, lambda r, p=package: dict(r.versions).get(p))  # type: ignore[misc]
        if len(groups) > 1:
            text, processes, _ = _mismatch(records, groups, lambda v, p=package: f"{p} {v or 'not installed'}")
            differing.append(text)
            odd.update(processes)
    if not differing:
        return []
    processes, names = _concerns(records, list(odd))
    return [
        catalog.mismatch(
            "cluster-version-mismatch",
            "error",
            "package versions differ across processes: " + " | ".join(differing),
            f"install the same jax, jaxlib, {PLUGIN_DISTRIBUTION} and {PJRT_DISTRIBUTION} (and Python) on every "
            "host, e.g. from one requirements file or one container image",
            processes,
            names,
            tuple(differing),
        )
    ]


def _differs(
    records: Records,
    groups: dict[K, list[int]],
    label: Callable[[K], str],
    rule: tuple[ClusterFindingId, Severity, str, str],
    evidence: Callable[[tuple[int, ...]], tuple[str, ...]] = lambda processes: (),
) -> list[ClusterFinding]:
    """One finding when the processes fall into several groups: `rule` is (id, severity, summary with
    {groups} for the grouped text, fix); it concerns the processes outside the largest group."""
    if len(groups) < 2:
        return []
    text, processes, names = _mismatch(records, groups, label)
    finding_id, severity, summary, fix = rule
    return [
        catalog.mismatch(finding_id, severity, summary.format(groups=text), fix, processes, names, evidence(processes))
    ]


def _library(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    return _differs(
        records,
        _group(records, lambda r: r.library_identity),
        lambda s: _identity_label(s) if s else "no PJRT library",
        (
            "cluster-library-mismatch",
            "error",
            "the PJRT library differs across processes: {groups}",
            f"reinstall {PJRT_DISTRIBUTION} on the hosts named (pip install --force-reinstall) so every process "
            "loads the same file",
        ),
        lambda processes: tuple(sorted({f"{records[p].host}: {records[p].library_path}" for p in processes})),
    )


def _identity_label(identity: str) -> str:
    """ "sha256 0123456789ab" or "4096 bytes, head and tail 0123456789ab" (record.library_identity)."""
    kind, _, rest = identity.partition(":")
    if kind == "sampled":
        size, _, digest = rest.partition(":")
        return f"{size} bytes, head and tail {digest[:12]}"
    return f"{kind} {rest[:12]}"


def _rocm(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """An error where the major releases differ (or one is unknown): HIP, RCCL and the library's ABI change
    with it; a warning where only the minor release or the source differs."""
    if all(r.rocm is None for r in records.values()):
        return []

    def label(key: tuple[str | None, str] | None) -> str:
        return "no ROCm" if key is None else f"ROCm {key[0] or 'of unknown version'} ({key[1]})"

    groups = _group(records, lambda r: (r.rocm.version, r.rocm.source) if r.rocm else None)
    majors = {key[0].split(".")[0] if key is not None and key[0] else None for key in groups}
    severity: Severity = "error" if len(majors) > 1 or None in majors else "warning"
    return _differs(
        records,
        groups,
        label,
        (
            "cluster-rocm-mismatch",
            severity,
            "the ROCm the library loads differs across processes: {groups}",
            "install the same ROCm release, from the same source, on every host (or use one container image)",
        ),
    )


def _host_groups(
    records: Records, hosts: dict[str, list[int]], key: Callable[[ProcessRecord], K]
) -> dict[K, list[int]]:
    """Processes grouped by a fact of their host, read from the host's first process."""
    groups: dict[K, list[int]] = defaultdict(list)
    for members in hosts.values():
        groups[key(records[members[0]])].extend(members)
    return groups


def _used_architectures(record: ProcessRecord) -> tuple[str, ...]:
    """The gfx targets of the GPUs this process would use (every GPU of its host where that is unknown)."""
    used = record.used_gpus
    gfx = {g.node: g.gfx or "unknown" for g in record.gpus}
    nodes = used if used is not None else tuple(gfx)
    return tuple(sorted({gfx.get(n, "unknown") for n in nodes}))


def _gpu_arch(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """Per process, by the GPUs it uses: two processes of one host on GPUs of different models disagree too."""
    return _differs(
        records,
        _group(records, _used_architectures),
        lambda k: ", ".join(k) or "no GPU",
        (
            "cluster-gpu-arch-mismatch",
            "error",
            "GPU architectures differ across the job's processes: {groups}",
            "run the job on GPUs of one model (Slurm: --constraint or a partition of one model; on a host with "
            "mixed GPUs, ROCR_VISIBLE_DEVICES or --local-device-ids to the GPUs of one model)",
        ),
    )


def _gpu_count(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    return _differs(
        records,
        _host_groups(records, hosts, lambda r: len(r.gpus)),
        lambda n: f"{n} GPU(s)",
        (
            "cluster-gpu-count-mismatch",
            "warning",
            "the number of GPUs differs across hosts: {groups}",
            "check the hosts named for GPUs that dropped off (dmesg, amd-smi list), or give each host the same "
            "number of processes and GPUs",
        ),
    )


def _gpu_use(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """Per host: local device ids that name no GPU, more processes than GPUs, every process on every GPU,
    or two processes on one GPU."""
    invalid: list[int] = []
    crowded: list[str] = []
    unpartitioned: list[str] = []
    shared: list[str] = []
    concerned: dict[str, list[int]] = defaultdict(list)
    for host, members in hosts.items():
        used = {pid: records[pid].used_gpus for pid in members}
        bad = [pid for pid, nodes in used.items() if nodes is None]
        invalid.extend(bad)
        gpu_count = len(records[members[0]].gpus)
        if gpu_count == 0:
            continue  # the backend finding says why
        everything = {g.node for g in records[members[0]].gpus}
        if len(members) > gpu_count:
            crowded.append(f"{host} runs {len(members)} processes on {gpu_count} GPU(s) ({processes_phrase(members)})")
            concerned["crowded"].extend(members)
            continue
        if len(members) == gpu_count > 1 and all(set(n or ()) == everything for n in used.values()):
            unpartitioned.append(f"{host}: {processes_phrase(members)} each use all {gpu_count} GPUs")
            concerned["unpartitioned"].extend(members)
            continue
        users: dict[int, list[int]] = defaultdict(list)
        for pid, nodes in used.items():
            for node in nodes or ():
                users[node].append(pid)
        for node, pids in sorted(users.items()):
            if len(pids) > 1:
                shared.append(f"{host}: KFD node {node} is used by {processes_phrase(pids)}")
                concerned["shared"].extend(pids)
    found: list[ClusterFinding] = []
    if invalid:
        processes, names = _concerns(records, invalid)
        evidence = tuple(
            f"process {p} on {records[p].host}: local_device_ids {list(records[p].join.local_device_ids or ())}, "
            f"{len(records[p].visible)} GPU(s) visible"
            for p in processes[:16]
        )
        found.append(
            catalog.mismatch(
                "cluster-device-ids-invalid",
                "error",
                f"local device ids name GPUs that {processes_phrase(processes)} cannot see",
                "give each process local device ids below the number of GPUs it sees (--local-device-ids, "
                "JAX_LOCAL_DEVICE_IDS), or widen its visible devices",
                processes,
                names,
                evidence,
            )
        )
    # Per host, one of three: more processes than GPUs, each process on every GPU, or GPUs shared.
    host_rules: tuple[tuple[ClusterFindingId, str, list[str], str, str], ...] = (
        (
            "cluster-too-many-local-processes",
            "crowded",
            crowded,
            "more processes than GPUs on {hosts}: {first}",
            "start one process per GPU (srun --ntasks-per-node=<GPUs per node>, mpirun -npernode <GPUs>)",
        ),
        (
            "cluster-gpus-not-partitioned",
            "unpartitioned",
            unpartitioned,
            "as many processes as GPUs on {hosts}, but each process would use every GPU (each would allocate "
            "memory on all of them)",
            "give each process its GPU: launch with srun or mpirun (jax then sets local_device_ids to the local "
            "rank), pass --local-device-ids, or set HIP_VISIBLE_DEVICES per local rank",
        ),
        (
            "cluster-gpu-shared",
            "shared",
            shared,
            "processes on one host would use the same GPU: {first}",
            "give each local process a GPU of its own (distinct local_device_ids or HIP_VISIBLE_DEVICES)",
        ),
    )
    for finding_id, key, lines, summary, fix in host_rules:
        if lines:
            processes, names = _concerns(records, concerned[key])
            text = summary.format(hosts=hosts_phrase(names), first="; ".join(lines[:4]))
            found.append(catalog.mismatch(finding_id, "error", text, fix, processes, names, tuple(lines[:16])))
    return found


def socket_ifname_problem(variable: str, value: str, interfaces: Sequence[Interface]) -> str | None:
    """Why the interfaces that NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME name are unusable here, or None.

    NCCL (and RCCL): a comma list of name prefixes, `=` for exact names, `^` to exclude; it needs one
    interface that is up. Gloo: exact names, each of which it uses.
    """
    up = [i.name for i in interfaces if i.up]
    down = [i.name for i in interfaces if not i.up]
    text = value.strip()
    if variable.startswith("GLOO"):
        wanted = [n.strip() for n in text.split(",") if n.strip()]
        absent = [n for n in wanted if n not in up]
        if not absent:
            return None
        states = [f"{n} is {'down' if n in down else 'absent'}" for n in absent]
        return f"{variable}={value!r}: {', '.join(states)}"
    listed = rccl_list(text)  # the one reading of RCCL's list grammar, the doctor's too (_policy/grammar.py)
    usable = [n for n in up if listed.matches(n)]
    if usable:
        return None
    named_down = [n for n in down if listed.matches(n)]
    detail = f"{', '.join(named_down)} down" if named_down else "none matches"
    return f"{variable}={value!r} leaves no interface that is up ({detail}; up: {', '.join(up) or 'none'})"


def _socket_ifname(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    problems: dict[str, list[int]] = defaultdict(list)
    for pid, record in records.items():
        environment = dict(record.environment)
        for variable in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            value = read(variable, environment)
            if value is None:
                continue
            problem = socket_ifname_problem(variable, value, record.interfaces)
            if problem is not None:
                problems[f"{record.host}: {problem}"].append(pid)
    if not problems:
        return []
    processes, names = _concerns(records, [p for members in problems.values() for p in members])
    first = next(iter(problems))
    return [
        catalog.mismatch(
            "cluster-socket-ifname-missing",
            "error",
            f"a socket interface variable names no usable interface on {hosts_phrase(names)} "
            f"({processes_phrase(processes)}): {first}",
            "name an interface every host has and keeps up (ip -br link on each host), e.g. a prefix such as "
            "NCCL_SOCKET_IFNAME=eth or ib; RCCL hangs in its bootstrap otherwise",
            processes,
            names,
            tuple(f"{k} ({processes_phrase(v)})" for k, v in list(problems.items())[:16]),
        )
    ]


def _coordinator(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    if len(hosts) < 2 or 0 not in records:
        return []
    address = records[0].join.coordinator
    parsed = parse_address(address)
    if parsed is None or not is_loopback_host(parsed.host, cluster_policy.loopback_names()):
        return []
    processes, names = _concerns(records, [p for p in records if records[p].host != records[0].host])
    return [
        catalog.mismatch(
            "cluster-coordinator-loopback",
            "warning",
            f"the coordinator address {address} is a loopback address, but the job spans {len(hosts)} hosts",
            "give the coordinator's routable name or address (--coordinator-address HOST:PORT, "
            "JAX_COORDINATOR_ADDRESS), as every host resolves loopback to itself",
            processes,
            names,
        )
    ]


def _rdma(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    groups = _host_groups(records, hosts, lambda r: bool(r.rdma_devices))
    if len(groups) < 2:
        return []
    without = groups[False]
    processes, names = _concerns(records, without)
    text = describe_groups(groups, _host_of(records), {True: "RDMA devices", False: "no RDMA device"})
    return [
        catalog.mismatch(
            "cluster-rdma-partial",
            "warning",
            f"RDMA devices on some hosts only: {text}",
            "load the RDMA drivers on the hosts named (or pass /dev/infiniband into their containers); RCCL "
            "otherwise falls back to sockets there and slows every collective",
            processes,
            names,
        )
    ]


def _transport(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """The network RCCL would use between hosts, host by host (read in the preflight): a host whose choice differs
    from its peers' (the slowest link of a ring is the ring's speed), and hosts that fall back to sockets below their
    own fabric, each with its reasons and steps."""
    facts = {host: t for host, members in hosts.items() if (t := records[members[0]].transport) is not None}
    found = []
    if len(facts) >= 2:
        unlike = _unlike_network(
            records,
            {p: facts[records[p].host].chosen for host in facts for p in hosts[host]},
            lambda names, processes, peers, text: (
                f"RCCL would use another network between hosts on "
                f"{hosts_phrase(names)} than on its peers ({peers}): {text}"
            ),
            lambda names: (
                "; ".join(dict.fromkeys(s for n in names for s in facts[n].steps))
                or "make the hosts named alike: the same fabric, drivers, libraries and NCCL_* variables"
            ),
            tuple(_transport_line(h, t) for h, t in facts.items())[:16],
        )
        found.extend([unlike] if unlike is not None else [])
    slower = [host for host, t in facts.items() if t.slower]
    if slower:
        processes, names = _concerns(records, [p for host in slower for p in hosts[host]])
        first = facts[slower[0]]
        found.append(
            catalog.mismatch(
                "cluster-transport-slower",
                "warning",
                f"RCCL would use {first.said} between hosts on {hosts_phrase(names)}, though "
                f"{'it has' if len(names) == 1 else 'they have'} {first.fastest}"
                + (f": {first.reasons[0]}" if first.reasons else ""),
                "; ".join(dict.fromkeys(s for h in slower for s in facts[h].steps)) or "read RCCL's INIT,NET lines",
                processes,
                names,
                tuple(f"{h}: {facts[h].said}; fastest: {facts[h].fastest}" for h in slower)[:16],
            )
        )
    return found


def _unlike_network(
    records: Records,
    network_of: Mapping[int, str],
    summary: Callable[[tuple[str, ...], tuple[int, ...], str, str], str],
    fix: Callable[[tuple[str, ...]], str],
    evidence: tuple[str, ...],
) -> ClusterFinding | None:
    """cluster-transport-unlike-peers where the processes' networks (`network_of`: what the preflight predicts, or
    what RCCL's own lines say it took) are not one: those outside the largest group, with each network and the
    hosts that take it as data. `summary(hosts, processes, the peers' network, the groups described)`."""
    groups = _group({p: records[p] for p in network_of if p in records}, lambda r: network_of[r.process_id])
    if len(groups) < 2:
        return None
    processes, names = _concerns(records, outside_largest(groups))
    text = describe_groups(groups, _host_of(records), {k: k for k in groups})
    held = sorted(groups.items(), key=lambda item: -len(item[1]))
    values = tuple((k, tuple(dict.fromkeys(records[p].host for p in members))) for k, members in held)
    finding = catalog.mismatch(
        "cluster-transport-unlike-peers",
        "warning",
        summary(names, processes, held[0][0], text),
        fix(names),
        processes,
        names,
        evidence,
    )
    return finding._replace(concerns=Concerns(attribute="network", values=values))


def _transport_line(host: str, fact: TransportFact) -> str:
    """One host's choice as evidence: the network and the first reason it is not a faster one."""
    return f"{host}: {fact.said}" + (f" ({fact.reasons[0]})" if fact.reasons else "")


def _shm(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    minimum, why = cluster_policy.threshold("shm_min_bytes")
    small: list[int] = []
    evidence: list[str] = []
    for host, members in hosts.items():
        in_use = {node for pid in members for node in (records[pid].used_gpus or ())}
        size = records[members[0]].shm_bytes
        if len(in_use) >= 2 and size is not None and size <= minimum:
            small.extend(members)
            evidence.append(f"{host}: /dev/shm {size / 1024**2:.0f} MiB for {len(in_use)} GPUs in use")
    if not small:
        return []
    processes, names = _concerns(records, small)
    return [
        catalog.mismatch(
            "cluster-shm-too-small",
            "warning",
            f"/dev/shm is {minimum // 1024**2} MiB or less on {hosts_phrase(names)}, which run several GPUs",
            "give the containers more shared memory (docker run --shm-size=16g; Kubernetes: an emptyDir with "
            "medium: Memory mounted at /dev/shm)",
            processes,
            names,
            (*evidence[:16], f"threshold {minimum} bytes: {why}"),
        )
    ]


def _open_files(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    minimum, why = cluster_policy.threshold("open_files_min")
    low = [
        pid
        for pid, r in records.items()
        if r.rdma_devices and r.open_files[1] is not None and r.open_files[1] < minimum
    ]
    if not low:
        return []
    processes, names = _concerns(records, low)
    groups = _group({p: records[p] for p in low}, lambda r: r.open_files[1])
    text = describe_groups(groups, _host_of(records), {k: f"hard limit {k}" for k in groups})
    return [
        catalog.mismatch(
            "cluster-open-files-low",
            "warning",
            f"the open-file limit is below {minimum} where RDMA devices are: {text}",
            f"raise it to at least {minimum} (ulimit -n {minimum} in the job script; /etc/security/limits.conf or "
            "the container's --ulimit nofile)",
            processes,
            names,
            (f"threshold {minimum}: {why}",),
        )
    ]


def _environment(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    names = sorted(
        {
            name
            for r in records.values()
            for name, _ in r.environment
            if not cluster_policy.is_per_process_variable(name)
        }
    )
    differing: list[str] = []
    odd: set[int] = set()
    environments = {pid: dict(r.environment) for pid, r in records.items()}
    for name in names:
        groups: dict[str | None, list[int]] = defaultdict(list)
        for pid, environment in environments.items():
            groups[read(name, environment)].append(pid)
        if len(groups) > 1:
            text, processes, _ = _mismatch(records, groups, lambda v: "unset" if v is None else repr(v))
            differing.append(f"{name}: {text}")
            odd.update(processes)
    if not differing:
        return []
    processes, hosts_named = _concerns(records, list(odd))
    listed = ", ".join(d.split(":", 1)[0] for d in differing[:8]) + (" ..." if len(differing) > 8 else "")
    return [
        catalog.mismatch(
            "cluster-env-mismatch",
            "warning",
            f"{len(differing)} variable(s) that steer collectives differ across processes: {listed}",
            "set them once for the whole job (export them in the batch script before srun / pass them with "
            "mpirun -x), not per host",
            processes,
            hosts_named,
            tuple(differing[:32]),
        )
    ]


def _known_issues(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """Known issues of jobs that span hosts (_policy/known_issues.json), matched per process from its record."""
    from jax_rocm7_plugin._policy import known_issues  # only where a job spans hosts: the check at backend start

    if len(hosts) < 2:
        return []
    hit: dict[str, tuple[known_issues.KnownIssue, list[int], set[str]]] = {}
    confirmed: set[str] = set()  # entries the sources confirm for at least one process's configuration
    matched: dict[Situation, tuple[known_issues.Match, ...]] = {}  # most processes of a job share one situation
    situations: dict[tuple[Any, ...], Situation] = {}  # and most records share their parts (decode's cache)
    for pid in sorted(records):
        record = records[pid]
        alike = (id(record.versions), id(record.gpus), id(record.rocm), record.visible, record.join.local_device_ids,
                 record.ok, record.environment)  # fmt: skip
        situation = situations.get(alike)
        if situation is None:
            situation = situations[alike] = _situation(record, len(hosts))
        if situation not in matched:
            matched[situation] = tuple(known_issues.matches(situation, multi_host=True))
        for match in matched[situation]:
            issue, processes, evidence = hit.setdefault(match.issue.id, (match.issue, [], set()))
            processes.append(pid)
            evidence.update(match.evidence)
            if match.confirmed:
                confirmed.add(match.issue.id)
    found = []
    for issue, processes, evidence in hit.values():
        concerned, names = _concerns(records, processes)
        found.append(
            catalog.known_issue(
                issue.id,
                issue.severity if issue.id in confirmed else "info",
                f"{issue.title} ({issue.sources[0]}): {processes_phrase(concerned)} on {hosts_phrase(names)}"
                + ("" if issue.id in confirmed else f"; confirmed only {issue.confirmed.seen}"),
                known_issues.fix_text(issue),
                concerned,
                names,
                tuple(sorted(evidence)),
            )
        )
    return found


def _situation(record: ProcessRecord, host_count: int) -> Situation:
    """What known issues depend on, as one process's record states it."""
    from jax_rocm7_plugin._policy.known_issues import Situation

    versions = dict(record.versions)
    pjrt = versions.get(PJRT_DISTRIBUTION) or versions.get(PLUGIN_DISTRIBUTION)
    used = record.used_gpus
    gfx = {g.node: g.gfx for g in record.gpus}
    nodes = used if used is not None else record.visible
    return Situation(
        rocm=record.rocm.version if record.rocm is not None else None,
        release=_release(pjrt),
        jaxlib=versions.get("jaxlib"),
        gfx=tuple(g for g in (gfx.get(n) for n in nodes) if g),
        gpu_count=len(nodes) if record.ok else 0,
        hosts=host_count,
        environment=record.environment,
    )


def _visibility(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """Processes whose HIP_VISIBLE_DEVICES (CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL) index past the GPUs their
    ROCR_VISIBLE_DEVICES leaves (a launcher's ROCR_VISIBLE_DEVICES plus HIP_VISIBLE_DEVICES=$LOCAL_RANK): the
    doctor's rule (_machine.visibility), applied to each record."""
    from jax_rocm7_plugin._machine.visibility import gpu_uuid, index_finding, index_problems
    from jax_rocm7_plugin._settings import device_selection

    bad: dict[int, ClusterFinding] = {}
    judged: dict[tuple[Any, ...], Finding | None] = {}  # records alike in what the rule reads are judged once
    for pid, record in records.items():
        alike = (record.environment, id(record.gpus))
        if alike not in judged:
            devices = device_selection(dict(record.environment))
            ids = [gpu_uuid(g.unique_id) for g in record.gpus]
            judged[alike] = index_finding(index_problems(devices, ids), len(record.gpus), devices.rocr)
        finding = judged[alike]
        if finding is not None:
            bad[pid] = catalog.mismatch(
                "cluster-visible-devices-invalid", "warning", finding.summary, finding.fix, (pid,), (record.host,)
            )
    if not bad:
        return []
    first = bad[min(bad)]
    processes, names = _concerns(records, list(bad))
    summary = f"{processes_phrase(processes)} on {hosts_phrase(names)}: {first.summary}" + (
        " (the first; the others alike)" if len(bad) > 1 else ""
    )
    evidence = tuple(f"process {pid}: {bad[pid].summary}" for pid in sorted(bad)[:3])
    rule: ClusterFindingId = "cluster-visible-devices-invalid"
    return [catalog.mismatch(rule, "warning", summary, first.fix, processes, names, evidence)]


def _gpu_degraded(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """Each host's own health warnings (_machine/health_findings.py), named with the host: one degraded GPU is
    the most common reason a healthy-looking job fails, hangs or runs slowly."""
    faulty: dict[str, HealthFact] = {}
    for host, members in hosts.items():
        health = _health_of(records, members)
        if health is not None and health.faults:
            faulty[host] = health
    if not faulty:
        return []
    processes, names = _concerns(records, [p for host in faulty for p in hosts[host]])
    evidence = tuple(f"{host}: {f.summary} [{f.id}]" for host, h in faulty.items() for f in h.faults)
    host, first = next((h, fact.faults[0].summary) for h, fact in faulty.items())
    more = sum(len(h.faults) for h in faulty.values()) - 1
    # The GPUs its faults name, each by its host's ordinal and address; a host whose faults name none (a host
    # setting) concerns the host alone.
    gpus = tuple(
        GpuRef(g.ordinal, g.pci, host)
        for host, h in faulty.items()
        for g in h.gpus
        if any(g.ordinal in f.gpus for f in h.faults)
    )
    finding = catalog.mismatch(
        "cluster-gpu-degraded",
        "warning",
        f"{host}: {first}" + (f"; {more} more fault(s) on {hosts_phrase(names)}" if more else ""),
        f"drain the host(s) named and run `{DOCTOR_COMMAND}` there: it gives each GPU's fix",
        processes,
        names,
        evidence[:32],
    )
    return [finding._replace(concerns=Concerns(gpus=gpus)) if gpus else finding]


def _health_of(records: Records, members: Sequence[int]) -> HealthFact | None:
    """The host's health, from the first of its processes that read it."""
    return next((records[p].health for p in members if records[p].health is not None), None)


# What a host's GPUs are compared by: (name, the GpuHealthFact field, how a value reads, the fix).
_LIKE_PEERS: tuple[tuple[str, str, Callable[[GpuHealthFact], object], str], ...] = (
    ("partition mode", "modes", lambda g: g.modes, "set the host's GPUs to its peers' mode (amd-smi set "
     "--compute-partition and --memory-partition, as root)"),
    ("PCIe link", "link", lambda g: g.link, "reseat the narrower GPUs or check their slots and the firmware's PCIe "
     "settings"),
    ("power cap", "power_cap", lambda g: f"{g.power_cap} W" if g.power_cap is not None else None, "set the same "
     "power cap everywhere (amd-smi set --power-cap, as root), or reset it to the default"),
    ("performance level", "level", lambda g: g.level, "set every GPU's power_dpm_force_performance_level alike "
     "(auto)"),
)  # fmt: skip


_OWN_FAULT = {"PCIe link": "pcie-link-degraded", "partition mode": "gpu-partition-mixed"}


def _node_unlike_peers(records: Records, hosts: dict[str, list[int]]) -> list[ClusterFinding]:
    """The odd host out: a host whose GPUs differ from those of the other hosts with the same GPU model in what an
    administrator sets or a slot decides, where every host was read. One host alone has no peers, and hosts of
    another model are no peers (their caps and links differ by design)."""
    health = {host: h for host, members in hosts.items() if (h := _health_of(records, members)) is not None}
    models: dict[tuple[str | None, ...], list[str]] = defaultdict(list)
    for host in health:
        models[tuple(sorted({g.gfx for g in records[hosts[host][0]].gpus}, key=str))].append(host)
    found = []
    for peers in models.values():
        if len(peers) >= 2:
            found.extend(_unlike(records, hosts, {host: health[host] for host in peers}))
    return found


def _unlike(records: Records, hosts: dict[str, list[int]], health: dict[str, HealthFact]) -> list[ClusterFinding]:
    found = []
    for name, attribute, value, fix in _LIKE_PEERS:
        described = {
            host: tuple(sorted({str(v) for g in h.gpus if (v := value(g)) is not None})) for host, h in health.items()
        }
        described = {host: values for host, values in described.items() if values}
        members = {p: records[p] for host in described for p in hosts[host]}
        by_value = _group(members, lambda r, d=described: d[r.host])  # type: ignore[misc]
        if len(by_value) < 2:
            continue
        text = describe_groups(by_value, _host_of(records), {k: ", ".join(k) for k in by_value})
        # A host whose own warnings already name this (a link narrower than its slot) is not said twice.
        covered = {h for h, fact in health.items() if _OWN_FAULT.get(name) in {f.id for f in fact.faults}}
        odd = [p for p in outside_largest(by_value) if records[p].host not in covered]
        if not odd:
            continue
        processes, names = _concerns(records, odd)
        # Each value and the hosts that hold it, the peers' first; the odd hosts' GPUs whose value the peers lack.
        held = sorted(by_value.items(), key=lambda item: -len(item[1]))
        values = tuple((", ".join(k), tuple(dict.fromkeys(records[p].host for p in members))) for k, members in held)
        usual = set(held[0][0])
        gpus = tuple(
            GpuRef(g.ordinal, g.pci, host)
            for host in names
            for g in health[host].gpus
            if (v := value(g)) is not None and str(v) not in usual
        )
        finding = catalog.mismatch(
            "cluster-node-unlike-peers",
            "warning",
            f"the {name} of {hosts_phrase(names)} is unlike its peers': {text}",
            fix,
            processes,
            names,
            tuple(f"{host}: {', '.join(values)}" for host, values in described.items())[:16],
        )
        found.append(finding._replace(concerns=Concerns(gpus=gpus, attribute=attribute, values=values)))
    return found


def explained_by_health(
    measured: Sequence[ClusterFinding], compared: Sequence[ClusterFinding], records: Records
) -> list[ClusterFinding]:
    """--deep's slow findings (a slow link, a slow process) tied to the health of the hosts they name, where it
    explains them: the host's own faults (a narrow PCIe link, a GPU out of its XGMI hive, a hot GPU ...) and the
    ways it is unlike its peers (`compared`: the preflight's own findings)."""
    hosts = _by_host(records)
    tied = []
    for finding in measured:
        if finding.id not in ("cluster-link-slow", "cluster-process-slow"):
            tied.append(finding)
            continue
        reasons = [
            f"{host}: {fault.summary} [{fault.id}]"
            for host in finding.hosts
            if host in hosts and (health := _health_of(records, hosts[host])) is not None
            for fault in health.faults
        ]
        reasons += [
            f"{f.summary} [{f.id}]"
            for f in compared
            if f.id == "cluster-node-unlike-peers" and set(f.hosts) & set(finding.hosts)
        ]
        if not reasons:
            tied.append(finding)
            continue
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        tied.append(
            finding._replace(
                summary=f"{finding.summary}; the health of the host named may explain it: {reasons[0]}{more}",
                evidence=(*finding.evidence, *reasons[:16]),
            )
        )
    return tied


def _release(version: str | None) -> str | None:
    try:
        return release_str(version) if version else None
    except ValueError:
        return None


_RULES = (
    _backend,
    _versions,
    _library,
    _rocm,
    _gpu_arch,
    _gpu_count,
    _gpu_use,
    _visibility,
    _socket_ifname,
    _coordinator,
    _rdma,
    _transport,
    _shm,
    _open_files,
    _environment,
    _known_issues,
    _gpu_degraded,
    _node_unlike_peers,
)
_HOST_PROBE_RULES = frozenset({_socket_ifname, _rdma, _transport, _shm, _open_files})


def rccl_findings(chosen: Mapping[int, tuple[str, str]], records: Records) -> list[ClusterFinding]:
    """`cluster --deep` on GPUs: the network each process's RCCL says it took (its INIT/NET lines) against its
    peers' and its host's fabric: processes unlike the others, and processes on sockets where their host has a
    fabric (a host the preflight read: its record's transport)."""
    if not chosen:
        return []
    found = []
    unlike = _unlike_network(
        records,
        {p: network for p, (network, _) in chosen.items()},
        lambda names, processes, peers, text: (
            f"RCCL took another network in {processes_phrase(list(processes))} "
            f"on {hosts_phrase(names)} than in the others (its own INIT/NET lines): {text}"
        ),
        lambda names: (
            "make the hosts named alike (fabric, drivers, libraries, NCCL_* variables); `python -m "
            f"{PLUGIN_PACKAGE} doctor` on them names what their RCCL lacks"
        ),
        tuple(f"process {p}: {chosen[p][1]}" for p in sorted(chosen))[:16],
    )
    found.extend([unlike] if unlike is not None else [])
    below = [
        p
        for p, (network, _) in chosen.items()
        if network == "Socket"
        and p in records
        and (t := records[p].transport) is not None
        and t.fastest_kind not in (None, "Socket")
    ]
    if below:
        processes, names = _concerns(records, below)
        fastest = records[below[0]].transport.fastest  # type: ignore[union-attr]
        found.append(
            catalog.mismatch(
                "cluster-transport-slower",
                "warning",
                f"RCCL took TCP sockets between hosts in {processes_phrase(list(processes))} on {hosts_phrase(names)} "
                f"(its own INIT/NET lines: {chosen[below[0]][1]}), though the host has {fastest}",
                "; ".join(dict.fromkeys(s for p in below for s in records[p].transport.steps))  # type: ignore[union-attr]
                or "read RCCL's INIT,NET lines on those hosts",
                processes,
                names,
                tuple(f"process {p}: {chosen[p][1]}" for p in below)[:16],
            )
        )
    return found


def below_line_rate(figures: Sequence[Any], records: Records) -> list[ClusterFinding]:
    """`cluster --deep`: pairs of hosts whose all-reduce bus bandwidth is far below the line rate of the network RCCL
    uses between them (the slower host's, from the records' transport), named with that network."""
    percent, why = cluster_policy.threshold("line_rate_percent_min")
    facts = {r.host: r.transport for r in records.values() if r.transport is not None and r.transport.gbps}
    hosts = _by_host(records)
    below: dict[str, tuple[float, float, str]] = {}
    for figure in figures:
        if not figure.group.startswith("pair:") or figure.busbw_gbps is None:
            continue
        pair = figure.group.removeprefix("pair:").split(",")
        rates = [(facts[h].gbps / 8, facts[h].said) for h in pair if h in facts]  # type: ignore[operator,union-attr]
        if len(rates) != len(pair):
            continue
        line, said = min(rates)
        best = max(figure.busbw_gbps, below.get(figure.group, (0.0, 0.0, ""))[0])
        below[figure.group] = (best, line, said)
    slow = {g: v for g, v in below.items() if v[0] < percent / 100 * v[1]}
    if not slow:
        return []
    named = sorted({h for g in slow for h in g.removeprefix("pair:").split(",")})
    processes, names = _concerns(records, [p for h in named for p in hosts.get(h, [])])
    first, (measured, line, said) = next(iter(slow.items()))
    return [
        catalog.mismatch(
            "cluster-link-slow",
            "warning",
            f"collectives between {' and '.join(first.removeprefix('pair:').split(','))} reach {measured:.3g} GB/s, "
            f"under {percent}% of the line rate of the network RCCL uses there ({said}: {line:.3g} GB/s)",
            "check the ports named (ibstat, ethtool: their speed and errors), the switch between the hosts, and "
            "RCCL's INIT/NET lines (NCCL_DEBUG=INFO): a port down or at a lower speed leaves RCCL the others",
            processes,
            names,
            (*(f"{g}: {v[0]:.3g} GB/s of {v[1]:.3g} GB/s ({v[2]})" for g, v in list(slow.items())[:15]), why),
            Concerns(groups=tuple(slow)),
        )
    ]
