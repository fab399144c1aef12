"""Hosts with network links of their own on this machine (test fixture, never shipped): each host a Linux network
namespace with one veth link to a bridge in a switch namespace, an address 10.77.0.<h+1>/24 and its own name in
its own /etc/hosts (`ip netns exec` binds /etc/netns/<namespace>/hosts there), so that jax's gloo transport,
which binds to the address its host name resolves to, crosses that link. A link can be throttled for real with a
token bucket (tc-tbf(8)) on both of its ends: the host's bad cable or a port at a lower speed.

Needs root with CAP_NET_ADMIN and the veth, bridge and tbf kinds; `available()` says why not where they are
missing. Every namespace and /etc/netns entry is removed by `close()`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

SUBNET = "10.77.0"
ETC_NETNS = Path("/etc/netns")


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


def _tc(namespace: str, *argv: str) -> None:
    done = subprocess.run(["ip", "netns", "exec", namespace, "tc", *argv], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"tc {' '.join(argv)} in {namespace}: {done.stderr.strip()}")


class NetLab:
    """`hosts` hosts named `node-<h>`, each its own namespace, linked through one bridge."""

    def __init__(self, hosts: int) -> None:
        self.tag = f"jr{os.getpid() % 10000}{secrets.token_hex(2)}"
        self.switch = f"{self.tag}-sw"
        self.namespaces = [f"{self.tag}-h{h}" for h in range(hosts)]
        self.names = [f"node-{h}" for h in range(hosts)]
        self.created: list[str] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def address(self, host: int) -> str:
        return f"{SUBNET}.{host + 1}"

    def _build(self) -> None:
        _ip("netns", "add", self.switch)
        self.created.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        hosts_file = "".join(f"{self.address(h)} {name}\n" for h, name in enumerate(self.names))
        for host, namespace in enumerate(self.namespaces):
            _ip("netns", "add", namespace)
            self.created.append(namespace)
            etc = ETC_NETNS / namespace
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{hosts_file}")
            port = f"p{host}"
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", namespace, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            _ip("-n", namespace, "link", "set", "lo", "up")

    def throttle(self, host: int, rate: str) -> None:
        """Both directions of `host`'s link at `rate` (tc's units: "100mbit")."""
        for namespace, device in ((self.namespaces[host], "eth0"), (self.switch, f"p{host}")):
            _tc(namespace, "qdisc", "add", "dev", device, "root", "tbf", "rate", rate, "burst", "64kb", "latency", "1s")

    def command(self, host: int, argv: list[str]) -> list[str]:
        """`argv` run on `host`: in its namespace (with its /etc/hosts) under its own host name. Each wrapper
        execs the next, so the process id is argv's own."""
        script = f'hostname {self.names[host]} && exec "$@"'
        return ["ip", "netns", "exec", self.namespaces[host], "unshare", "--uts", "sh", "-c", script, "sh", *argv]

    def close(self) -> None:
        for namespace in reversed(self.created):
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, timeout=30)
            shutil.rmtree(ETC_NETNS / namespace, ignore_errors=True)
        self.created.clear()


def available() -> str | None:
    """None where a lab of two hosts can be built and throttled here; else why not."""
    if shutil.which("ip") is None or shutil.which("tc") is None or shutil.which("unshare") is None:
        return "needs iproute2 (ip, tc) and util-linux (unshare)"
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    try:
        lab = NetLab(2)
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        return f"network namespaces with a bridge are not available here: {error}"
    try:
        lab.throttle(1, "100mbit")
    except RuntimeError as error:
        return f"tc's token bucket (tbf) is not available here: {error}"
    finally:
        lab.close()
    return None
