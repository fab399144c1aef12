"""Whether what a variable's value names is on this machine (under the sysroot): a folder, a file, a network
interface, an RDMA device and its port, a host:port address. The doctor's check of the stack's variables
(_policy/stack_variables.py) asks it for the entries whose `machine` says what their value names.

The list grammars are RCCL's (src/misc/socket.cc, src/transport/net_ib.cc at the commit the table cites): entries
separated by commas, each a prefix of a name unless the list starts with '=' (exact names); a list starting with
'^' names what to leave out, which an absent name cannot break. An RDMA entry may carry ':<port>'.
"""

from __future__ import annotations

import os
from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.network import INFINIBAND_CLASS, NET_CLASS


def present(kind: str, sysroot: Path) -> str | None:
    """A value naming what this machine has of `kind`, for the fix (None: nothing to name): every RDMA device; every
    network interface but loopback."""
    folder = {"interfaces": NET_CLASS, "rdma-devices": INFINIBAND_CLASS}.get(kind)
    if folder is None:
        return None
    try:
        names = sorted(os.listdir(host_path(sysroot, folder)))
    except OSError:
        return None
    names = [n for n in names if n != "lo"]
    return ",".join(names) or None


def missing(kind: str, value: str, sysroot: Path) -> str | None:
    """What is wrong with `value` as the name of a thing of `kind` here (None: it is there, or this machine's
    files cannot tell)."""
    text = value.strip()
    if kind in ("directory", "file"):
        if not text.startswith("/"):
            return None  # relative: the grammar check names it
        path = host_path(sysroot, text)
        if kind == "directory" and not path.is_dir():
            return f"names {text}, which is {'not a folder' if path.exists() else 'not there'} on this machine"
        if kind == "file" and not path.is_file():
            return f"names {text}, which is {'not a file' if path.exists() else 'not there'} on this machine"
        return None
    if kind == "interfaces":
        return _list_missing(text, host_path(sysroot, NET_CLASS), "network interface", ports=False)
    if kind == "rdma-devices":
        return _list_missing(text, host_path(sysroot, INFINIBAND_CLASS), "RDMA device", ports=True)
    if kind == "address":
        from jax_rocm7_plugin._policy.grammar import parse_address

        if parse_address(text) is None:
            return "is not <host>:<port> (an IPv4 address, [an IPv6 address] or a host name, then a port)"
    return None


def _list_missing(text: str, folder: Path, what: str, *, ports: bool) -> str | None:
    from jax_rocm7_plugin._policy.grammar import rccl_list

    parsed = rccl_list(text)
    if parsed.exclude:
        return None  # what to leave out
    try:
        present = sorted(os.listdir(folder))
    except OSError:
        return None if what == "network interface" else f"names {what}s, and this machine has none ({folder} absent)"
    unmatched = []
    for entry, name, port in parsed.entries:
        hits = [p for p in present if (p == name if parsed.exact else p.startswith(name))]
        if not hits:
            unmatched.append(entry)
        elif ports and port and not any((folder / h / "ports" / port).is_dir() for h in hits):
            unmatched.append(f"{entry} (no port {port})")
    if not unmatched:
        return None
    listed = ", ".join(present) or "none"
    return f"names {', '.join(unmatched)}, which match{'es' if len(unmatched) == 1 else ''} no {what} here ({listed})"
