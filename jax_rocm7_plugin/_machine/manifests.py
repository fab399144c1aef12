"""The stack's installed files against their packages' manifests: pip's RECORD (`path,sha256=<urlsafe base64>,size`
per file, PEP 376/627), dpkg's /var/lib/dpkg/info/<package>.md5sums (`<md5>  <path relative to />`, dpkg(1)) and
rpm's database.

rpm's database is read where it is SQLite (rpm 4.16 and later: RHEL 9 and 10, Fedora, openSUSE's sysimage): the
`Name` index gives the packages' row numbers, `Packages` their headers. A header is rpm's documented format: a
count of index entries and the data's length (big-endian), then entries of (tag, type, offset, count), then the
data. Of each installed file it gives the path (`DIRNAMES[DIRINDEXES] + BASENAMES`), size, digest (in the
header's `FILEDIGESTALGO`), mode, flags and state: only regular files rpm installed (state normal) are held, not
a `%config` file an administrator may edit, nor `%ghost`. rpm's older Berkeley DB and SUSE's ndb are not read.

Which packages, and how much is read, is data (_policy/machine_needs.json "manifests"): a file is compared by
digest where it is small, by size (pip, rpm) or existence (dpkg) where it is large, within a budget of bytes read.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import stat
import struct
from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.packages import normalize
from jax_rocm7_plugin._machine.python_env import PythonEnv
from jax_rocm7_plugin._policy.machine_needs import ManifestPolicy
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import read_text

DPKG_INFO = "/var/lib/dpkg/info"
RPM_DATABASES = ("/var/lib/rpm/rpmdb.sqlite", "/usr/lib/sysimage/rpm/rpmdb.sqlite")
MAX_HEADER_BYTES = 64 * 1024 * 1024  # rpm's own bound on a header's data (HEADER_DATA_MAX 256 MiB) is larger
# rpm's header tags (rpmtag.h) and types (0 NULL ... 9 I18NSTRING) read here.
_NAME, _VERSION, _RELEASE = 1000, 1001, 1002
_FILESIZES, _FILEMODES, _FILESTATES, _FILEDIGESTS, _FILEFLAGS = 1028, 1030, 1029, 1035, 1037
_DIRINDEXES, _BASENAMES, _DIRNAMES, _LONGFILESIZES, _FILEDIGESTALGO = 1116, 1117, 1118, 5008, 5011
_CONFIG, _GHOST = 1 << 0, 1 << 6  # rpmfileAttrs: %config, %ghost
# PGPHASHALGO values rpm writes in FILEDIGESTALGO (RFC 4880's numbers); MD5 where the tag is absent.
_DIGESTS = {1: "md5", 2: "sha1", 8: "sha256", 9: "sha384", 10: "sha512", 11: "sha224"}
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MAX_PACKAGES = 400


class ManifestCheck(NamedTuple):
    system: str  # pip, dpkg or rpm
    package: str
    version: str | None
    missing: tuple[str, ...]  # as the machine names them
    changed: tuple[str, ...]
    checked: int  # files compared
    family: str | None = None  # the distribution's family (os-release: debian, rhel, suse), for dpkg and rpm


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


class _Held:
    """One package's files held to its manifest, one at a time: missing, of another size, or of another digest."""

    def __init__(self, policy: ManifestPolicy, budget: _Budget) -> None:
        self.policy, self.budget = policy, budget
        self.missing: list[str] = []
        self.changed: list[str] = []
        self.checked = 0

    def compare(
        self, path: Path, shown: str, size: int | None, algorithm: str | None, wanted: str, *, urlsafe: bool = False
    ) -> None:
        """`size`: the manifest's, where it has one; `wanted`: its digest in `algorithm`, hex or (pip's RECORD)
        urlsafe base64 without padding. A file over the policy's size or past the budget is held by size only."""
        self.checked += 1
        try:
            actual = os.stat(path).st_size
        except OSError:
            self.missing.append(shown)
            return
        if size is not None and actual != size:
            self.changed.append(shown)
        elif algorithm and actual <= self.policy.hash_max_bytes and self.budget.take(actual):
            digest = _digest(path, algorithm)
            if digest is None:
                return
            written = base64.urlsafe_b64encode(digest).rstrip(b"=").decode() if urlsafe else digest.hex()
            if written != wanted:
                self.changed.append(shown)

    def check(self, system: str, package: str, version: str | None) -> ManifestCheck:
        return ManifestCheck(system, package, version, tuple(self.missing), tuple(self.changed), self.checked)


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
        held = _Held(policy, budget)
        for row in csv.reader(record.splitlines()):
            if len(row) < 3 or not row[1].startswith("sha256=") or not row[2].isdigit() or row[0].startswith(".."):
                continue
            path = folder / row[0]
            shown = "/" + os.path.relpath(path, root) if str(root) != "/" else str(path)
            held.compare(path, shown, int(row[2]), "sha256", row[1].removeprefix("sha256="), urlsafe=True)
        checks.append(held.check("pip", distribution.name, distribution.version))
    return checks


def _dpkg(root: Path, policy: ManifestPolicy, budget: _Budget) -> list[ManifestCheck]:
    folder = host_path(root, DPKG_INFO)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".md5sums"))
    except (OSError, ValueError):
        return []
    checks: list[ManifestCheck] = []
    for name in names:
        package = name.removesuffix(".md5sums").split(":")[0]
        if not package.startswith(policy.system_prefixes) or len(checks) >= MAX_PACKAGES:
            continue
        try:
            text = read_text(folder / name, MAX_MANIFEST_BYTES)
        except (OSError, ValueError):
            continue
        held = _Held(policy, budget)
        for line in text.splitlines():
            digest, _, relative = line.partition("  ")
            if len(digest) != 32 or not relative:
                continue
            held.compare(host_path(root, "/" + relative), "/" + relative, None, "md5", digest)  # md5sums: no size
        checks.append(held.check("dpkg", package, None))
    return checks


def rpm_header(blob: bytes) -> dict[int, tuple[int, object]]:
    """The tags of one header blob as {tag: (type, value)}: strings decoded, arrays as tuples. ValueError where the
    blob is not a whole header (a count or an offset outside it)."""
    if len(blob) < 8:
        raise ValueError("shorter than a header's intro")
    count, length = struct.unpack_from(">ii", blob)
    start = 8 + 16 * count
    if not (0 < count <= 0xFFFF and 0 <= length <= MAX_HEADER_BYTES and start + length <= len(blob)):
        raise ValueError(f"a header of {count} entries and {length} bytes in {len(blob)}")
    data = blob[start : start + length]
    tags: dict[int, tuple[int, object]] = {}
    for index in range(count):
        tag, kind, offset, items = struct.unpack_from(">iiii", blob, 8 + 16 * index)
        if not 0 <= offset <= length or items < 0:
            raise ValueError(f"tag {tag}: offset {offset} outside the data")
        tags[tag] = (kind, _value(data, kind, offset, items))
    return tags


def _value(data: bytes, kind: int, offset: int, items: int) -> object:
    sizes = {1: ("b", 1), 2: ("b", 1), 3: ("H", 2), 4: ("I", 4), 5: ("Q", 8)}  # CHAR, INT8 ... INT64 (rpm: unsigned)
    if kind in sizes:
        code, size = sizes[kind]
        if offset + size * items > len(data):
            raise ValueError("a number array past the data")
        return struct.unpack_from(f">{items}{code}", data, offset)
    if kind in (6, 8, 9):  # a string, an array of them, a translated one: NUL-terminated, one after the other
        words, at = [], offset
        for _ in range(1 if kind == 6 else items):
            end = data.find(b"\0", at)
            if end == -1:
                raise ValueError("a string without its end")
            words.append(data[at:end].decode("utf-8", "replace"))
            at = end + 1
        return words[0] if kind == 6 else tuple(words)
    return None  # binary and the rest: not read here


def _rpm_packages(path: Path, prefixes: tuple[str, ...]) -> list[bytes]:
    """The header blobs of the installed packages whose names start with a prefix, read-only (`immutable`: no lock
    is taken and nothing is written beside the file)."""
    import sqlite3
    from urllib.parse import quote

    try:
        connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return []
    try:
        rows = connection.execute("SELECT key, hnum FROM Name").fetchall()
        wanted = sorted({hnum for key, hnum in rows if isinstance(key, str) and key.startswith(prefixes)})
        blobs = []
        for hnum in wanted[:MAX_PACKAGES]:
            found = connection.execute("SELECT blob FROM Packages WHERE hnum = ?", (hnum,)).fetchone()
            if found is not None and isinstance(found[0], bytes):
                blobs.append(found[0])
        return blobs
    except sqlite3.Error:
        return []
    finally:
        connection.close()


def _rpm(root: Path, policy: ManifestPolicy, budget: _Budget) -> list[ManifestCheck]:
    database = next((p for p in (host_path(root, d) for d in RPM_DATABASES) if p.is_file()), None)
    if database is None:
        return []
    checks = []
    for blob in _rpm_packages(database, policy.system_prefixes):
        try:
            checks.append(_rpm_check(root, rpm_header(blob), policy, budget))
        except (ValueError, TypeError, IndexError, struct.error):
            continue  # a header that is not whole: nothing to hold the files to
    return [c for c in checks if c is not None]


def _rpm_check(
    root: Path, tags: dict[int, tuple[int, object]], policy: ManifestPolicy, budget: _Budget
) -> ManifestCheck | None:
    def strings(tag: int) -> tuple[str, ...]:
        value = tags.get(tag, (0, ()))[1]
        return value if isinstance(value, tuple) and all(isinstance(v, str) for v in value) else ()

    def numbers(tag: int) -> tuple[int, ...]:
        value = tags.get(tag, (0, ()))[1]
        return value if isinstance(value, tuple) and all(isinstance(v, int) for v in value) else ()

    def text(tag: int) -> str | None:
        value = tags.get(tag, (0, None))[1]
        return value if isinstance(value, str) else None

    name = text(_NAME)
    if name is None:
        return None
    version = f"{text(_VERSION) or ''}-{text(_RELEASE) or ''}".strip("-") or None
    basenames, dirnames, digests = strings(_BASENAMES), strings(_DIRNAMES), strings(_FILEDIGESTS)
    indexes, modes, flags, states = numbers(_DIRINDEXES), numbers(_FILEMODES), numbers(_FILEFLAGS), numbers(_FILESTATES)
    sizes = numbers(_LONGFILESIZES) or numbers(_FILESIZES)
    algorithm = _DIGESTS.get((numbers(_FILEDIGESTALGO) or (1,))[0])
    held = _Held(policy, budget)
    for index, base in enumerate(basenames):
        if not stat.S_ISREG(modes[index] & 0xFFFF) or flags[index] & (_CONFIG | _GHOST) or (states and states[index]):
            continue  # a folder or a link; a file an administrator edits; one rpm did not install (nodocs, a language)
        shown = dirnames[indexes[index]] + base
        held.compare(host_path(root, shown), shown, sizes[index], algorithm, digests[index])
    return held.check("rpm", name, version)


def read_manifests(root: Path, env: PythonEnv | None, policy: ManifestPolicy) -> tuple[ManifestCheck, ...]:
    budget = _Budget(policy.hash_budget_bytes)
    pip = _pip(env, policy, budget, root) if env is not None else []
    system = (*_dpkg(root, policy, budget), *_rpm(root, policy, budget))
    if system:
        from jax_rocm7_plugin._machine.host import os_release_ids
        from jax_rocm7_plugin._policy.system_packages import family

        known = family(os_release_ids(root))
        system = tuple(c._replace(family=known) for c in system)
    return (*pip, *system)
