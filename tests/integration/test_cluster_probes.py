"""The per-host probes the cluster preflight publishes, read under synthetic sysroots in the kernel's
formats, and under this machine's real root."""

from __future__ import annotations

import hashlib
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


def test_the_record_names_gpus_as_rocr_and_pci_do(tmp_path: Path, standin_library: Path) -> None:
    """unique_id as ROCR_VISIBLE_DEVICES's GPU-<hex>, location_id/domain as a PCI bus id, HIP's order."""
    from jax_rocm7_plugin._cluster.preflight.exchange import record_of
    from jax_rocm7_plugin._doctor.diagnose import diagnose_with_facts
    from jax_rocm7_plugin._job.record import JoinFact
    from jax_rocm7_plugin._settings import read_settings

    root = host_sysroot(tmp_path / "root", "gpu-3", [Gpu(drm_render_minor=128), Gpu(drm_render_minor=129)])
    for node, (unique, location) in {1: (0x1234ABCD, 0xC100), 2: (0x55, 0x0308)}.items():
        properties = root / "sys/class/kfd/kfd/topology/nodes" / str(node) / "properties"
        properties.write_text(properties.read_text() + f"unique_id {unique}\nlocation_id {location}\ndomain 1\n")
    environ = {"JAX_ROCM_PJRT_LIBRARY": str(standin_library), "ROCR_VISIBLE_DEVICES": "1,0", "HF_TOKEN": "abcdef"}
    report, facts = diagnose_with_facts(read_settings(environ, sysroot=root))
    record = record_of(report, facts, JoinFact(0, 1, 0, None, "gpu-3:1234", "arguments"), environ, host_name(root))
    assert [(g.node, g.unique_id, g.pci_bus) for g in record.gpus] == [
        (1, "GPU-000000001234abcd", "0001:c1:00.0"),
        (2, "GPU-0000000000000055", "0001:03:01.0"),
    ]
    assert record.visible == (2, 1) and record.ok and record.host == "gpu-3"
    assert record.library_identity == f"sha256:{hashlib.sha256(standin_library.read_bytes()).hexdigest()}"
    assert dict(record.environment) == {k: v for k, v in environ.items() if k != "HF_TOKEN"}


SECRETS = {
    "HF_TOKEN": "hf_planted_token_0001",
    "NCCL_IB_AUTH_KEY": "planted-key-0002",
    "WANDB_API_KEY": "planted-wandb-0003",
}


def _planted(process: int) -> dict[str, str]:
    """Secrets where they belong and where they do not: in a steering variable's value and a URL."""
    return {
        **SECRETS,
        "NCCL_IB_HCA": f"mlx5_{process} {SECRETS['HF_TOKEN']}",
        "XLA_FLAGS": f"--xla_dump_to=https://user:{SECRETS['WANDB_API_KEY']}@example.org/p{process}",
    }


def test_no_secret_leaves_in_a_record(tmp_path: Path, standin_library: Path) -> None:
    from jax_rocm7_plugin._cluster.preflight.exchange import record_of
    from jax_rocm7_plugin._doctor.diagnose import diagnose_with_facts
    from jax_rocm7_plugin._job.record import JoinFact, encode
    from jax_rocm7_plugin._settings import read_settings

    root = host_sysroot(tmp_path / "root", "gpu-0", [Gpu()])
    environ = {"JAX_ROCM_PJRT_LIBRARY": str(standin_library), **_planted(0)}
    report, facts = diagnose_with_facts(read_settings(environ, sysroot=root))
    text = encode(record_of(report, facts, JoinFact(0, 1, 0, None, "gpu-0:1234", "arguments"), environ, "gpu-0"))
    assert not [s for s in SECRETS.values() if s in text] and "user:" not in text
    assert "NCCL_IB_HCA" in text and "<redacted>" in text


def test_no_secret_leaves_in_any_process_output(tmp_path: Path, standin_library: Path) -> None:
    """Two processes whose steering variables differ (so their values are printed), secrets planted in them."""
    import sys

    from tests.support.cluster import Job, free_port, gpus_with_ids, report_of
    from tests.support.environment import REPO

    job = Job(Path(sys.executable), standin_library, tmp_path, pythonpath=str(REPO))
    port = free_port()
    commands = []
    for process in range(2):
        root = host_sysroot(tmp_path / f"p{process}", f"node-{process}", gpus_with_ids(1))
        argv = job.explicit(process, 2, port, 60, "--verbose")
        commands.append((argv, job.env(root, **_planted(process))))
    outcomes = job.run(commands, 90)
    assert [o.returncode for o in outcomes] == [1, 1], [o.stderr[-1500:] for o in outcomes]
    mismatch = next(f for f in report_of(outcomes[0])["findings"] if f["id"] == "cluster-env-mismatch")  # type: ignore[union-attr]
    assert "NCCL_IB_HCA" in str(mismatch["evidence"]) and "<redacted>" in str(mismatch["evidence"])
    every_byte = "".join(o.stdout + o.stderr for o in outcomes)
    assert not [s for s in SECRETS.values() if s in every_byte] and "user:" not in every_byte
