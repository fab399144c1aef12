"""Process 0's comparison over synthetic records: each check names exactly the odd processes and hosts,
512 processes read as a few lines, and the words of the rules (interfaces, ranges, host lists) hold."""

from __future__ import annotations

import json

import pytest

from jax_rocm7_plugin._cluster.failures import coordinator_view
from jax_rocm7_plugin._cluster.launcher import expand_hostlist, slurm_hosts, tasks_per_node
from jax_rocm7_plugin._job.compare import compare, socket_ifname_problem
from jax_rocm7_plugin._job.phrases import ranges
from jax_rocm7_plugin._job.record import (
    SCHEMA,
    GpuFact,
    JoinFact,
    ProcessRecord,
    RocmFact,
    TransportFact,
    decode,
    encode,
    from_json,
)
from jax_rocm7_plugin._job.steering import steering_environment
from jax_rocm7_plugin._machine.network import Interface
from jax_rocm7_plugin._policy import cluster_policy
from tests.support.records import ETH, PER_HOST, job, record


def ids(records: dict[int, ProcessRecord]) -> dict[str, tuple[int, ...]]:
    return {f.id: f.processes for f in compare(records)}


def test_a_consistent_job_has_no_findings() -> None:
    assert compare(job(64)) == []


def test_512_processes_read_as_a_few_lines() -> None:
    odd_rocm = RocmFact("7.1.1", "/opt/rocm", "/opt/rocm")
    records = job(512, {p: {"rocm": odd_rocm} for p in range(136, 144)})
    finding, bug = compare(records)
    assert finding.id == "cluster-rocm-mismatch" and finding.processes == tuple(range(136, 144))
    # ROCm 7.1.1 on MI300X across hosts also has a known RCCL slowdown (ROCm/legacy-rocm-build#5717).
    assert bug.known_issue == "rccl-7.1.1-pollara-alltoall-slow" and bug.processes == tuple(range(136, 144))
    assert finding.hosts == ("gpu-17",)
    assert finding.summary.endswith(
        "ROCm 7.2.0 (/opt/rocm) on 63 hosts (processes 0-135, 144-511); "
        "ROCm 7.1.1 (/opt/rocm) on gpu-17 (processes 136-143)"
    )


def test_versions_library_and_backend() -> None:
    versions = (("python", "3.11.7"), ("jax", "0.10.2"), ("jaxlib", "0.10.1"), ("jax-rocm7-plugin", "0.10.2"))
    error = ("kfd-device-missing", "the amdgpu driver is loaded but /dev/kfd does not exist here", "pass /dev/kfd")
    found = ids(
        job(
            16,
            {
                3: {"versions": versions},
                5: {"library_identity": "sha256:" + "cd" * 32},
                9: {"ok": False, "first_error": error},
            },
        )
    )
    assert found == {
        "cluster-version-mismatch": (3,),
        "cluster-library-mismatch": (5,),
        "cluster-backend-unavailable": (9,),
    }


def test_gpu_architecture_and_count_are_compared_per_host() -> None:
    mi250 = tuple(GpuFact(n + 1, "gfx90a", None, None) for n in range(PER_HOST))
    four = tuple(GpuFact(n + 1, "gfx942", None, None) for n in range(4))
    records = job(32, {**{p: {"gpus": mi250} for p in range(8, 16)}})
    records.update(
        {
            p: record(
                p, 32, gpus=four, visible=(1, 2, 3, 4), join=JoinFact(p, 32, p % 8, (p % 4,), "gpu-0:6000", "slurm")
            )
            for p in range(24, 28)
        }
    )
    for p in range(28, 32):
        del records[p]
    found = {f.id: f for f in compare(records)}
    assert found["cluster-gpu-arch-mismatch"].hosts == ("gpu-1",)
    assert found["cluster-gpu-count-mismatch"].hosts == ("gpu-3",)
    assert found["cluster-gpu-count-mismatch"].severity == "warning"


def test_gpu_use_on_one_host() -> None:
    def joined(p: int, ids: tuple[int, ...] | None) -> dict[str, object]:
        return {"join": JoinFact(p, 24, p % 8, ids, "gpu-0:6000", "arguments")}

    # gpu-0: processes 2 and 3 both on device 2; gpu-1: every process sees (and would use) all 8 GPUs;
    # gpu-2: process 17 asks for device 9 of 8.
    odd = {3: joined(3, (2,)), **{p: joined(p, None) for p in range(8, 16)}, 17: joined(17, (9,))}
    found = ids(job(24, odd))
    assert found == {
        "cluster-gpu-shared": (2, 3),
        "cluster-gpus-not-partitioned": tuple(range(8, 16)),
        "cluster-device-ids-invalid": (17,),
    }


def test_more_local_processes_than_gpus() -> None:
    records = job(9)
    records[8] = record(8, 9, host="gpu-0", join=JoinFact(8, 9, 8, (0,), "gpu-0:6000", "arguments"))
    assert ids(records) == {"cluster-too-many-local-processes": tuple(range(9))}


def test_environment_that_steers_collectives_must_agree_but_per_process_selection_may_differ() -> None:
    odd = {
        p: {"environment": (("NCCL_SOCKET_IFNAME", "eth"), ("HIP_VISIBLE_DEVICES", "0"), ("NCCL_IB_HCA", "mlx5_1"))}
        for p in (4, 5)
    }
    (finding,) = compare(job(16, odd))
    assert finding.id == "cluster-env-mismatch" and finding.processes == (4, 5)
    assert finding.evidence == (
        "NCCL_IB_HCA: unset on gpu-0, gpu-1 (processes 0-3, 6-15); 'mlx5_1' on gpu-0 (processes 4-5)",
    )


def test_every_variable_the_stack_reads_is_stated_and_compared_but_the_launchers_own() -> None:
    """Beyond the steering prefixes, a record states every variable of the stack's tables (rocBLAS's, Tensile's,
    rocprofiler's ...), so processes that disagree on one are named; the launcher's ranks and the host's and the
    user's own names are never compared."""
    environ = {"ROCBLAS_LAYER": "3", "TENSILE_DB": "1", "NCCL_DEBUG": "INFO", "SLURM_PROCID": "4", "HOME": "/h/4"}
    stated = dict(steering_environment(environ, cluster_policy.steering_rules()))
    assert stated == {"ROCBLAS_LAYER": "3", "TENSILE_DB": "1", "NCCL_DEBUG": "INFO"}
    without_table = {**cluster_policy.steering_rules(), "stack_names": []}
    assert "ROCBLAS_LAYER" not in dict(steering_environment(environ, without_table))  # what the table adds
    odd = {p: {"environment": (("NCCL_SOCKET_IFNAME", "eth"), ("ROCBLAS_LAYER", "3"))} for p in (2, 3)}
    (finding,) = compare(job(8, odd))
    assert finding.id == "cluster-env-mismatch" and finding.processes == (2, 3)
    assert finding.evidence == ("ROCBLAS_LAYER: unset on gpu-0 (processes 0-1, 4-7); '3' on gpu-0 (processes 2-3)",)


@pytest.mark.parametrize(
    ("variable", "value", "interfaces", "usable"),
    [
        ("NCCL_SOCKET_IFNAME", "eth", ETH, True),
        ("NCCL_SOCKET_IFNAME", "ib", ETH, False),
        ("NCCL_SOCKET_IFNAME", "=eth", ETH, False),  # exact: no interface is called "eth"
        ("NCCL_SOCKET_IFNAME", "=eth0", ETH, True),
        ("NCCL_SOCKET_IFNAME", "^eth,lo", ETH, False),  # excludes everything there is
        ("NCCL_SOCKET_IFNAME", "^docker", ETH, True),
        ("NCCL_SOCKET_IFNAME", "eth", (Interface("eth0", False, ()),), False),
        ("GLOO_SOCKET_IFNAME", "eth0", ETH, True),
        ("GLOO_SOCKET_IFNAME", "eth0,eth1", ETH, False),
    ],
)
def test_socket_interface_rules(variable: str, value: str, interfaces: tuple[Interface, ...], usable: bool) -> None:
    assert (socket_ifname_problem(variable, value, interfaces) is None) == usable


def test_network_rdma_coordinator_shm_and_open_files() -> None:
    down = (Interface("lo", True, ()), Interface("eth0", False, ()))
    odd = {
        **{p: {"interfaces": down} for p in range(8, 16)},
        **{p: {"rdma_devices": (), "verbs_nodes": ()} for p in range(16, 24)},
        **{p: {"shm_bytes": 64 * 1024**2} for p in range(24, 32)},
        **{p: {"open_files": (1024, 4096)} for p in range(32, 40)},
    }
    found = {f.id: f for f in compare(job(40, odd))}
    assert found["cluster-socket-ifname-missing"].hosts == ("gpu-1",)
    assert "eth0 down" in found["cluster-socket-ifname-missing"].summary
    assert found["cluster-rdma-partial"].hosts == ("gpu-2",)
    assert found["cluster-shm-too-small"].hosts == ("gpu-3",)
    assert found["cluster-open-files-low"].hosts == ("gpu-4",)
    minimum, _ = cluster_policy.threshold("open_files_min")
    assert f"threshold {minimum}" in found["cluster-open-files-low"].evidence[0]
    assert "cluster-coordinator-loopback" not in found
    loopback = {p: {"join": JoinFact(p, 16, p % 8, (p % 8,), "127.0.0.1:6000", "arguments")} for p in range(16)}
    assert ids(job(16, loopback)) == {"cluster-coordinator-loopback": tuple(range(8, 16))}


def test_records_are_bounded_and_secrets_never_leave() -> None:
    environ = {
        "NCCL_DEBUG": "INFO",
        "HF_TOKEN": "hf_abcdefgh12345",
        "NCCL_IB_HCA": "mlx5 hf_abcdefgh12345",
        "XLA_FLAGS": "--xla_dump_to=https://user:pa55word@example.org/dumps " + "x" * 5000,
        "NCCL_SECRET_KEY": "zzzz9999",
        **{f"NCCL_VAR_{i}": "v" * 300 for i in range(100)},
    }
    chosen = dict(steering_environment(environ))
    assert "HF_TOKEN" not in chosen and chosen["NCCL_SECRET_KEY"] == "<redacted>"
    assert chosen["NCCL_IB_HCA"] == "mlx5 <redacted>"
    assert "pa55word" not in chosen["XLA_FLAGS"] and "https://<redacted>@example.org" in chosen["XLA_FLAGS"]
    big = record(0, 1, environment=tuple(chosen.items()), host="h" * 200)
    text = encode(big)
    assert len(text.encode()) <= cluster_policy.record_max_bytes()
    back = decode(text)
    assert back.truncated and back.join == big.join and back.ok
    assert "hf_abcdefgh12345" not in text and "pa55word" not in text
    with pytest.raises(ValueError):
        from_json({"schema": 99})
    for garbage in ("", "{}", "not json\n{}", text.replace(f'"schema":{SCHEMA}', '"schema":1')):
        with pytest.raises(ValueError):
            decode(garbage)


def test_alike_records_share_their_decoded_part() -> None:
    """Records of one job share what is not their own: decoded once per distinct part, equal to a full decode."""
    records = {p: record(p, 64) for p in range(64)}
    shared: dict[str, dict[str, object]] = {}
    back = {p: decode(encode(r), shared) for p, r in records.items()}
    assert back == records and len(shared) == 1
    assert back[3].gpus is back[40].gpus  # one object, not 64 copies


def test_phrases_and_launcher_words() -> None:
    assert ranges([7, 0, 1, 2, 3, 5, 8, 3]) == "0-3, 5, 7-8"
    assert expand_hostlist("gpu-[01-03,07],login1") == ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "login1"]
    assert expand_hostlist("rack[1-2]-n[1-2]") == ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    assert expand_hostlist("gpu-[1-") is None and tasks_per_node("8(x2),4") == [8, 8, 4]
    hosts = slurm_hosts({"SLURM_STEP_NODELIST": "gpu-[1-2]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}, 4)
    assert hosts == {0: "gpu-1", 1: "gpu-1", 2: "gpu-2", 3: "gpu-2"}
    assert slurm_hosts({"SLURM_STEP_NODELIST": "gpu-1"}, 3) == {0: "gpu-1", 1: "gpu-1", 2: "gpu-1"}


def test_the_coordinators_view_of_who_never_joined() -> None:
    log = (
        "W1123 coordination_service.cc:388] Barrier timed out.\n# of tasks that reached the barrier: 5/8.\n"
        "The first task at the barrier: 0. Some timed out task names:\n/job:jax_worker/replica:0/task:3\n"
        "/job:jax_worker/replica:0/task:7\n [type.googleapis.com/tensorflow.BarrierError='']\n"
        "Some timed out task names:\n3\n\nAdditional GRPC error information from remote target 0\n"
    )
    assert coordinator_view(log) == (5, 8, (3,))
    assert coordinator_view("nothing useful") == (None, None, ())


def test_processes_of_one_host_on_gpus_of_different_models_are_compared() -> None:
    """A host with MI300X and MI210 side by side: processes 0-3 use the gfx942s, 4-7 the gfx90as."""
    mixed = tuple(GpuFact(n + 1, "gfx942" if n < 4 else "gfx90a", None, None) for n in range(PER_HOST))
    records = job(16, {p: {"gpus": mixed} for p in range(16)})
    found = {f.id: f for f in compare(records)}
    arch = found["cluster-gpu-arch-mismatch"]
    assert set(arch.processes) == {4, 5, 6, 7, 12, 13, 14, 15} or set(arch.processes) == {0, 1, 2, 3, 8, 9, 10, 11}
    assert "gfx90a" in arch.summary and "gfx942" in arch.summary


def test_a_multi_host_known_issue_is_a_cluster_finding_with_its_entry() -> None:
    rocm714 = RocmFact("7.14.0", "/opt/rocm", "/opt/rocm")
    records = job(16, {p: {"rocm": rocm714} for p in range(16)})
    (finding,) = compare(records)
    assert finding.id == "cluster-known-issue" and finding.known_issue == "rccl-7.14-multinode-large-message-slow"
    assert finding.severity == "info" and finding.processes == tuple(range(16)) and len(finding.hosts) == 2
    assert "ROCm/TheRock/issues/7903" in finding.summary and "FAULT_INJECTION=OFF" in finding.fix
    assert finding.to_json()["known_issue"] == "rccl-7.14-multinode-large-message-slow"
    one_host = {p: r for p, r in records.items() if r.host == records[0].host}
    assert compare(one_host) == []


def test_hip_visible_devices_past_what_the_launcher_left() -> None:
    """Slurm's gres gives each task ROCR_VISIBLE_DEVICES=<its GPU>; a script adds HIP_VISIBLE_DEVICES=$SLURM_LOCALID:
    on every task but the first of a host that index points past the one GPU ROCr left."""
    odd = {
        p: {
            "environment": (
                ("NCCL_SOCKET_IFNAME", "eth"),
                ("ROCR_VISIBLE_DEVICES", str(p % PER_HOST)),
                ("HIP_VISIBLE_DEVICES", str(p % PER_HOST)),
            )
        }
        for p in range(16)
    }
    found = {f.id: f for f in compare(job(16, odd))}
    visible = found["cluster-visible-devices-invalid"]
    assert visible.processes == (*range(1, 8), *range(9, 16)) and visible.severity == "warning"
    assert "HIP_VISIBLE_DEVICES=0" in visible.fix


def test_a_report_states_one_count_of_who_joined() -> None:
    """Joining failed: no process reported, and the head gives the coordination service's count, the one the
    finding gives, instead of '0 of 4 reported' above '3 of 4 joined'."""
    from jax_rocm7_plugin._cluster.failures import never_joined
    from jax_rocm7_plugin._cluster.report import ClusterReport, render_json, render_text

    log = "# of tasks that reached the barrier: 3/4.\nSome timed out task names:\n3\n"
    finding, missing, joined = never_joined(4, 10, log, None)
    report = ClusterReport(4, (), missing, (), (finding,), "host:1234", "arguments", 10.5, joined)
    text = render_text(report)
    assert text.splitlines()[0] == "Cluster: 1 problem(s): 3 of 4 processes joined via arguments"
    assert "3 of 4 processes joined within 10 s" in text and "0 of 4" not in text
    assert json.loads(render_json(report))["joined"] == 3


IB_FACT = TransportFact("IB", "IB over mlx5_0:1, mlx5_1:1", "mlx5_0:1 (InfiniBand, 400 Gb/s)", "IB", (), ())
SOCKETS_FACT = TransportFact(
    "Socket",
    "Socket over eth0",
    "mlx5_0:1 (InfiniBand, 400 Gb/s)",
    "IB",
    ("libibverbs.so.1 is not on the dynamic loader's path (RCCL opens it to use RDMA)",),
    ("install rdma-core's verbs library (Debian/Ubuntu: libibverbs1; RHEL: libibverbs; SUSE: libibverbs1)",),
)


def test_a_host_whose_rccl_would_use_sockets_among_ib_peers_is_named_with_its_step() -> None:
    healthy = {p: {"transport": IB_FACT} for p in range(24)}
    assert not {"cluster-transport-unlike-peers", "cluster-transport-slower"} & set(ids(job(24, healthy)))
    odd = {**healthy, **{p: {"transport": SOCKETS_FACT} for p in range(8, 16)}}
    found = {f.id: f for f in compare(job(24, odd))}
    unlike = found["cluster-transport-unlike-peers"]
    assert unlike.hosts == ("gpu-1",) and unlike.processes == tuple(range(8, 16))
    assert "libibverbs1" in unlike.fix and "than on its peers (IB)" in unlike.summary
    assert unlike.concerns is not None and unlike.concerns.attribute == "network"
    assert unlike.concerns.values == (("IB", ("gpu-0", "gpu-2")), ("Socket", ("gpu-1",)))
    slower = found["cluster-transport-slower"]
    assert slower.hosts == ("gpu-1",) and "Socket over eth0 between hosts on gpu-1" in slower.summary
    # Every host alike, every one below its fabric: not unlike its peers, but each is slower than it could be.
    alike = ids(job(16, {p: {"transport": SOCKETS_FACT} for p in range(16)}))
    assert "cluster-transport-unlike-peers" not in alike and alike["cluster-transport-slower"] == tuple(range(16))


def test_the_transport_survives_the_record_round_trip() -> None:
    fact = record(0, 8, transport=SOCKETS_FACT)
    assert from_json(json.loads(json.dumps(fact.to_json()))).transport == SOCKETS_FACT


def test_rccls_own_word_on_the_network_is_compared_with_peers_and_the_hosts_fabric() -> None:
    from jax_rocm7_plugin._job.compare import rccl_findings

    records = job(16, {p: {"transport": IB_FACT} for p in range(16)})
    chosen = {p: ("IB", "IB over mlx5_0:1") for p in range(16)}
    assert rccl_findings(chosen, records) == []
    chosen.update({p: ("Socket", "Socket over eth0 (libibverbs could not be opened)") for p in range(8, 16)})
    chosen[0] = ("IB", "IB over mlx5_0:1")
    found = {f.id: f for f in rccl_findings(chosen, records)}
    assert found["cluster-transport-slower"].hosts == ("gpu-1",)
    assert (
        "its own INIT/NET lines: Socket over eth0 (libibverbs could not be opened)"
        in found["cluster-transport-slower"].summary
    )
    # Half and half: the odd group is the smaller (or the later) one, and it is named.
    unlike = found["cluster-transport-unlike-peers"]
    assert unlike.processes and unlike.concerns is not None
    assert unlike.concerns.values == (("IB", ("gpu-0",)), ("Socket", ("gpu-1",)))


def test_a_pair_far_below_its_networks_line_rate_is_named_with_the_network() -> None:
    from jax_rocm7_plugin._cluster.collectives import figure
    from jax_rocm7_plugin._job.compare import below_line_rate

    ib = IB_FACT._replace(gbps=800.0)  # two 400 Gb/s ports: 100 GB/s
    records = job(24, {p: {"transport": ib} for p in range(24)})
    size = 64 * 1024**2
    fast = figure("all-reduce", size, size / 60e9, 16, "pair:gpu-0,gpu-1")  # busbw ~ 56 GB/s
    slow = figure("all-reduce", size, size / 10e9, 16, "pair:gpu-1,gpu-2")  # ~ 9.4 GB/s
    assert below_line_rate([fast], records) == []
    (finding,) = below_line_rate([fast, slow], records)
    assert finding.id == "cluster-link-slow" and finding.hosts == ("gpu-1", "gpu-2")
    assert "IB over mlx5_0:1, mlx5_1:1: 100 GB/s" in finding.summary and "under 25%" in finding.summary
    assert below_line_rate([slow], job(24)) == []  # no transport read: no line rate to compare with
