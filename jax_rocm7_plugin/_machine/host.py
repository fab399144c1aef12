"""Which host this process runs on, and its limits: the facts a job's processes compare per host.

The host name is read under the sysroot (`/proc/sys/kernel/hostname`, the kernel's UTS name) so that tests give
each process a host of its own; the real root falls back to gethostname. The reading itself is _safe_io's, where a
job's start reads it without this package.
"""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._safe_io import host_name as host_name


def open_files_limit() -> tuple[int | None, int | None]:
    """(soft, hard) RLIMIT_NOFILE of this process; None for unlimited."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return (None if soft == resource.RLIM_INFINITY else soft, None if hard == resource.RLIM_INFINITY else hard)


def os_release_ids(root: Path) -> tuple[str, ...]:
    """/etc/os-release's ID, then its ID_LIKE words (os-release(5)), lower case; () where there is none."""
    from jax_rocm7_plugin._safe_io import read_text

    for name in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = read_text(host_path(root, name), 64 * 1024)
        except (OSError, ValueError):
            continue
        values = {}
        for line in text.splitlines():
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip().strip("\"'").lower()
        return tuple(filter(None, [values.get("ID", ""), *values.get("ID_LIKE", "").split()]))
    return ()
