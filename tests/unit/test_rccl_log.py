"""RCCL's own INIT/NET lines, as public threads quote them (each with its address and, where the thread says, the
RCCL or NCCL release), read for the network each process chose."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jax_rocm7_plugin._cluster.rccl_log import parse

LOGS = {
    # RCCL 2.21.5, ROCm 6.3.3: no plugin, no libibverbs, sockets.
    "https://github.com/ROCm/rccl-tests/issues/163": (
        "z292:58192:58192 [0] NCCL INFO NET/Plugin: No plugin found (librccl-net.so)\n"
        "z292:58192:58192 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : librccl-net.so: cannot open shared object "
        "file: No such file or directory : when loading librccl-net.so\n"
        "z292:58192:58192 [0] NCCL INFO NET/Plugin: Using internal network plugin.\n"
        "z292:58192:58200 [2] NCCL INFO Failed to open libibverbs.so[.1]\n"
        "z292:58192:58200 [2] NCCL INFO NET/Socket : Using [0]eno2np1:192.168.2.194<0>\n"
        "z292:58192:58200 [2] NCCL INFO Using non-device net plugin version 0\n"
        "z292:58192:58200 [2] NCCL INFO Using network Socket\n",
        "Socket over eno2np1 (libibverbs could not be opened)",
    ),
    # RCCL 2.20.5 (Azure MI300X): the older plugin message, then sockets.
    "https://github.com/ROCm/rccl/issues/1728": (
        "node-0:188802:188802 [0] NCCL INFO NET/Plugin : dlerror=librccl-net.so: cannot open shared object file: No "
        "such file or directory No plugin found (librccl-net.so), using internal implementation\n"
        "node-0:188802:188813 [0] NCCL INFO Failed to open libibverbs.so[.1]\n"
        "node-0:188802:188813 [0] NCCL INFO NET/Socket : Using [0]eth0:100.64.47.75<0>\n",
        "no network chosen in RCCL's lines",
    ),
    # RCCL of ROCm 4 (2021): InfiniBand.
    "https://github.com/ROCm/rccl/issues/419": (
        "e05r3n09:929:929 [2] NCCL INFO NET/Plugin : No plugin found (librccl-net.so), using internal implementation\n"
        "e05r3n09:929:929 [2] NCCL INFO NET/IB : Using [0]mlx5_3:1/IB [1]mlx5_2:1/IB [2]mlx5_1:1/IB [3]mlx5_0:1/IB ; "
        "OOB ib0:11.5.5.50<0>\n"
        "e05r3n09:929:929 [2] NCCL INFO Using network IB\n",
        "IB over mlx5_3:1, mlx5_2:1, mlx5_1:1, mlx5_0:1",
    ),
    # NCCL 2.19.3: RoCE.
    "https://github.com/NVIDIA/nccl-tests/issues/185": (
        "dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB "
        "enp220s0np0:11.1.128.136<0>\n"
        "dgxh100-4:460770:460842 [0] NCCL INFO Using non-device net plugin version 0\n"
        "dgxh100-4:460770:460842 [0] NCCL INFO Using network IB\n",
        "IB over mlx5_10:1, mlx5_11:1",
    ),
    # No RDMA device: sockets.
    "https://github.com/NVIDIA/nccl/issues/226": (
        "ip-172-31-12-21:45361:45361 [0] NCCL INFO NET/IB : No device found.\n"
        "ip-172-31-12-21:45361:45361 [0] NCCL INFO NET/Socket : Using [0]ens3:172.31.12.210<0>\n"
        "ip-172-31-12-21:45361:45361 [0] NCCL INFO Using network Socket\n",
        "Socket over ens3 (RCCL found no InfiniBand/RoCE device)",
    ),
    # Channels between hosts with GPU Direct RDMA (the older channel format).
    "https://github.com/NVIDIA/nccl/issues/707": (
        "10-90-43-152:120890:121560 [0] NCCL INFO Using network IB\n"
        "10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA\n"
        "10-90-43-152:120890:121563 [3] NCCL INFO Channel 01 : 3[ca000] -> 2[c7000] [send] via NET/IB/2/GDRDMA\n",
        "IB (GPU Direct RDMA)",
    ),
    # NCCL 2.22.3: RoCE through an external IB plugin, channels in the newer format.
    "https://github.com/NVIDIA/nccl/issues/1538": (
        "w:5664:5734 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:172.24.180.73<0>\n"
        "w:5664:5734 [1] NCCL INFO Using network IBext_v8\n"
        "[0] w:497888:498087 [0] NCCL INFO Channel 08/0 : 0[0] -> 8[0] [send] via NET/IBext_v8/7/GDRDMA\n",
        "IBext_v8 over mlx5_0:1, mlx5_1:1 (GPU Direct RDMA)",
    ),
    # aws-ofi-nccl 1.3.0 (NCCL 2.10.3) on EFA.
    "https://github.com/aws/aws-ofi-nccl/issues/161": (
        "algo-1:462:462 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.3.0aws\n"
        "algo-1:462:462 [0] NCCL INFO NET/OFI Selected Provider is efa\n"
        "algo-1:462:462 [0] NCCL INFO Using network AWS Libfabric\n",
        "AWS Libfabric (libfabric provider efa)",
    ),
    # aws-ofi-nccl 1.6.0 on Slingshot.
    "https://github.com/aws/aws-ofi-nccl/issues/801": (
        "NCCL INFO NET/OFI Selected Provider is cxi (found 8 nics)\n"
        "[0] NCCL INFO Using non-device net plugin version 0\n"
        "[0] NCCL INFO Using network AWS Libfabric\n",
        "AWS Libfabric (libfabric provider cxi)",
    ),
    # NCCL 2.27.7: the plugin names itself Libfabric.
    "https://github.com/aws/aws-ofi-nccl/issues/1055": (
        "NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v11)\nNCCL INFO NET/OFI Selected Provider is efa\n",
        "no network chosen in RCCL's lines",
    ),
}


@pytest.mark.parametrize("thread", LOGS)
def test_public_logs_are_read_for_the_network_chosen(thread: str) -> None:
    text, said = LOGS[thread]
    assert parse(text.splitlines()).said == said


def test_what_each_log_says_beyond_the_network() -> None:
    first = parse(LOGS["https://github.com/ROCm/rccl-tests/issues/163"][0].splitlines())
    assert first.plugin_missing == ("librccl-net.so",) and first.verbs_missing and first.network == "Socket"
    loaded = parse(LOGS["https://github.com/aws/aws-ofi-nccl/issues/1055"][0].splitlines())
    assert loaded.plugin == "Libfabric" and loaded.provider == "efa"
    roce = parse(LOGS["https://github.com/NVIDIA/nccl-tests/issues/185"][0].splitlines())
    assert roce.devices == ("mlx5_10:1/RoCE", "mlx5_11:1/RoCE")


def test_channels_between_hosts_use_gpu_direct_rdma_only_where_every_one_does() -> None:
    """One channel over plain IB among GDRDMA ones (a GPU whose NIC is not on its PCIe switch): not GPU Direct RDMA
    for the process, whose slowest channel sets the ring's pace. The lines are those of NCCL issue 707's format."""
    mixed = [
        "h:1:2 [0] NCCL INFO Using network IB",
        "h:1:2 [0] NCCL INFO Channel 00 : 0[c7000] -> 1[c7000] [send] via NET/IB/5/GDRDMA",
        "h:1:2 [0] NCCL INFO Channel 01 : 0[c7000] -> 1[c7000] [send] via NET/IB/2",
        "h:1:2 [0] NCCL INFO Channel 02 : 0[c7000] -> 1[c7000] [send] via NET/IB/3/GDRDMA",
    ]
    read = parse(mixed)
    assert read.gdr is False and read.said == "IB (without GPU Direct RDMA)"
    assert parse([line for line in mixed if "/GDRDMA" in line or "network" in line]).gdr is True


def test_lines_it_does_not_know_are_skipped() -> None:
    assert parse(["", "garbage", "NCCL WARN something", "NCCL INFO Channel 00 : without a net"]).network is None


def test_the_courier_asks_rccl_for_its_lines_and_reads_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jax_rocm7_plugin._cluster.rccl_log import asked_environment, this_process

    asked = asked_environment({"PATH": "/bin"}, str(tmp_path))
    assert asked["NCCL_DEBUG"] == "INFO" and asked["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert asked["NCCL_DEBUG_FILE"] == f"{tmp_path}/rccl.%h.%p.log"
    kept = asked_environment({"NCCL_DEBUG": "WARN"}, str(tmp_path))
    assert kept["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_SUBSYS" not in kept  # the user's level stays
    monkeypatch.setenv("JAX_ROCM_RCCL_LOG_DIR", str(tmp_path))
    assert this_process() is None  # RCCL has written nothing yet
    text, said = LOGS["https://github.com/ROCm/rccl/issues/419"]
    (tmp_path / f"rccl.node-0.{os.getpid()}.log").write_text(text)
    (tmp_path / "rccl.node-0.1.log").write_text("x NCCL INFO Using network Socket\n")  # another process's
    seen = this_process()
    assert seen is not None and seen.said == said


def test_process_0_gathers_each_processs_network_from_the_steps() -> None:
    from jax_rocm7_plugin._cluster.collectives import rccl_chosen

    steps = [
        {"name": "backend", "outcomes": {"0": {"ok": True}, "1": {"ok": True}}},
        {
            "name": "all-reduce/8",
            "op": "all-reduce",
            "outcomes": {
                "0": {"ok": True, "rccl": {"network": "IB", "said": "IB over mlx5_0:1"}},
                "1": {"ok": True, "rccl": {"network": "Socket", "said": "Socket over eth0"}},
            },
        },
    ]
    assert rccl_chosen(steps) == {0: ("IB", "IB over mlx5_0:1"), 1: ("Socket", "Socket over eth0")}
