"""Network interfaces and RDMA devices, read under a sysroot from the kernel's own files.

Interfaces: `/sys/class/net/<name>/flags` (IFF_UP is bit 0) and `operstate`. IPv6 addresses:
`/proc/net/if_inet6` (32 hex digits, ifindex, prefix length, scope, flags, name per line).
IPv4 addresses: the `/32 host LOCAL` leaves of `/proc/net/fib_trie`, each given to the
interface whose `/proc/net/route` network (little-endian hex destination and mask) holds it;
127/8 belongs to the loopback interface. RDMA: `/sys/class/infiniband/<device>` (mlx5_0,
bnxt_re0, ionic_0, ...) and the verbs nodes under `/dev/infiniband`.

Pure functions over a sysroot; files that are missing or malformed give fewer facts, never an error.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._record import NamedTuple

NET_CLASS = "/sys/class/net"
IF_INET6 = "/proc/net/if_inet6"
FIB_TRIE = "/proc/net/fib_trie"
ROUTE = "/proc/net/route"
INFINIBAND_CLASS = "/sys/class/infiniband"
INFINIBAND_DEVICES = "/dev/infiniband"
IFF_UP = 0x1
_DOWN_STATES = ("down", "lowerlayerdown", "notpresent", "dormant")
# A host with hundreds of interfaces (containers' veths) is real; files past these sizes are not.
MAX_NET_FILE_BYTES = 4 * 1024 * 1024
MAX_INTERFACES = 64


class Interface(NamedTuple):
    name: str
    up: bool
    addresses: tuple[str, ...]


class RdmaDevices(NamedTuple):
    devices: tuple[str, ...]  # /sys/class/infiniband entries
    verbs_nodes: tuple[str, ...]  # /dev/infiniband entries (uverbs0, rdma_cm, ...)


def _read(root: Path, path: str) -> str:
    from jax_rocm7_plugin._safe_io import read_text

    try:
        return read_text(host_path(root, path), MAX_NET_FILE_BYTES)
    except (OSError, ValueError):
        return ""


def _is_up(root: Path, name: str) -> bool:
    flags_text = _read(root, f"{NET_CLASS}/{name}/flags").strip()
    try:
        flags = int(flags_text, 16)
    except ValueError:
        flags = 0
    state = _read(root, f"{NET_CLASS}/{name}/operstate").strip().lower()
    return bool(flags & IFF_UP) and state not in _DOWN_STATES


def ipv6_addresses(text: str) -> dict[str, list[str]]:
    """`/proc/net/if_inet6` to {interface: [address/prefix]}."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or len(fields[0]) != 32:
            continue
        try:
            address = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
            prefix = int(fields[2], 16)
        except ValueError:
            continue
        found.setdefault(fields[5], []).append(f"{address}/{prefix}")
    return found


def _local_ipv4(fib_trie: str) -> list[ipaddress.IPv4Address]:
    """Addresses of this host: leaves (`|-- A`) followed by `/32 host LOCAL`, each once."""
    found: list[ipaddress.IPv4Address] = []
    leaf: str | None = None
    for line in fib_trie.splitlines():
        text = line.strip()
        if text.startswith("|-- "):
            leaf = text[4:].strip()
        elif leaf is not None and text.startswith("/32 host LOCAL"):
            try:
                address = ipaddress.IPv4Address(leaf)
            except ValueError:
                continue
            if address not in found:
                found.append(address)
    return found


def _routes(route: str) -> list[tuple[str, ipaddress.IPv4Network]]:
    """`/proc/net/route` networks (the default route left out), longest prefix first."""
    networks: list[tuple[str, ipaddress.IPv4Network]] = []
    for line in route.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            destination = ipaddress.IPv4Address(bytes.fromhex(fields[1])[::-1])
            mask = ipaddress.IPv4Address(bytes.fromhex(fields[7])[::-1])
            network = ipaddress.IPv4Network(f"{destination}/{mask}", strict=False)
        except ValueError:
            continue
        if network.prefixlen > 0:
            networks.append((fields[0], network))
    return sorted(networks, key=lambda item: -item[1].prefixlen)


def ipv4_addresses(fib_trie: str, route: str, loopback: str | None) -> dict[str, list[str]]:
    """{interface: [address/prefix]} from fib_trie's local addresses and the routes that hold them."""
    found: dict[str, list[str]] = {}
    routes = _routes(route)
    for address in _local_ipv4(fib_trie):
        if address.is_loopback:
            if loopback is not None:
                found.setdefault(loopback, []).append(f"{address}/8")
            continue
        owner = next(((name, net) for name, net in routes if address in net), None)
        if owner is not None:
            found.setdefault(owner[0], []).append(f"{address}/{owner[1].prefixlen}")
    return found


def interfaces(root: Path) -> tuple[Interface, ...]:
    """This host's network interfaces (at most MAX_INTERFACES, by name), whether each is up, and its addresses."""
    try:
        names = sorted(os.listdir(host_path(root, NET_CLASS)))[:MAX_INTERFACES]
    except OSError:
        return ()
    loopback = next((n for n in names if n == "lo"), None)
    v4 = ipv4_addresses(_read(root, FIB_TRIE), _read(root, ROUTE), loopback)
    v6 = ipv6_addresses(_read(root, IF_INET6))
    return tuple(Interface(name, _is_up(root, name), (*v4.get(name, ()), *v6.get(name, ()))) for name in names)


def rdma_devices(root: Path) -> RdmaDevices:
    def listing(path: str) -> tuple[str, ...]:
        try:
            return tuple(sorted(os.listdir(host_path(root, path))))[:MAX_INTERFACES]
        except OSError:
            return ()

    return RdmaDevices(listing(INFINIBAND_CLASS), listing(INFINIBAND_DEVICES))


def is_loopback_host(host: str, loopback_names: tuple[str, ...]) -> bool:
    """127.0.0.0/8, ::1 or a loopback name (no lookup: a name is judged by what it is, not what DNS says)."""
    bare = host.strip("[]")
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return bare.lower() in loopback_names


def resolves(host: str) -> str | None:
    """None when `host` resolves, else why not (getaddrinfo's words)."""
    try:
        socket.getaddrinfo(host.strip("[]"), None)
    except (socket.gaierror, UnicodeError) as error:
        return str(error)
    return None
