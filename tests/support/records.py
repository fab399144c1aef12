"""Synthetic cluster records (test and benchmark fixtures, never shipped): the processes of a healthy job
on hosts of PER_HOST gfx942 GPUs, one GPU per process, with the odd ones changed as asked."""

from __future__ import annotations

from jax_rocm7_plugin._job.record import GpuFact, GpuHealthFact, HealthFact, JoinFact, ProcessRecord, RocmFact
from jax_rocm7_plugin._machine.network import Interface

PER_HOST = 8
ETH = (Interface("lo", True, ("127.0.0.1/8",)), Interface("eth0", True, ("10.0.0.5/24",)))


def record(process: int, count: int, **changes: object) -> ProcessRecord:
    """A healthy process of a job of `count` on hosts of PER_HOST gfx942 GPUs, one GPU per process."""
    local = process % PER_HOST
    gpus = tuple(GpuFact(n + 1, "gfx942", f"GPU-{n:016x}", f"0000:{n:02x}:00.0") for n in range(PER_HOST))
    base = ProcessRecord(
        join=JoinFact(process, count, local, (local,), "gpu-0:6000", "slurm"),
        host=f"gpu-{process // PER_HOST}",
        versions=(("python", "3.11.7"), ("jax", "0.10.2"), ("jaxlib", "0.10.2"), ("jax-rocm7-plugin", "0.10.2")),
        library_path="/site/xla_rocm_plugin.so",
        library_identity="sha256:" + "ab" * 32,
        rocm=RocmFact("7.2.0", "/opt/rocm", "/opt/rocm"),
        gpus=gpus,
        visible=tuple(g.node for g in gpus),
        ok=True,
        first_error=None,
        environment=(("NCCL_SOCKET_IFNAME", "eth"), ("HIP_VISIBLE_DEVICES", str(local))),
        shm_bytes=64 * 1024**3,
        open_files=(1024, 1048576),
        interfaces=ETH,
        rdma_devices=("mlx5_0",),
        verbs_nodes=("uverbs0",),
    )
    return base._replace(**changes)  # type: ignore[arg-type]


def job(count: int, odd: dict[int, dict[str, object]] | None = None) -> dict[int, ProcessRecord]:
    odd = odd or {}
    return {p: record(p, count, **odd.get(p, {})) for p in range(count)}


def healthy_gpu(ordinal: int, **changes: object) -> GpuHealthFact:
    """One physical GPU of a healthy MI300X host (SPX/NPS1, a full Gen5 x16 link, the default 750 W cap)."""
    base = GpuHealthFact(ordinal, f"0000:{ordinal:02x}:00.0", 0, "SPX/NPS1", "32 GT/s x16", 750, "auto")
    return base._replace(**changes)  # type: ignore[arg-type]


def lab(hosts: int, odd: dict[tuple[int, int], dict[str, object]] | None = None) -> dict[int, ProcessRecord]:
    """A job of `hosts` x PER_HOST processes whose records carry their host's health (as the preflight reads it),
    with the GPUs named by (host, ordinal) in `odd` changed (GpuHealthFact fields)."""
    odd = odd or {}
    records = job(hosts * PER_HOST)
    healths = {
        h: HealthFact(tuple(healthy_gpu(g, **odd.get((h, g), {})) for g in range(PER_HOST)), ()) for h in range(hosts)
    }
    return {p: r._replace(health=healths[p // PER_HOST]) for p, r in records.items()}
