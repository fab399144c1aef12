"""Whether what a variable's value names is on this machine (under the sysroot): a folder, a file, a network
interface, an RDMA device and its port, a host:port address; and, for values whose reader hands them to a call
(the generated table's flows), what that call needs: a library the loader finds, a folder to create a file in, a
path whose existing part is folders, a host name that resolves. The doctor's check of the stack's variables
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


def missing(kind: str, value: str, sysroot: Path, ld_library_path: tuple[str, ...] = ()) -> str | None:
    """What is wrong with `value` as the name of a thing of `kind` here (None: it is there, or this machine's
    files cannot tell). `ld_library_path`: its absolute entries, where a library name is searched first."""
    text = value.strip()
    if kind == "library":
        return _library_missing(text, sysroot, ld_library_path)
    if kind in ("file-created", "directory-created"):
        return _creatable_missing(kind, text, sysroot)
    if kind == "host":
        return _host_missing(text, sysroot)
    if kind == "gid-index":
        return _gid_missing(text, host_path(sysroot, INFINIBAND_CLASS))
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


def _library_missing(text: str, sysroot: Path, ld_library_path: tuple[str, ...]) -> str | None:
    """A path: a loadable x86-64 shared object there. A bare name: found by the search every dlopen shares
    (LD_LIBRARY_PATH, ld.so.conf, the defaults) or in a ROCm install's library folder (the opener's RUNPATH, which
    this check does not know, usually points there): a name found in neither is named, nothing else."""
    from jax_rocm7_plugin._binary.elf_header import shared_object_problem
    from jax_rocm7_plugin._machine.ld_resolve import resolve_opened

    if "/" in text:
        if not text.startswith("/"):
            return None  # read against the working directory: unknown here
        path = host_path(sysroot, text)
        if not path.is_file():
            return f"names {text}, which is {'not a file' if path.exists() else 'not there'} on this machine"
        problem = shared_object_problem(path)
        return None if problem is None else f"names {text}, which the loader cannot load ({problem})"
    if resolve_opened(text, None, sysroot, ld_library_path) is not None:
        return None
    import glob

    from jax_rocm7_plugin._machine.rocm_install import library_dirs_of

    trees = [host_path(sysroot, "/opt/rocm"), *map(Path, sorted(glob.glob(str(host_path(sysroot, "/opt/rocm-*")))))]
    if any((folder / text).is_file() for tree in trees for folder in library_dirs_of(tree)):
        return None
    return f"names the library {text}, which the loader finds neither on its search path nor in a ROCm install"


def _creatable_missing(kind: str, text: str, sysroot: Path) -> str | None:
    """file-created: the folder it is made in is a folder. directory-created (mkdir -p): what exists of the path is
    folders. Relative values are read against the working directory: unknown here."""
    if not text.startswith("/"):
        return None
    path = host_path(sysroot, text)
    if kind == "file-created":
        if path.is_dir():
            return f"names {text}, which is a folder, not a file"
        parent = path.parent
        if not parent.is_dir():
            state = "not a folder" if parent.exists() else "not there"
            return f"names {text}, whose folder {os.path.dirname(text) or '/'} is {state}"
        return None
    probe = Path(text)
    for part in (probe, *probe.parents):
        under = host_path(sysroot, str(part))
        if under.exists():
            if under.is_dir():
                return None
            return f"names {text}, and {part} on its way is a file, not a folder"
    return None


def _host_missing(text: str, sysroot: Path) -> str | None:
    """An address, a name of the sysroot's /etc/hosts, or (on the real machine only, under a deadline) a name the
    resolver answers. A resolver that does not answer in time tells nothing."""
    import ipaddress
    import socket

    from jax_rocm7_plugin._machine import text_under
    from jax_rocm7_plugin._safe_io import Deadline, host_name, with_deadline

    name = text.strip("[]")
    try:
        ipaddress.ip_address(name)
        return None
    except ValueError:
        pass
    hosts = text_under(sysroot, "/etc/hosts", 1 << 20) or ""
    for line in hosts.splitlines():
        if name.lower() in (w.lower() for w in line.split("#", 1)[0].split()[1:]):
            return None
    if name.lower() == host_name(sysroot).lower():
        return None  # this machine's own name: HOSTNAME as the shell sets it, resolved by the machine's own means
    if sysroot != Path("/"):
        return None  # a synthetic tree has no resolver to ask
    try:
        with_deadline(lambda: socket.getaddrinfo(name, None), 2.0)
        return None
    except socket.gaierror:
        return (
            f"names the host {name}, which does not resolve here (not in /etc/hosts, and the resolver does not know it)"
        )
    except (Deadline, OSError, UnicodeError):
        return None


MAX_RDMA_PORTS = 64


def _gid_missing(text: str, folder: Path) -> str | None:
    """A GID index (RCCL's NCCL_IB_GID_INDEX; negative: RCCL searches one itself) that some active RDMA port holds: a
    port's gids/<index> in sysfs, not all zeros (an unused entry). Where this machine has no active RDMA port, RCCL
    does not use the index: nothing to judge."""
    from jax_rocm7_plugin._safe_io import read_attribute

    try:
        index = int(text, 0)
        devices = sorted(os.listdir(folder))
    except (ValueError, OSError):
        return None
    if index < 0:
        return None
    active, held = [], []
    for device in devices:
        try:
            ports = sorted(os.listdir(folder / device / "ports"))
        except OSError:
            continue
        for port in ports[:MAX_RDMA_PORTS]:
            where = folder / device / "ports" / port
            try:  # sysfs attributes, read once and bounded: a FIFO or a huge file put there does not hold the read
                if "ACTIVE" not in read_attribute(str(where / "state"), 64):
                    continue
                active.append(f"{device} port {port}")
                gid = read_attribute(str(where / "gids" / str(index)), 64).strip()
            except (OSError, ValueError):
                continue
            if gid.strip("0:"):
                held.append(f"{device} port {port}")
    if not active or held:
        return None
    return f"names GID index {index}, which no active RDMA port here holds ({', '.join(active)}: no such GID, or zeros)"
