"""Synthetic cluster records (test and benchmark fixtures, never shipped): the processes of a healthy job
on hosts of PER_HOST gfx942 GPUs, one GPU per process, with the odd ones changed as asked."""

from __future__ import annotations

from jax_rocm7_plugin._job.record import GpuFact, JoinFact, ProcessRecord, RocmFact
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
