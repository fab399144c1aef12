"""The per-host probes the cluster preflight publishes, read under synthetic sysroots in the kernel's
formats, and under this machine's real root."""

from __future__ import annotations

import os
from pathlib import Path

from jax_rocm7_plugin._machine.host import host_name, open_files_limit
from jax_rocm7_plugin._machine.network import Interface, interfaces, is_loopback_host, rdma_devices
from tests.support.cluster import host_sysroot
from tests.support.sysroots import Gpu


def test_interfaces_addresses_and_rdma_under_a_sysroot(tmp_path: Path) -> None:
    root = host_sysroot(
        tmp_path,
        "gpu-17",
        [Gpu()],
        interfaces={
            "lo": (True, ("127.0.0.1/8",)),
            "eth0": (True, ("10.1.2.3/16",)),
            "ib0": (False, ("192.168.7.9/24",)),
        },
        rdma=("mlx5_0", "mlx5_1"),
    )
    (root / "dev" / "infiniband").mkdir()
    (root / "dev" / "infiniband" / "uverbs0").write_text("")
    (root / "proc" / "net" / "if_inet6").write_text("fe800000000000000000000000000001 02 40 20 80     eth0\n")
    assert host_name(root) == "gpu-17"
    assert interfaces(root) == (
        Interface("eth0", True, ("10.1.2.3/16", "fe80::1/64")),
        Interface("ib0", False, ("192.168.7.9/24",)),
        Interface("lo", True, ("127.0.0.1/8",)),
    )
    devices = rdma_devices(root)
    assert devices.devices == ("mlx5_0", "mlx5_1") and devices.verbs_nodes == ("uverbs0",)


def test_missing_or_garbage_network_files_give_fewer_facts(tmp_path: Path) -> None:
    assert interfaces(tmp_path) == () and rdma_devices(tmp_path).devices == ()
    (tmp_path / "sys" / "class" / "net" / "eth0").mkdir(parents=True)
    (tmp_path / "sys" / "class" / "net" / "eth0" / "flags").write_text("garbage")
    (tmp_path / "proc" / "net").mkdir(parents=True)
    (tmp_path / "proc" / "net" / "fib_trie").write_text("|-- 999.1.1.1\n /32 host LOCAL\n")
    (tmp_path / "proc" / "net" / "route").write_text("header\neth0 zz\n")
    os.mkfifo(tmp_path / "proc" / "net" / "if_inet6")  # a FIFO where a file belongs is refused, not waited on
    assert interfaces(tmp_path) == (Interface("eth0", False, ()),)


def test_this_machine() -> None:
    found = {i.name: i for i in interfaces(Path("/"))}
    assert "lo" in found and found["lo"].up and "127.0.0.1/8" in found["lo"].addresses
    soft, hard = open_files_limit()
    assert soft is None or hard is None or soft <= hard
    assert host_name(Path("/"))


def test_loopback_is_judged_without_a_lookup() -> None:
    assert is_loopback_host("127.0.0.2", ("localhost",)) and is_loopback_host("[::1]", ())
    assert is_loopback_host("LOCALHOST", ("localhost",)) and not is_loopback_host("gpu-0", ("localhost",))
