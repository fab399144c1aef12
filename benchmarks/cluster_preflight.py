"""How long the cluster preflight takes, end to end and in process 0's comparison.

    python benchmarks/cluster_preflight.py --library PATH [--processes 2 4 8] [--runs 3]
                                           [--records 1000 5000 10000] [--python PY]

Prints, for each process count, the wall time from starting N real processes of
`python -m jax_rocm7_plugin cluster` on localhost (each with its own synthetic sysroot of one
gfx942 GPU and PATH as the library) until the last one exits: the courier's jax import, the
doctor, the library's sha256, the join and the exchange (median, min, max). Then process 0's
comparison of N synthetic records (one odd ROCm host among hosts of 8 processes): decoding the
published JSON and `compare()`, each timed separately; the goal is well under 1 s for 10,000
and growth in proportion to N. Run it from outside the repository, with nothing else heavy running.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jax_rocm7_plugin._cluster.compare import compare  # noqa: E402
from jax_rocm7_plugin._cluster.record import GpuFact, JoinFact, ProcessRecord, RocmFact, encode, from_json  # noqa: E402
from jax_rocm7_plugin._machine.network import Interface  # noqa: E402

PER_HOST = 8


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sysroot(root: Path, host: str) -> Path:
    """One gfx942 GPU, /dev/kfd and its render node, a host name (the format of tests/support/sysroots.py)."""
    node = root / "sys/class/kfd/kfd/topology/nodes"
    for index, text in enumerate(
        ("simd_count 0\n", "simd_count 1216\ngfx_target_version 90402\ndrm_render_minor 128\n")
    ):
        (node / str(index)).mkdir(parents=True)
        (node / str(index) / "properties").write_text(text)
    (root / "sys/module/amdgpu").mkdir(parents=True)
    (root / "dev/dri").mkdir(parents=True)
    (root / "dev/shm").mkdir()
    (root / "dev/kfd").write_text("")
    (root / "dev/dri/renderD128").write_text("")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/hostname").write_text(host + "\n")
    libraries = root / "lib/x86_64-linux-gnu"  # the host's C and C++ runtime, which the library needs
    libraries.mkdir(parents=True)
    for name in (
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libgcc_s.so.1",
        "libstdc++.so.6",
        "ld-linux-x86-64.so.2",
    ):
        if (Path("/lib/x86_64-linux-gnu") / name).exists():
            (libraries / name).symlink_to((Path("/lib/x86_64-linux-gnu") / name).resolve())
    return root


def preflight_seconds(python: str, library: Path, count: int, workdir: Path) -> float:
    port = free_port()
    processes = []
    started = time.perf_counter()
    for process in range(count):
        root = sysroot(workdir / f"run{port}-p{process}", f"node-{process}")
        env = {**os.environ, "JAX_ROCM_SYSROOT": str(root), "JAX_ROCM_PJRT_LIBRARY": str(library)}
        env["PYTHONPATH"] = str(REPO)
        argv = [python, "-m", "jax_rocm7_plugin", "cluster", "--coordinator-address", f"{routable()}:{port}"]
        argv += ["--num-processes", str(count), "--process-id", str(process), "--json", "--local-device-ids", "0"]
        processes.append(subprocess.Popen(argv, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outputs = [p.communicate(timeout=120) for p in processes]
    elapsed = time.perf_counter() - started
    report = json.loads(outputs[0][0])
    if report["verdict"] != "consistent":
        raise SystemExit(f"the preflight found problems: {json.dumps(report['findings'])[:2000]}")
    return elapsed


def routable() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def synthetic_records(count: int) -> list[str]:
    """`count` published records: hosts of PER_HOST processes, one host on another ROCm."""
    gpus = tuple(GpuFact(n + 1, "gfx942", f"GPU-{n:016x}", f"0000:{n:02x}:00.0") for n in range(PER_HOST))
    interfaces = (Interface("lo", True, ("127.0.0.1/8",)), Interface("eth0", True, ("10.0.0.5/24",)))
    texts = []
    for process in range(count):
        local = process % PER_HOST
        odd = process // PER_HOST == 17
        record = ProcessRecord(
            JoinFact(process, count, local, (local,), "gpu-0:6000", "slurm"),
            f"gpu-{process // PER_HOST}",
            (("python", "3.12.1"), ("jax", "0.12.0"), ("jaxlib", "0.12.0"), ("jax-rocm7-plugin", "0.12.0")),
            "/site/xla_rocm_plugin.so",
            "ab" * 32,
            RocmFact("7.1.1" if odd else "7.2.0", "/opt/rocm", "/opt/rocm"),
            gpus,
            tuple(g.node for g in gpus),
            True,
            None,
            (("NCCL_SOCKET_IFNAME", "eth"), ("NCCL_IB_HCA", "mlx5"), ("HIP_VISIBLE_DEVICES", str(local))),
            64 * 1024**3,
            (1024, 1048576),
            interfaces,
            ("mlx5_0",),
            ("uverbs0",),
        )
        texts.append(encode(record))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="a PJRT library (e.g. xla_cpu_pjrt.so)")
    parser.add_argument("--processes", type=int, nargs="*", default=[2, 4, 8])
    parser.add_argument("--records", type=int, nargs="*", default=[1000, 5000, 10000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="an interpreter with jax installed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as directory:
        for count in args.processes:
            samples = [preflight_seconds(args.python, args.library, count, Path(directory)) for _ in range(args.runs)]
            print(
                f"preflight, {count} processes: median {statistics.median(samples):6.2f} s   "
                f"min {min(samples):6.2f}   max {max(samples):6.2f}   (n={len(samples)})"
            )
    for count in args.records:
        texts = synthetic_records(count)
        started = time.perf_counter()
        records = {r.process_id: r for r in (from_json(json.loads(t)) for t in texts)}
        decoded = time.perf_counter() - started
        started = time.perf_counter()
        findings = compare(records)
        compared = time.perf_counter() - started
        size = sum(len(t) for t in texts) / count
        print(
            f"process 0, {count:>6} records (~{size:.0f} B each): decode {decoded * 1000:7.1f} ms   "
            f"compare {compared * 1000:7.1f} ms   findings {[f.id for f in findings]}"
        )


if __name__ == "__main__":
    main()
