"""A degraded GPU node is named: healthy nodes first (no warning, no error), then a fault lab, each fault on one GPU
of one node among healthy peers, named with its GPU index and PCI address.

The trees are the documented sysfs/procfs formats (tests/support/node_health.py); the reads and rules are the
product's (_machine/gpu_health.py, _machine/health_findings.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.render import render_text
from jax_rocm7_plugin._findings import HEALTH_IDS, Finding
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._job.compare import compare, compare_at_backend_start, explained_by_health
from jax_rocm7_plugin._job.record import GpuFact, HealthFact, ProcessRecord, decode, encode, summarised
from jax_rocm7_plugin._machine.gpu_health import parse_speed, read_node
from jax_rocm7_plugin._machine.health_findings import health_findings, rising
from jax_rocm7_plugin._machine.topology import gfx_name, pci_functions, read_topology
from tests.support.docs import example_block
from tests.support.environment import REPO
from tests.support.fleet import Host, build_host, diagnose_host, released_pair, released_pairs
from tests.support.inprocess import doctor
from tests.support.node_health import GEN3, GEN4, GEN5, HEALTHY_NODES, RX7900XTX, Board, Node, make_node
from tests.support.records import PER_HOST, job

MI300X_NODE = HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"]
RADEON_NODE = HEALTHY_NODES["RX 7900 XTX: the card's own switch, link slowed at rest"]
FAULTY = 3  # the GPU the fault lab breaks
FAULTY_PCI = MI300X_NODE.boards[FAULTY].pci


def judged(node: Node, where: Path) -> list[Finding]:
    root = make_node(where / "root", node)
    return health_findings(read_node(root, read_topology(root)))


@pytest.mark.parametrize("name", list(HEALTHY_NODES))
def test_a_healthy_node_gets_no_warning_and_no_error(name: str, tmp_path: Path) -> None:
    found = judged(HEALTHY_NODES[name], tmp_path)
    assert [f.sentence() for f in found if f.severity != "info"] == []


def test_a_node_in_cpx_on_purpose_is_told_what_that_means_for_jax(tmp_path: Path) -> None:
    (finding,) = judged(HEALTHY_NODES["8x MI300X in CPX/NPS4 on purpose"], tmp_path)
    assert (finding.id, finding.severity) == ("gpu-partition-mode", "info")
    assert "8 devices in jax.devices() (64 in all)" in finding.summary


def _only(found: list[Finding], id: str) -> Finding:
    matching = [f for f in found if f.id == id]
    assert len(matching) == 1, [f.sentence() for f in found]
    return matching[0]


def _names_the_gpu(finding: Finding) -> None:
    assert f"GPU {FAULTY} (gfx942 at {FAULTY_PCI})" in finding.summary, finding.summary


# (what breaks, the change to GPU 3's board, the finding id, its severity, words of its summary, words of its fix)
FAULTS = [
    ("uncorrectable memory errors", {"ras": {"umc": (2, 14)}}, "gpu-uncorrectable-errors", "warning",
     ("2 uncorrectable", "umc 2"), ("drain", "reset")),
    ("uncorrectable XGMI errors", {"ras": {"xgmi_wafl": (1, 0)}}, "gpu-uncorrectable-errors", "warning",
     ("XGMI links",), ("drain",)),
    ("counters inaccessible in a reset", {"inaccessible": True}, "gpu-ras-inaccessible", "warning",
     ("cannot read",), ("dmesg",)),
    ("retired pages at half the threshold", {"bad_pages": "R" * 64}, "gpu-pages-retired", "warning",
     ("64 bad VRAM pages", "threshold of 128"), ("replaced",)),
    ("a page the driver could not retire", {"bad_pages": "RRF"}, "gpu-pages-retired", "warning",
     ("could not retire 1",), ("replaced",)),
    ("corrected errors far above its peers'", {"ras": {"umc": (0, 5000)}}, "gpu-correctable-errors", "warning",
     ("corrected 5000",), ("watch",)),
    ("a link trained at x8", {"link": (GEN5, 8)}, "pcie-link-degraded", "warning",
     ("32 GT/s x8", "32 GT/s x16"), ("reseat",)),
    ("a link trained at Gen4", {"link": (GEN4, 16)}, "pcie-link-degraded", "warning",
     ("16 GT/s x16",), ("reseat",)),
    ("outside the XGMI hive", {"hive": 0, "xgmi": False}, "xgmi-link-missing", "warning",
     ("outside the XGMI hive of its 7",), ("power-cycle",)),
    ("in another partition mode", {"compute": "DPX"}, "gpu-partition-mixed", "warning",
     ("DPX/NPS1", "SPX/NPS1"), ("--compute-partition SPX",)),
    ("a power cap an administrator set", {"cap_watts": 500}, "gpu-power-capped", "info",
     ("500 W", "750 W"), ("on purpose",)),
    ("a forced performance level", {"level": "low"}, "gpu-performance-level", "info",
     ("'low'",), ("echo auto",)),
    ("hot at rest", {"temperatures": (("edge", 70.0), ("junction", 91.0))}, "gpu-hot-at-rest", "warning",
     ("91 C (junction)",), ("cooling",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "id", "severity", "said", "fix"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS]
)
def test_a_fault_on_one_gpu_is_named_with_its_gpu_and_address(
    changes: dict[str, object], id: str, severity: str, said: tuple[str, ...], fix: tuple[str, ...], tmp_path: Path
) -> None:
    found = judged(MI300X_NODE.with_board(FAULTY, **changes), tmp_path)
    finding = _only(found, id)
    assert finding.severity == severity
    _names_the_gpu(finding)
    assert all(word in finding.summary for word in said), finding.summary
    assert all(word in finding.fix for word in fix), finding.fix
    assert finding.evidence, finding
    assert [f.id for f in found] == [id], "the healthy peers got findings too"


def test_a_link_the_gpu_lost_is_named_on_both_ends_of_the_hive(tmp_path: Path) -> None:
    """A hive member KFD links to fewer peers: the GPU is in the hive, but its XGMI link to one GPU is down."""
    root = make_node(tmp_path / "root", MI300X_NODE)
    link_dir = root / "sys/class/kfd/kfd/topology/nodes" / str(FAULTY + 1) / "io_links"
    lost = next(p for p in link_dir.iterdir() if "node_to 7\n" in (p / "properties").read_text())
    (lost / "properties").write_text((lost / "properties").read_text().replace("type 11", "type 2"))
    found = health_findings(read_node(root, read_topology(root)))
    finding = _only(found, "xgmi-link-missing")
    _names_the_gpu(finding)
    assert "no XGMI link to GPU 6" in finding.summary


def test_the_radeon_link_is_judged_at_the_cards_upstream_port(tmp_path: Path) -> None:
    """The GPU function's link ends on the card (no alarm for it); the upstream port's narrower width is a fault,
    its lower speed at rest is not."""
    board = RADEON_NODE.boards[0]
    narrow = judged(RADEON_NODE.with_board(0, link=(GEN3, 8)), tmp_path / "narrow")
    finding = _only(narrow, "pcie-link-degraded")
    assert f"GPU 0 (gfx1100 at {board.pci})" in finding.summary and "x8" in finding.summary
    assert any("the card carries its own PCIe switch" in line for line in finding.evidence)
    function_slow = judged(RADEON_NODE.with_board(0, function_link=(GEN3, 16)), tmp_path / "function")
    assert function_slow == []


def test_without_its_own_switch_a_radeon_link_is_judged_at_the_function(tmp_path: Path) -> None:
    card = Board(RX7900XTX, "0000:03:00.0", compute=None, memory=None, link=(GEN4, 4), max_link=(GEN4, 16))
    finding = _only(judged(Node((card,)), tmp_path), "pcie-link-degraded")
    assert "x4" in finding.summary and "card carries" not in " ".join(finding.evidence)


@pytest.mark.parametrize(
    ("cpus", "severity"), [(256, "warning"), (128, "info")], ids=["256 CPUs: required", "128 CPUs: advised"]
)
def test_a_host_without_iommu_pt(cpus: int, severity: str, tmp_path: Path) -> None:
    node = MI300X_NODE.but(cmdline="BOOT_IMAGE=/boot/vmlinuz ro quiet", cpus=cpus)
    finding = _only(judged(node, tmp_path), "host-iommu-not-pt")
    assert finding.severity == severity and "iommu=pt" in finding.fix


def test_numa_balancing_is_only_info(tmp_path: Path) -> None:
    finding = _only(judged(MI300X_NODE.but(numa_balancing=1), tmp_path), "host-numa-balancing")
    assert finding.severity == "info"


def test_a_locked_memory_limit_matters_only_where_rdma_devices_are(tmp_path: Path) -> None:
    limited = MI300X_NODE.but(memlock="65536")
    assert judged(limited, tmp_path / "no-rdma") == []
    finding = _only(judged(limited.but(rdma=("mlx5_0", "mlx5_1")), tmp_path / "rdma"), "host-memlock-limited")
    assert "65536" in finding.summary and "mlx5_0" in finding.summary and "unlimited" in finding.fix


def test_counters_that_move_between_two_reads(tmp_path: Path) -> None:
    """The rate rules: replays faster than the threshold, new uncorrectable errors (the hang report's and
    --deep's second read); a healthy second read says nothing."""
    root = make_node(tmp_path / "root", MI300X_NODE)
    topology = read_topology(root)
    before = read_node(root, topology)
    assert rising(before, read_node(root, topology), 10.0) == []
    device = root / "sys/bus/pci/devices" / FAULTY_PCI
    (device / "pcie_replay_count").write_text("40\n")
    (device / "ras" / "aca_umc").write_text("ue: 1\nce: 250\nde: 0\n")
    found = rising(before, read_node(root, topology), 60.0)
    assert {f.id for f in found} == {"pcie-replays-rising", "gpu-uncorrectable-errors", "gpu-correctable-errors"}
    for finding in found:
        _names_the_gpu(finding)


def test_partitions_of_one_gpu_are_one_pci_function(tmp_path: Path) -> None:
    """In CPX, KFD ORs each partition's index into location_id's low bits: 05:00.0 to 05:00.7 are one function."""
    root = make_node(tmp_path / "root", HEALTHY_NODES["8x MI300X in CPX/NPS4 on purpose"])
    topology = read_topology(root)
    functions = pci_functions(topology.gpus)
    assert len(topology.gpus) == 64
    assert {functions[n.index][0] for n in topology.gpus[:8]} == {"0000:05:00.0"}
    assert [functions[n.index][1] for n in topology.gpus[:8]] == list(range(8))
    health = read_node(root, topology)
    assert [g.pci for g in health.gpus] == [b.pci for b in HEALTHY_NODES["8x MI300X in CPX/NPS4 on purpose"].boards]
    assert health.gpus[1].nodes == tuple(range(9, 17))


@pytest.mark.parametrize(
    ("text", "speed"), [("32.0 GT/s PCIe", 32.0), ("8 GT/s", 8.0), ("2.5 GT/s PCIe", 2.5), ("Unknown", None)]
)
def test_link_speeds_of_every_kernel(text: str, speed: float | None) -> None:
    assert parse_speed(text) == speed


def test_every_health_finding_is_in_the_catalog() -> None:
    assert {"gpu-uncorrectable-errors", "host-memlock-limited"} <= set(HEALTH_IDS)
    assert "known-issue" not in HEALTH_IDS


# --- across the hosts of a job: process 0's comparison over records whose health was read from each host's tree


def host_health(node: Node, where: Path, *, full: bool = True) -> HealthFact:
    root = make_node(where, node)
    return summarised(read_node(root, read_topology(root), full=full))


def health_job(tmp_path: Path, hosts: list[Node], *, full: bool = True) -> dict[int, ProcessRecord]:
    """A job of len(hosts) hosts (gpu-0, gpu-1, ...) with PER_HOST processes each, every record carrying its host's
    health, read from its own tree, and its GPUs' processor, and surviving the record's encoding."""
    facts = [host_health(node, tmp_path / f"host-{i}", full=full) for i, node in enumerate(hosts)]

    def own(process: int) -> dict[str, object]:
        node = hosts[process // PER_HOST]
        gpus = tuple(GpuFact(n + 1, gfx_name(b.gpu.gfx_target_version), None, b.pci) for n, b in enumerate(node.boards))
        return {"health": facts[process // PER_HOST], "gpus": gpus, "visible": tuple(g.node for g in gpus)}

    records = job(len(hosts) * PER_HOST, {p: own(p) for p in range(len(hosts) * PER_HOST)})
    shared: dict[str, dict[str, object]] = {}
    return {p: decode(encode(r), shared) for p, r in records.items()}  # type: ignore[arg-type]


def test_a_job_of_healthy_hosts_has_no_health_finding(tmp_path: Path) -> None:
    assert compare(health_job(tmp_path, [MI300X_NODE] * 3)) == []


def test_a_degraded_gpu_is_named_with_its_host(tmp_path: Path) -> None:
    degraded = MI300X_NODE.with_board(FAULTY, ras={"umc": (3, 0)})
    (finding,) = compare(health_job(tmp_path, [MI300X_NODE, degraded, MI300X_NODE]))
    assert finding.id == "cluster-gpu-degraded" and finding.hosts == ("gpu-1",)
    assert finding.processes == tuple(range(PER_HOST, 2 * PER_HOST))
    assert finding.summary.startswith(f"gpu-1: GPU {FAULTY} (gfx942 at {FAULTY_PCI}) has had 3 uncorrectable")
    assert finding.to_json()["hosts"] == ["gpu-1"]


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"compute": "CPX", "memory": "NPS4", "partitions": 8}, "the partition mode of gpu-2"),
        ({"cap_watts": 600}, "the power cap of gpu-2"),
        ({"level": "manual"}, "the performance level of gpu-2"),
    ],
    ids=["partition mode", "power cap", "performance level"],
)
def test_the_odd_host_out(changes: dict[str, object], said: str, tmp_path: Path) -> None:
    """A setting that is only info on one machine is a warning where the host differs from its peers."""
    odd = MI300X_NODE.but(boards=tuple(b.but(**changes) for b in MI300X_NODE.boards))
    (finding,) = compare(health_job(tmp_path, [MI300X_NODE, MI300X_NODE, odd, MI300X_NODE]))
    assert finding.id == "cluster-node-unlike-peers" and finding.hosts == ("gpu-2",)
    assert finding.summary.startswith(said), finding.summary


def test_hosts_of_another_gpu_model_are_no_peers(tmp_path: Path) -> None:
    """An MI250X host beside MI300X hosts: its caps and links differ by design, and it is compared with no one."""
    mi250x = HEALTHY_NODES["MI250X: 8 GCDs on 4 OAM modules (XGMI)"]
    found = compare(health_job(tmp_path, [MI300X_NODE, MI300X_NODE, mi250x]))
    assert "cluster-node-unlike-peers" not in [f.id for f in found], [f.summary for f in found]


def test_a_host_whose_links_all_trained_narrower_than_its_peers(tmp_path: Path) -> None:
    """Every GPU at x8 where the slots can do no more (its own rule has nothing to say): unlike its peers."""
    narrow = MI300X_NODE.but(boards=tuple(b.but(link=(GEN5, 8), max_link=(GEN5, 8)) for b in MI300X_NODE.boards))
    assert judged(narrow, tmp_path / "alone") == []
    (finding,) = compare(health_job(tmp_path, [MI300X_NODE, narrow, MI300X_NODE]))
    assert finding.id == "cluster-node-unlike-peers" and "32 GT/s x8" in finding.summary


def test_at_backend_start_only_the_cheap_and_decisive(tmp_path: Path) -> None:
    """The job check's read: error counters and partition modes name the host; a power cap is not read."""
    degraded = MI300X_NODE.with_board(FAULTY, ras={"umc": (1, 0)}, cap_watts=500)
    cpx = MI300X_NODE.but(boards=tuple(b.but(compute="CPX", memory="NPS4", partitions=8) for b in MI300X_NODE.boards))
    found = compare_at_backend_start(health_job(tmp_path, [MI300X_NODE, degraded, cpx], full=False))
    assert {(f.id, f.hosts) for f in found} == {
        ("cluster-gpu-degraded", ("gpu-1",)),
        ("cluster-node-unlike-peers", ("gpu-2",)),
    }


# --- the doctor, end to end: the fleet's MI300X host with its health files, one GPU degraded


def depth_example(first_line_starts: str) -> list[str]:
    """The example block of _machine/README.md whose first line starts so (indented code), unindented."""
    return example_block(REPO / "jax_rocm7_plugin" / "_machine" / "README.md", first_line_starts)


def test_the_doctor_names_a_degraded_gpu_as_its_page_shows(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = Host(
        "MI300X x8, GPU 3 with uncorrectable errors", (), node=MI300X_NODE.with_board(FAULTY, ras={"umc": (2, 0)})
    )
    release, rocm = released_pairs()[-1]
    report = diagnose_host(host, rocm, release, tmp_path, build, monkeypatch)
    assert report.ok  # a warning: the backend comes up, and the node should be drained
    finding = _only(list(report.findings), "gpu-uncorrectable-errors")
    _names_the_gpu(finding)
    assert "gpu-uncorrectable-errors" in [f["id"] for f in report.to_json()["findings"]]
    text = render_text(report)
    shown = depth_example("[warning] gpu-uncorrectable-errors:")
    head, fix = " ".join(line.strip() for line in shown[:-1]), shown[-1].strip().removesuffix("...").rstrip()
    assert f"  {head}" in text.splitlines() and any(line.strip().startswith(fix) for line in text.splitlines())


def test_a_fifo_where_a_counter_belongs_never_blocks_the_cheap_read(tmp_path: Path) -> None:
    """The job check reads the counters without read_text's checks (one non-blocking read each): a FIFO planted
    as a counter file answers at once and is a counter not known."""
    import os

    from jax_rocm7_plugin._safe_io import with_deadline

    root = make_node(tmp_path / "root", MI300X_NODE)
    planted = root / "sys/bus/pci/devices" / FAULTY_PCI / "ras" / "aca_umc"
    planted.unlink()
    os.mkfifo(planted)
    topology = read_topology(root)
    node = with_deadline(lambda: read_node(root, topology, full=False), 5.0)
    assert "umc" not in [b.name for b in node.gpus[FAULTY].ras]
    assert len(node.gpus[FAULTY].ras) == len(MI300X_NODE.boards[FAULTY].blocks) - 1


def test_a_slow_link_is_tied_to_the_health_that_explains_it(tmp_path: Path) -> None:
    """--deep's slow findings name a host; where that host's health holds a fault, the finding says so; where it
    is healthy, the finding is left as it was."""
    narrow = MI300X_NODE.with_board(FAULTY, link=(GEN4, 16))
    records = health_job(tmp_path, [MI300X_NODE, narrow, MI300X_NODE])
    slow = ClusterFinding("cluster-link-slow", "warning", "collectives between gpu-1 and gpu-2 are slow", "check",
                          tuple(range(PER_HOST, 3 * PER_HOST)), ("gpu-1",))  # fmt: skip
    healthy_host = slow._replace(hosts=("gpu-2",))
    tied, untouched = explained_by_health([slow, healthy_host], compare(records), records)
    assert tied.summary.startswith(slow.summary + "; the health of the host named may explain it: gpu-1: GPU 3")
    assert "[pcie-link-degraded]" in tied.summary and tied.evidence
    assert untouched == healthy_host


def test_deep_reads_the_counters_again_after_its_probes(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`doctor --deep`: what rose while its probes ran is named. The probes here stand in for the runtime's (a GPU
    that counts an uncorrectable error meanwhile); the reads before and after are the doctor's own."""
    from jax_rocm7_plugin._doctor import first_jit
    from jax_rocm7_plugin._doctor import rules as doctor_rules

    host = Host("MI300X x8 with its health files", (), node=MI300X_NODE)
    release, rocm = released_pairs()[-1]
    with monkeypatch.context() as inner:
        root, environ, library = build_host(host, rocm, tmp_path, build, inner)
        counters = root / "sys/bus/pci/devices" / FAULTY_PCI / "ras" / "aca_umc"

        def probes_meanwhile(facts: object) -> tuple[None, list[Finding]]:
            counters.write_text("ue: 1\nce: 0\nde: 0\n")  # stand-in: the GPU faults while the runtime is up
            return None, []

        inner.setattr(doctor_rules, "_deep", probes_meanwhile)
        # Stand-in: the first jit is tested with jax elsewhere (test_first_jit.py); here it only has to end.
        inner.setattr(first_jit, "run_first_jit", lambda environ: first_jit.FirstJit(True, {}))
        with released_pair(release, inner):
            report = doctor(environ, root, library, deep=True)
    rose = [f for f in report.findings if f.id == "gpu-uncorrectable-errors"]
    assert len(rose) == 1 and "had 1 new uncorrectable error(s)" in rose[0].summary, report.findings
    _names_the_gpu(rose[0])
