"""The folder XLA's AMDGPU compiler writes each GPU kernel's files in, read as XLA chooses it.

XLA's AMDGPU backend (`EmitModuleToHsaco`, xla/service/gpu/llvm_gpu_backend/amdgpu_backend.cc) writes the LLVM IR,
the ISA object and the code object of every kernel it compiles into the first of tsl's local temporary folders, and
links them with ld.lld there. tsl (`PosixEnv::GetLocalTempDirectories`, tsl/platform/default/env.cc) takes the first
of TEST_TMPDIR, TMPDIR, TMP (each where set and not empty) and /tmp that is an existing folder; it does not ask
whether the process may write in it. XLA does not check its writes either: in a folder it cannot write in, every
kernel compiles to an empty code object and the first jit fails; with no such folder at all, it refuses to compile.

A reader: under a sysroot, bounded (a stat per candidate), typed facts, no sentence.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path

from jax_rocm7_plugin._environment import read
from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.identity import OVERFLOW_ID, Identity
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import stat_named

CANDIDATES = ("TEST_TMPDIR", "TMPDIR", "TMP")  # then FALLBACK, in tsl's order
FALLBACK = "/tmp"


class Candidate(NamedTuple):
    named_by: str  # the variable, or FALLBACK itself
    path: str  # as the machine names it
    why_not: str | None  # why tsl passes over it (None: it is the one taken)


class TempDir(NamedTuple):
    considered: tuple[Candidate, ...]  # in tsl's order, up to the one taken
    path: str | None  # the folder taken (None: no candidate is an existing folder)
    uid: int | None = None
    gid: int | None = None
    mode: int | None = None

    @property
    def chosen(self) -> Candidate | None:
        return next((c for c in self.considered if c.why_not is None), None)


def read_temp_dir(root: Path, environ: Mapping[str, str]) -> TempDir:
    considered = []
    for named_by, value in [*((n, read(n, environ)) for n in CANDIDATES), (FALLBACK, FALLBACK)]:
        if not value:
            continue  # unset or empty: tsl skips it
        try:
            info = stat_named(host_path(root, value) if value.startswith("/") else value)
        except (OSError, ValueError) as error:
            considered.append(Candidate(named_by, value, getattr(error, "strerror", None) or str(error)))
            continue
        if not stat.S_ISDIR(info.st_mode):
            considered.append(Candidate(named_by, value, "not a folder"))
            continue
        considered.append(Candidate(named_by, value, None))
        return TempDir(tuple(considered), value, info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode))
    return TempDir(tuple(considered), None)


def may_write_in(temp: TempDir, identity: Identity) -> bool:
    """Whether `identity` may create files in the folder taken."""
    return may_create_in(temp.mode, temp.uid, temp.gid, identity)


def may_create_in(mode: int | None, uid: int | None, gid: int | None, identity: Identity) -> bool:
    """Whether `identity` may create files in a folder of this mode and owner (write and search bits, by number, as
    the kernel judges them; root passes over what its user namespace maps)."""
    if mode is None or uid is None or gid is None:
        return False
    if identity.uid == 0 and OVERFLOW_ID not in (uid, gid):
        return True
    if uid == identity.uid:
        bits = stat.S_IWUSR | stat.S_IXUSR
    elif gid in identity.gids:
        bits = stat.S_IWGRP | stat.S_IXGRP
    else:
        bits = stat.S_IWOTH | stat.S_IXOTH
    return mode & bits == bits
