"""The network RCCL would use between hosts, against the fastest the machine has: healthy InfiniBand, RoCE and
Slingshot nodes and a node without a fabric say nothing; each broken prerequisite is named with its step, beside its
nearest healthy neighbour.

Machines are the healthy 8 x MI300X of tests/support/fleet.py with their fabric's files written in the kernel's
documented formats (tests/support/fabric.py); libraries RCCL opens by name (libibverbs, the net plugin) are empty
stand-ins in the loader's folders (RCCL's choice depends on whether the loader finds them, which is what is read).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._policy.grammar import rccl_list_matches as matches
from tests.support.fabric import Device, Port, write_fabric, write_interfaces, write_slingshot
from tests.support.fleet import HEALTHY, build_host
from tests.support.inprocess import doctor
from tests.support.native import compile_shared

IB = tuple(Device(f"mlx5_{i}", pci=f"0000:{0x0C + i:02x}:00.0") for i in range(8))
ROCE = tuple(
    Device(f"bnxt_re{i}", (Port(link_layer="Ethernet", roce_v2=True, rate_gbps=400.0, netdev=f"ens{i}np0"),))
    for i in range(8)
)
JOB = {"SLURM_JOB_NUM_NODES": "2"}
# What HPE's and the sites' guides set for RCCL on Slingshot (_policy/fabric_guides.json), with the plugin's folder.
SLINGSHOT_SITE = {
    "LD_LIBRARY_PATH": "/opt/aws-ofi-rccl/lib",
    "NCCL_NET": "OFI",
    "NCCL_SOCKET_IFNAME": "hsn0,hsn1,hsn2,hsn3",
    "FI_CXI_DISABLE_HOST_REGISTER": "1",
    "FI_MR_CACHE_MONITOR": "userfaultfd",
}
LIB = "usr/lib/x86_64-linux-gnu"


def _node(
    tmp_path: Path,
    build: Path,
    mp: pytest.MonkeyPatch,
    devices: tuple[Device, ...] = (),
    *,
    environ: dict[str, str] | None = None,
    verbs_library: bool = True,
    verbs_nodes: bool = True,
    slingshot: bool = False,
    plugin: str | None = None,
    plugin_needs_libfabric: bool = False,
) -> Report:
    root, env, library = build_host(HEALTHY[0].but(environ={**JOB, **(environ or {})}), "7.14.0", tmp_path, build, mp)
    write_interfaces(root, ("lo", "eth0", "docker0"))
    write_fabric(root, devices, verbs=verbs_nodes)
    if slingshot:
        write_slingshot(root)
    (root / LIB).mkdir(parents=True, exist_ok=True)
    if verbs_library:
        (root / LIB / "libibverbs.so.1").write_bytes(b"")
    if plugin is not None:  # a real shared object (compiled here), needing libfabric.so.1 where asked
        folder = root / "opt" / "aws-ofi-rccl" / "lib"
        needs = ["fabric"] if plugin_needs_libfabric else []
        if needs:
            compile_shared(tmp_path / "fabric", "fabric", "int fi_getinfo(void) { return 0; }\n")
        compile_shared(folder, "net", "int ncclNetPlugin_v8 = 0;\n", libs=needs, link_dirs=[tmp_path / "fabric"],
                       output_name=plugin, flags=["-Wl,--no-as-needed"])  # fmt: skip
    return doctor(env, root, library)


def transport(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.id.startswith("transport-")]


@pytest.mark.parametrize(
    ("name", "devices", "options"),
    [
        ("InfiniBand", IB, {}),
        ("RoCE", ROCE, {}),
        ("Slingshot with aws-ofi-rccl, set as the guides say", (),
         {"slingshot": True, "plugin": "librccl-net.so", "environ": SLINGSHOT_SITE}),
        ("no fabric", (), {"verbs_library": False, "verbs_nodes": False}),
        ("Slingshot, one host alone (the guides speak of jobs across hosts)", (),
         {"slingshot": True, "plugin": "librccl-net.so",
          "environ": {"LD_LIBRARY_PATH": "/opt/aws-ofi-rccl/lib", "SLURM_JOB_NUM_NODES": "1"}}),
    ],
)  # fmt: skip
def test_healthy_nodes_say_nothing(
    name: str, devices: tuple[Device, ...], options: dict[str, object], tmp_path: Path, build: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    report = _node(tmp_path, build, monkeypatch, devices, **options)  # type: ignore[arg-type]
    assert transport(report) == [], [f.sentence() for f in transport(report)]
    assert report.ok


def _gap(report: Report) -> Finding:
    (finding,) = transport(report)
    assert finding.id == "transport-slower-than-fabric" and finding.severity == "warning", finding
    assert "over Socket over eth0" in finding.summary and "mlx5_0:1 (InfiniBand, 400 Gb/s)" in finding.summary
    return finding


def test_no_verbs_library_falls_back_to_sockets(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    finding = _gap(_node(tmp_path, build, monkeypatch, IB, verbs_library=False))
    assert "libibverbs.so.1 is not on the dynamic loader's path" in finding.summary
    assert "libibverbs1" in finding.fix and finding.remedy is None  # a package: not a change the doctor can make


def test_ib_disabled_is_named_and_its_unsetting_checked(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finding = _gap(_node(tmp_path, build, monkeypatch, IB, environ={"NCCL_IB_DISABLE": "1"}))
    assert "NCCL_IB_DISABLE=1" in finding.summary and finding.fix == "unset NCCL_IB_DISABLE"
    assert finding.remedy is not None and finding.remedy.checked is True, finding.remedy


def test_an_hca_list_that_selects_no_port_gets_the_ports_here(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _node(tmp_path, build, monkeypatch, IB, environ={"NCCL_IB_HCA": "=mlx5_9"})
    finding = _gap(report)
    assert "selects none of the active ports" in finding.summary
    assert finding.remedy is not None and finding.remedy.checked is True, finding.remedy
    assert dict(finding.remedy.environment)["NCCL_IB_HCA"].startswith("mlx5_0,mlx5_1")


def test_a_container_without_the_rdma_devices_is_told_to_pass_them(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finding = _gap(_node(tmp_path, build, monkeypatch, IB, verbs_nodes=False))
    assert "/dev/infiniband has no uverbs node" in finding.summary and "--device=/dev/infiniband" in finding.fix


def test_slingshot_without_its_plugin_falls_back_to_sockets(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _node(tmp_path, build, monkeypatch, slingshot=True)
    finding = next(f for f in transport(report) if f.id == "transport-slower-than-fabric")  # and the guides' rules
    assert finding.severity == "warning" and "Slingshot (cxi0, cxi1, cxi2, cxi3)" in finding.summary
    assert "no net plugin is on the dynamic loader's path (librccl-net.so or libnccl-net.so)" in finding.summary
    assert "aws-ofi-rccl" in finding.fix and "NCCL_NET=OFI" in finding.fix


def test_one_host_alone_is_told_at_info(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _node(tmp_path, build, monkeypatch, IB, environ={"SLURM_JOB_NUM_NODES": "1", "NCCL_IB_DISABLE": "1"})
    (finding,) = transport(report)
    assert finding.severity == "info"


def test_nccl_net_naming_a_network_not_here_is_an_error(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _node(tmp_path, build, monkeypatch, (), environ={"NCCL_NET": "IB"})
    (finding,) = transport(report)
    assert finding.id == "transport-not-found" and finding.severity == "error" and not report.ok
    assert "'Error: network IB not found'" in finding.summary
    assert finding.remedy is not None and finding.remedy.checked is True, finding.remedy


@pytest.mark.parametrize(
    ("value", "name", "port", "expected"),
    [
        (None, "mlx5_0", 1, True),
        ("mlx5_1", "mlx5_10", 1, True),  # a prefix, as RCCL matches it
        ("=mlx5_1", "mlx5_10", 1, False),
        ("^mlx5_1", "mlx5_0", 1, True),
        ("^mlx5_1", "mlx5_1", 1, False),
        ("mlx5_0:2", "mlx5_0", 1, False),
        ("mlx5_0:1,bnxt", "bnxt_re3", 1, True),
    ],
)
def test_rccls_list_grammar(value: str | None, name: str, port: int, expected: bool) -> None:
    assert matches(value, name, port) is expected


def test_the_preflights_record_carries_the_hosts_transport(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `cluster` compares across hosts: the record the preflight builds from the doctor's reading."""
    from jax_rocm7_plugin._cluster.preflight.exchange import record_of
    from jax_rocm7_plugin._doctor.diagnose import diagnose_with_facts
    from jax_rocm7_plugin._job.record import JoinFact
    from jax_rocm7_plugin._settings import read_settings

    root, env, library = build_host(HEALTHY[0].but(environ=JOB), "7.14.0", tmp_path, build, monkeypatch)
    write_interfaces(root, ("lo", "eth0"))
    write_fabric(root, IB)  # and no libibverbs on the loader's path
    environ = {**env, "JAX_ROCM_PJRT_LIBRARY": str(library)}
    report, facts = diagnose_with_facts(read_settings(environ, sysroot=root))
    join = JoinFact(0, 2, 0, (0,), "node-0:6000", "slurm")
    transport = record_of(report, facts, join, environ, "node-0").transport
    assert transport is not None and transport.chosen == "Socket" and transport.fastest_kind == "IB"
    assert transport.slower and "libibverbs" in transport.reasons[0]


def test_a_plugin_that_would_not_load_is_named_with_what_it_needs(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aws-ofi-rccl on the loader's path, its libfabric.so.1 not: RCCL's dlopen fails and it falls back to sockets."""
    options = {"environ": SLINGSHOT_SITE}
    report = _node(tmp_path, build, monkeypatch, slingshot=True, plugin="librccl-net.so", plugin_needs_libfabric=True,
                   **options)  # type: ignore[arg-type]  # fmt: skip
    (finding,) = transport(report)  # NCCL_NET=OFI, as the sites set it: RCCL stops instead of falling back
    assert finding.id == "transport-not-found" and finding.severity == "error"
    assert any(
        "would not load: it needs libfabric.so, which the dynamic loader cannot find" in e for e in finding.evidence
    )


def test_a_slingshot_job_against_the_sites_guides_is_told_what_they_say(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rule alone (a fix is checked by diagnosing again, where a second rule of the same id would remain)."""
    harmful = {**SLINGSHOT_SITE, "FI_MR_CACHE_MONITOR": "memhooks"}
    report = _node(tmp_path / "a", build, monkeypatch, slingshot=True, plugin="librccl-net.so", environ=harmful)
    (memhooks,) = transport(report)
    assert memhooks.severity == "warning" and "FI_MR_CACHE_MONITOR=memhooks" in memhooks.summary
    assert "can hang with RCCL" in memhooks.summary and memhooks.fix.startswith("set FI_MR_CACHE_MONITOR=userfaultfd")
    assert memhooks.remedy is not None and memhooks.remedy.checked is True, memhooks.remedy
    missing = {k: v for k, v in SLINGSHOT_SITE.items() if k != "FI_CXI_DISABLE_HOST_REGISTER"}
    report = _node(tmp_path / "b", build, monkeypatch, slingshot=True, plugin="librccl-net.so", environ=missing)
    (register,) = transport(report)
    assert register.summary.startswith("on Slingshot, FI_CXI_DISABLE_HOST_REGISTER is unset")
    assert register.fix == "set FI_CXI_DISABLE_HOST_REGISTER=1" and register.remedy.checked is True  # type: ignore[union-attr]
    assert any("shs-ccl-docs" in e for e in register.evidence)


def test_a_fifo_with_the_plugins_name_is_no_plugin(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening it would block the doctor (a FIFO never answers): it is no library, and the node has none."""
    import os

    root, env, library = build_host(HEALTHY[0].but(environ=JOB), "7.14.0", tmp_path, build, monkeypatch)
    write_interfaces(root, ("lo", "eth0"))
    write_slingshot(root)
    (root / LIB).mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / LIB / "librccl-net.so")
    report = doctor(env, root, library)
    finding = next(f for f in transport(report) if f.id == "transport-slower-than-fabric")
    assert "no net plugin is on the dynamic loader's path" in finding.summary
