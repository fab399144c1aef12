"""Stand-ins for the hosts of a job (test fixtures, never shipped): per-process sysroots with a host
name, GPUs and network interfaces in the kernel's formats, and real processes started together.

Network files follow the kernel's: /sys/class/net/<if>/{flags,operstate}, /proc/net/fib_trie
(`|-- <address>` then `/32 host LOCAL` for a local address), /proc/net/route (little-endian hex
destination and mask) and /proc/net/if_inet6.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from tests.support.node_health import HEALTHY_NODES, Node, make_node
from tests.support.sysroots import Gpu, add_rocm, make_sysroot

# An interface: up or not, and its IPv4 addresses with prefix ("10.0.0.5/24").
Interfaces = Mapping[str, tuple[bool, Sequence[str]]]
DEFAULT_INTERFACES: Interfaces = {"lo": (True, ("127.0.0.1/8",)), "eth0": (True, ("10.0.0.5/24",))}


def add_network(root: Path, interfaces: Interfaces) -> None:
    route = ["Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
    trie = ["Main:", "  +-- 0.0.0.0/0 3 0 5"]
    for name, (up, addresses) in interfaces.items():
        directory = root / "sys" / "class" / "net" / name
        directory.mkdir(parents=True, exist_ok=True)
        loopback = name == "lo"
        (directory / "flags").write_text(hex((0x1 if up else 0) | (0x8 if loopback else 0x1002)) + "\n")
        (directory / "operstate").write_text(("unknown" if loopback else "up" if up else "down") + "\n")
        for text in addresses:
            network = ipaddress.IPv4Interface(text)
            trie += [f"     |-- {network.ip}", "        /32 host LOCAL"]
            if not loopback:
                destination = network.network.network_address.packed[::-1].hex().upper()
                mask = network.network.netmask.packed[::-1].hex().upper()
                route.append(f"{name}\t{destination}\t00000000\t0001\t0\t0\t0\t{mask}\t0\t0\t0")
    proc_net = root / "proc" / "net"
    proc_net.mkdir(parents=True, exist_ok=True)
    (proc_net / "route").write_text("\n".join(route) + "\n")
    (proc_net / "fib_trie").write_text("\n".join(trie) + "\n")
    (proc_net / "if_inet6").write_text("")


def host_sysroot(
    root: Path,
    hostname: str,
    gpus: list[Gpu],
    *,
    kfd: bool = True,
    interfaces: Interfaces = DEFAULT_INTERFACES,
    rocm: tuple[Path, str] | None = None,
    rdma: Sequence[str] = (),
    node: Node | None = None,
) -> Path:
    """One process's view of its host: KFD GPUs, /dev nodes, a host name, interfaces, RDMA, ROCm (build, version).
    With `node`, its GPUs are the node's boards (`gpus` unused), with their health files."""
    if node is None:
        make_sysroot(root, gpus, kfd=kfd)
    else:
        make_node(root, node, kfd=kfd)
    (root / "proc" / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "sys" / "kernel" / "hostname").write_text(hostname + "\n")
    add_network(root, interfaces)
    for device in rdma:
        (root / "sys" / "class" / "infiniband" / device).mkdir(parents=True, exist_ok=True)
    if rocm is not None:
        add_rocm(root, rocm[0], rocm[1])
    return root


def gpus_with_ids(count: int, gfx_target_version: int = 90402) -> list[Gpu]:
    return [Gpu(gfx_target_version=gfx_target_version, drm_render_minor=128 + i) for i in range(count)]


def routable_address() -> str:
    """This machine's address on its default route (no packet is sent): a coordinator address that is no
    loopback, as a job spanning hosts needs; loopback where the machine has no other."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routing only, nothing is sent
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Outcome(NamedTuple):
    returncode: int | None  # None: still running at the deadline (killed)
    stdout: str
    stderr: str
    seconds: float


def run_together(commands: Sequence[tuple[Sequence[str], Mapping[str, str]]], cwd: Path, limit: float) -> list[Outcome]:
    """Start every command at once; each has until `limit` seconds after the start, then it is killed."""
    started = time.monotonic()
    processes = [
        subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        for argv, env in commands
    ]
    outcomes: list[Outcome] = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=max(0.1, limit - (time.monotonic() - started)))
            outcomes.append(Outcome(process.returncode, out.decode(), err.decode(), time.monotonic() - started))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            outcomes.append(Outcome(None, out.decode(), err.decode(), time.monotonic() - started))
    return outcomes


def plugin_overlay(package: Path, destination: Path, version: str) -> Path:
    """A copy of the plugin package whose version.py says `version` (another install of the plugin);
    put the returned folder first on PYTHONPATH."""
    import shutil

    target = destination / package.name
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))
    import re

    text = (target / "version.py").read_text()
    changed = re.sub(r"^__version__ = .*$", f"__version__ = {version!r}", text, count=1, flags=re.M)
    assert changed != text, "no __version__ line in version.py"
    (target / "version.py").write_text(changed)
    return destination


# A process of the job that joins jax's coordination service and then dies before reporting (a crash
# right after initialize): it joins as the preflight's courier does, then kills itself.
JOIN_THEN_DIE = """
import os, signal, sys
from jax._src.lib import _jax
address, process_id = sys.argv[1], int(sys.argv[2])
client = _jax.get_distributed_runtime_client(
    address, process_id, init_timeout=30, missed_heartbeat_callback=lambda *a: None, shutdown_on_destruction=False
)
client.connect()
print("joined", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


class Job:
    """How a test starts the preflight in each process: one interpreter, a PJRT library, a PYTHONPATH."""

    def __init__(self, python: Path, library: Path, cwd: Path, pythonpath: str | None = None) -> None:
        self.python, self.library, self.cwd, self.pythonpath = python, library, cwd, pythonpath

    def argv(self, *args: str) -> list[str]:
        return [str(self.python), "-m", "jax_rocm7_plugin", "cluster", "--json", *args]

    def explicit(self, process: int, count: int, port: int, timeout: float, *extra: str, host: str = "") -> list[str]:
        return self.argv(
            "--coordinator-address",
            f"{host or routable_address()}:{port}",
            "--num-processes",
            str(count),
            "--process-id",
            str(process),
            "--timeout",
            str(timeout),
            *extra,
        )

    def env(self, root: Path, *, pythonpath: str | None = None, **extra: str) -> dict[str, str]:
        from tests.support.snippets import clean_env

        env = clean_env(JAX_ROCM_SYSROOT=str(root), JAX_ROCM_PJRT_LIBRARY=str(self.library), **extra)
        path = pythonpath or self.pythonpath
        if path:
            env["PYTHONPATH"] = path
        else:
            env.pop("PYTHONPATH", None)
        return env

    def run(self, commands: Sequence[tuple[Sequence[str], Mapping[str, str]]], limit: float) -> list[Outcome]:
        return run_together(commands, self.cwd, limit)


def report_of(outcome: Outcome) -> dict[str, object]:
    import json

    assert outcome.stdout.strip(), f"process 0 printed nothing; stderr: {outcome.stderr[-2000:]}"
    data: dict[str, object] = json.loads(outcome.stdout)
    return data


def findings_by_id(report: Mapping[str, object]) -> dict[str, dict[str, object]]:
    return {f["id"]: f for f in report["findings"]}  # type: ignore[attr-defined, index]


def consistent_job(job: Job, tmp: Path, build: Path, port: int, timeout: float = 60) -> list[Outcome]:
    """Two hosts of two gfx942 GPUs, two processes each (one GPU per process), ROCm 7.0.2 everywhere."""
    commands = []
    for process in range(4):
        host = f"node-{process // 2}"
        root = host_sysroot(tmp / f"p{process}", host, gpus_with_ids(2), rocm=(build, "7.0.2"))
        argv = job.explicit(process, 4, port, timeout, "--local-device-ids", str(process % 2))
        commands.append((argv, job.env(root, NCCL_SOCKET_IFNAME="eth")))
    return job.run(commands, timeout + 30)


# The odd job: 8 processes on 4 hosts of 2 GPUs; each odd thing on its own processes.
ODD_EXPECTED: dict[str, list[int]] = {
    "cluster-backend-unavailable": [4],  # no /dev/kfd
    "cluster-version-mismatch": [7],  # another plugin version
    "cluster-rocm-mismatch": [1],  # ROCm 7.1.1 where the others have 7.0.2
    "cluster-gpu-arch-mismatch": [6, 7],  # host node-3 has gfx90a
    "cluster-gpu-shared": [2, 3],  # both use local device 0 on node-1
    "cluster-socket-ifname-missing": [5],  # its eth0 is down
    "cluster-known-issue": [1],  # ROCm 7.1.1 on MI300X across hosts: RCCL's known slowdown (legacy-rocm-build#5717)
    "cluster-gpu-degraded": [2, 3],  # node-1's GPU 1 has counted uncorrectable errors
    "cluster-node-unlike-peers": [4, 5],  # node-2's power caps are lower than node-0's and node-1's
}
# Each host's GPUs with their health files (tests/support/node_health.py): two MI300X on node-0 to node-2, two
# MI250X GCDs on node-3 (another model: compared with no one).
_MI300X_PAIR = Node(HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"].boards[:2])
_MI250X_PAIR = Node(HEALTHY_NODES["MI250X: 8 GCDs on 4 OAM modules (XGMI)"].boards[:2])
ODD_NODES = {
    "node-0": _MI300X_PAIR,
    "node-1": _MI300X_PAIR.with_board(1, ras={"umc": (4, 0)}),
    "node-2": _MI300X_PAIR.but(boards=tuple(b.but(cap_watts=600) for b in _MI300X_PAIR.boards)),
    "node-3": _MI250X_PAIR,
}


def odd_job(job: Job, tmp: Path, build: Path, port: int, plugin_package: Path, timeout: float = 60) -> list[Outcome]:
    return job.run(odd_commands(job, tmp, build, port, plugin_package, timeout), timeout + 30)


def odd_commands(
    job: Job, tmp: Path, build: Path, port: int, plugin_package: Path, timeout: float = 60
) -> list[tuple[list[str], dict[str, str]]]:
    """The odd job's processes: (argv, environment) each."""
    overlay = plugin_overlay(plugin_package, tmp / "overlay", _post9(plugin_package))
    commands = []
    for process in range(8):
        host = f"node-{process // 2}"
        gfx = 90010 if host == "node-3" else 90402
        interfaces = {"lo": (True, ("127.0.0.1/8",)), "eth0": (process != 5, ("10.0.0.5/24",))}
        root = host_sysroot(
            tmp / f"p{process}",
            host,
            gpus_with_ids(2, gfx),
            kfd=process != 4,
            interfaces=interfaces,
            rocm=(build, "7.1.1" if process == 1 else "7.0.2"),
            node=ODD_NODES[host],
        )
        local = "0" if process == 3 else str(process % 2)
        argv = job.explicit(process, 8, port, timeout, "--local-device-ids", local)
        path = f"{overlay}{os.pathsep}{job.pythonpath}" if process == 7 and job.pythonpath else None
        path = path or (str(overlay) if process == 7 else None)
        commands.append((argv, job.env(root, pythonpath=path, NCCL_SOCKET_IFNAME="eth")))
    return commands


def _post9(package: Path) -> str:
    import re

    release = re.search(r'JAX_RELEASE = "([^"]+)"', (package / "version.py").read_text())
    assert release is not None
    return f"{release.group(1)}.post9"
