"""Who this process is, by number: its user id and every group id it holds, and who may open a device node.

Group names mean nothing across a container, an LXC guest or a host: the kernel checks a device node's owning
group id against the process's numeric group ids. A container's `render` group is often another number than the
host's (Debian 110, Ubuntu 109, RHEL 989, ...), so a user "in the render group" by name can still be refused.
So access is judged here by numbers, the way the kernel judges it (owner, group, other bits; uid 0 passes),
with the identity read from `/proc/self/status` under the sysroot (the `Uid:`, `Gid:` and `Groups:` lines,
proc(5)), and group names from the sysroot's `/etc/group` only to make the numbers readable.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._record import NamedTuple

STATUS = "/proc/self/status"
OVERFLOW_ID = 65534  # what an id the user namespace does not map shows as (/proc/sys/kernel/overflow{u,g}id)
GROUP_FILE = "/etc/group"


class Identity(NamedTuple):
    uid: int  # effective user id
    gids: tuple[int, ...]  # effective group id, then the supplementary groups, without repeats
    source: str  # where it was read ("/proc/self/status" under the sysroot, or "this process")


def read_identity(root: Path, added: tuple[int, ...] = ()) -> Identity:
    """The identity of the process the sysroot describes (its /proc/self/status), else of this process; `added`:
    group ids it is assumed to gain (the doctor checking a group fix)."""
    path = host_path(root, STATUS)
    uid = gid = None
    groups: list[int] = []
    for line in _lines(path, 64 * 1024):
        key, _, value = line.partition(":")
        fields = value.split()
        if key == "Uid" and len(fields) >= 2 and fields[1].isdigit():
            uid = int(fields[1])  # real, effective, saved, filesystem: the kernel checks the last two
        elif key == "Gid" and len(fields) >= 2 and fields[1].isdigit():
            gid = int(fields[1])
        elif key == "Groups":
            groups = [int(f) for f in fields if f.isdigit()]
    if uid is None or gid is None:
        uid, gid, groups, where = os.geteuid(), os.getegid(), os.getgroups(), "this process"
    else:
        where = str(path)
    return Identity(uid, tuple(dict.fromkeys([gid, *groups, *added])), where)


def may_read_write(info: os.stat_result, identity: Identity) -> bool:
    """Whether the kernel lets `identity` open a file of this mode and ownership for reading and writing (ACLs
    and capabilities other than root's are not modelled: the loader asks the kernel itself where it can)."""
    if identity.uid == 0 and OVERFLOW_ID not in (info.st_uid, info.st_gid):
        # root passes, but only over files its user namespace maps: inside a rootless container the host's root and
        # render group show as the overflow id, and the group bits decide (user_namespaces(7)).
        return True
    mode = info.st_mode
    if info.st_uid == identity.uid:
        return bool(mode & stat.S_IRUSR and mode & stat.S_IWUSR)
    if info.st_gid in identity.gids:
        return bool(mode & stat.S_IRGRP and mode & stat.S_IWGRP)
    return bool(mode & stat.S_IROTH and mode & stat.S_IWOTH)


def group_names(root: Path) -> dict[int, str]:
    """The group database of the machine the sysroot describes (/etc/group: name:password:gid:members)."""
    names: dict[int, str] = {}
    for line in _lines(host_path(root, GROUP_FILE), 4 * 1024 * 1024):
        fields = line.split(":")
        if len(fields) >= 3 and fields[2].isdigit():
            names.setdefault(int(fields[2]), fields[0])
    return names


def _lines(path: Path, limit: int) -> list[str]:
    """The lines of a machine file, read as every machine file is (_safe_io: regular files only, bounded); none
    where it cannot be read."""
    from jax_rocm7_plugin._safe_io import read_text

    try:
        return read_text(path, limit).splitlines()
    except (OSError, ValueError):
        return []


def described(gid: int, names: dict[int, str]) -> str:
    """gid 110 ('render' here), or gid 110 (no name here)."""
    return f"gid {gid} ('{names[gid]}' here)" if gid in names else f"gid {gid} (no name here)"
