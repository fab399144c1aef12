"""The stack's installed files against their packages' manifests: pip's RECORD (`path,sha256=<urlsafe base64>,size`
per file, PEP 376/627) and dpkg's /var/lib/dpkg/info/<package>.md5sums (`<md5>  <path relative to />`, dpkg(1)).

Which packages, and how much is read, is data (_policy/machine_needs.json "manifests"): a file is compared by
digest where it is small, by size (pip) or existence (dpkg) where it is large, within a budget of bytes read. rpm's
database is a Berkeley DB or SQLite file that needs rpm's own library to read: not read.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.packages import normalize
from jax_rocm7_plugin._machine.python_env import PythonEnv
from jax_rocm7_plugin._policy.machine_needs import ManifestPolicy
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import read_text

DPKG_INFO = "/var/lib/dpkg/info"
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MAX_PACKAGES = 400


class ManifestCheck(NamedTuple):
    system: str  # pip or dpkg
    package: str
    version: str | None
    missing: tuple[str, ...]  # as the machine names them
    changed: tuple[str, ...]
    checked: int  # files compared


class _Budget:
    def __init__(self, total: int) -> None:
        self.left = total

    def take(self, size: int) -> bool:
        if size > self.left:
            return False
        self.left -= size
        return True


def _digest(path: Path, algorithm: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return hashlib.file_digest(stream, algorithm).digest()
    except OSError:
        return None


def _pip(env: PythonEnv, policy: ManifestPolicy, budget: _Budget, root: Path) -> list[ManifestCheck]:
    checks = []
    for distribution in env.distributions:
        name = normalize(distribution.name)
        if not name.startswith(tuple(normalize(p) for p in policy.pip_prefixes)):
            continue
        folder = Path(distribution.location)
        try:
            record = read_text(Path(distribution.info) / "RECORD", MAX_MANIFEST_BYTES)
        except (OSError, ValueError):
            continue
        missing, changed, checked = [], [], 0
        for row in csv.reader(record.splitlines()):
            if len(row) < 3 or not row[1].startswith("sha256=") or not row[2].isdigit() or row[0].startswith(".."):
                continue
            path = folder / row[0]
            shown = "/" + os.path.relpath(path, root) if str(root) != "/" else str(path)
            checked += 1
            try:
                size = os.stat(path).st_size
            except OSError:
                missing.append(shown)
                continue
            if size != int(row[2]):
                changed.append(shown)
            elif size <= policy.hash_max_bytes and budget.take(size):
                digest = _digest(path, "sha256")
                wanted = row[1].removeprefix("sha256=")
                if digest is not None and base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != wanted:
                    changed.append(shown)
        checks.append(ManifestCheck("pip", distribution.name, distribution.version, tuple(missing), tuple(changed),
                                    checked))  # fmt: skip
    return checks


def _dpkg(root: Path, policy: ManifestPolicy, budget: _Budget) -> list[ManifestCheck]:
    folder = host_path(root, DPKG_INFO)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".md5sums"))
    except (OSError, ValueError):
        return []
    checks = []
    for name in names:
        package = name.removesuffix(".md5sums").split(":")[0]
        if not package.startswith(policy.dpkg_prefixes) or len(checks) >= MAX_PACKAGES:
            continue
        try:
            text = read_text(folder / name, MAX_MANIFEST_BYTES)
        except (OSError, ValueError):
            continue
        missing, changed, checked = [], [], 0
        for line in text.splitlines():
            digest, _, relative = line.partition("  ")
            if len(digest) != 32 or not relative:
                continue
            checked += 1
            path = host_path(root, "/" + relative)
            try:
                size = os.stat(path).st_size
            except OSError:
                missing.append("/" + relative)
                continue
            if size <= policy.hash_max_bytes and budget.take(size):
                found = _digest(path, "md5")
                if found is not None and found.hex() != digest:
                    changed.append("/" + relative)
        checks.append(ManifestCheck("dpkg", package, None, tuple(missing), tuple(changed), checked))
    return checks


def read_manifests(root: Path, env: PythonEnv | None, policy: ManifestPolicy) -> tuple[ManifestCheck, ...]:
    budget = _Budget(policy.hash_budget_bytes)
    pip = _pip(env, policy, budget, root) if env is not None else []
    return (*pip, *_dpkg(root, policy, budget))
