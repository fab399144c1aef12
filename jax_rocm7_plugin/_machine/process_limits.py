"""This process's limits as the stack meets them: every resource limit, its cgroup's limits, and whether it runs in
a user namespace (a rootless container).

Formats (under the sysroot, bounded; a file missing or damaged is unknown):
- /proc/self/limits: a header, then one line per limit: its name, the soft and the hard limit (a number or
  "unlimited"), its unit (proc(5); fs/proc/base.c, proc_pid_limits: the name padded to 25 columns, each limit to
  20);
- /proc/self/cgroup: `hierarchy-ID:controllers:path` per line; `0::path` is the unified (v2) hierarchy
  (cgroups(7)). v2 limits: memory.max and pids.max under /sys/fs/cgroup/<path> ("max" for none;
  Documentation/admin-guide/cgroup-v2.rst); v1: memory.limit_in_bytes and pids.max under
  /sys/fs/cgroup/<controller>/<path>. A container's cgroup namespace shows its own cgroup as "/";
- /proc/self/uid_map: `inside outside count` per line (user_namespaces(7)): the initial namespace maps
  0 0 4294967295; any other map is a user namespace, where root inside is someone else outside.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jax_rocm7_plugin._machine import text_under
from jax_rocm7_plugin._record import NamedTuple

LIMITS = "/proc/self/limits"
CGROUP = "/proc/self/cgroup"
UID_MAP = "/proc/self/uid_map"
CGROUP_ROOT = "/sys/fs/cgroup"
MAX_BYTES = 64 * 1024
_NAME_WIDTH = 26  # "Max locked memory" padded to 25 columns and a blank (proc_pid_limits' "%-25s ")


class Limit(NamedTuple):
    soft: int | None  # None: unlimited
    hard: int | None
    unit: str  # bytes, files, processes, seconds, ... ("" for the nice and realtime priorities)


class CgroupLimits(NamedTuple):
    version: int  # 1 or 2
    path: str  # the process's cgroup, as /proc/self/cgroup names it
    memory_max: int | None  # bytes; None: no limit (or unreadable)
    pids_max: int | None  # tasks (threads count); None: no limit


class ProcessLimits(NamedTuple):
    limits: Mapping[str, Limit] | None  # by name ("Max open files"); None: /proc/self/limits unreadable
    cgroup: CgroupLimits | None
    user_namespace: bool | None  # None: unknown
    outside_uid: int | None  # what root (uid 0) inside is outside, in a user namespace

    def soft(self, name: str) -> int | None:
        """A limit's soft value (None: unlimited or unknown)."""
        limit = self.limits.get(name) if self.limits is not None else None
        return limit.soft if limit is not None else None


def _number(word: str) -> int | None:
    return int(word) if word.isascii() and word.isdigit() else None


def parse_limits(text: str | None) -> dict[str, Limit] | None:
    """/proc/<pid>/limits as a mapping by limit name; None where it is not that file."""
    if not text or not text.startswith("Limit"):
        return None
    found: dict[str, Limit] = {}
    for line in text.splitlines()[1:]:
        name, rest = line[:_NAME_WIDTH].strip(), line[_NAME_WIDTH:].split()
        if not name or len(rest) < 2:
            continue
        soft, hard = (None if w == "unlimited" else _number(w) for w in rest[:2])
        if (soft is None and rest[0] != "unlimited") or (hard is None and rest[1] != "unlimited"):
            continue  # neither a number nor "unlimited": not a limit line
        found[name] = Limit(soft, hard, rest[2] if len(rest) > 2 else "")
    return found


def _cgroup_value(root: Path, path: str) -> int | None:
    text = text_under(root, path, MAX_BYTES)
    return None if text is None else _number(text.strip())


def read_cgroup(root: Path) -> CgroupLimits | None:
    text = text_under(root, CGROUP, MAX_BYTES)
    if text is None:
        return None
    unified, legacy = None, {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or ".." in parts[2].split("/"):
            continue
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
        for controller in parts[1].split(","):
            if controller:
                legacy[controller] = parts[2]
    if unified is not None and not legacy:
        base = f"{CGROUP_ROOT}/{unified.strip('/')}".rstrip("/")
        return CgroupLimits(
            2, unified, _cgroup_value(root, f"{base}/memory.max"), _cgroup_value(root, f"{base}/pids.max")
        )
    if legacy:
        memory, pids = legacy.get("memory"), legacy.get("pids")
        memory_max = None
        if memory is not None:
            value = _cgroup_value(
                root, f"{CGROUP_ROOT}/memory/{memory.strip('/')}/memory.limit_in_bytes".replace("//", "/")
            )
            memory_max = value if value is not None and value < 1 << 62 else None  # v1 says "no limit" as a huge number
        pids_max = (
            None
            if pids is None
            else _cgroup_value(root, f"{CGROUP_ROOT}/pids/{pids.strip('/')}/pids.max".replace("//", "/"))
        )
        return CgroupLimits(1, memory or pids or "/", memory_max, pids_max)
    return None


def read_user_namespace(root: Path) -> tuple[bool | None, int | None]:
    text = text_under(root, UID_MAP, MAX_BYTES)
    if text is None:
        return None, None
    rows = [line.split() for line in text.splitlines() if line.split()]
    if rows == [["0", "0", "4294967295"]]:
        return False, None
    outside = next((_number(row[1]) for row in rows if len(row) == 3 and row[0] == "0"), None)
    return True, outside


def read_process_limits(root: Path) -> ProcessLimits:
    inside, outside = read_user_namespace(root)
    return ProcessLimits(parse_limits(text_under(root, LIMITS, MAX_BYTES)), read_cgroup(root), inside, outside)
