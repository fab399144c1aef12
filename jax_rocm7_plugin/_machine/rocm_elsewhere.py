"""ROCm that is on this machine but not where the PJRT library looks, and the one step that makes it seen.

The loader looks where the library's RUNPATH and the dynamic loader look (`rocm_install.find_rocm_installs`). When
nothing is there, "install ROCm" is the wrong fix for a user whose ROCm is on disk: a TheRock tarball unpacked in a
home folder, AMD's packages without their /opt/rocm link, ROCm from pip installed into another Python environment,
or a runtime the package database lists but a broken upgrade removed. The doctor then looks further (where:
rocm_policy.json's `elsewhere_*`, every search bounded), and says what it found and how (the file on disk, dpkg's
file lists, rpm's database, a pip distribution's metadata).

The doctor's alone (the loader never imports it). Stdlib only; sqlite3 is imported only where an rpm database is.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import struct
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from jax_rocm7_plugin._findings import Finding, Remedy
from jax_rocm7_plugin._machine import host_path, resolved, root_owned, unrooted
from jax_rocm7_plugin._names import HIP_RUNTIME_PREFIX, PIP_ROCM_DISTRIBUTION, PIP_ROCM_PACKAGE, ROCM_MAJOR
from jax_rocm7_plugin._policy.grammar import PACKAGE_NAME
from jax_rocm7_plugin._policy.versions import pinned
from jax_rocm7_plugin._record import NamedTuple

_RUNTIME = re.compile(re.escape(HIP_RUNTIME_PREFIX) + r"(\d+)$")
_LISTED_RUNTIME = re.compile(r"(/\S*/" + re.escape(HIP_RUNTIME_PREFIX) + r"\d+)$")
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?")
# rpm's header (lib/header.c): two big-endian int32s (index entries, data bytes), then 16-byte entries of tag, type,
# offset, count. The tags that say a package's name and where its files went.
_RPM_NAME, _RPM_DIRINDEXES, _RPM_BASENAMES, _RPM_DIRNAMES = 1000, 1116, 1117, 1118
_RPM_INT32, _RPM_STRING, _RPM_STRING_ARRAY = 4, 6, 8
# Package names as each database allows them (Debian policy 5.6.1; rpm's naming guidelines): nothing else enters a
# command.
PIP_INDEX = "https://repo.amd.com/rocm/whl/{family}/"  # TheRock's per-family package index (the loader's fix too)


class Elsewhere(NamedTuple):
    """A HIP runtime the loader does not see."""

    location: str  # machine path: an install's root, or the `_rocm_sdk_core` folder of another environment
    kind: str  # "tree" (an install root), "pip" (another Python environment), "listed" (a package's, not on disk)
    runtime: str  # machine path of libamdhip64.so.N
    version: str | None
    source: str  # how it was found, for the evidence
    package: str | None = None  # the dpkg or rpm package that put it there ("dpkg:NAME", "rpm:NAME")
    library_dirs: tuple[str, ...] = ()  # machine paths of its library folders (a tree)
    requirements: tuple[str, ...] = ()  # a pip install's distributions, NAME==VERSION
    untrusted: str | None = None  # why another user could have put it there (then no fix points at it)
    root_owned: bool = False  # its folder is root's (a step with sudo may name it)

    @property
    def major(self) -> int | None:
        match = _RUNTIME.match(os.path.basename(self.runtime))
        return int(match.group(1)) if match else None

    def said(self) -> str:
        version = f"ROCm {self.version}" if self.version else f"ROCm {self.major or '(version unknown)'}"
        return f"{version} at {self.location} ({self.source})"


def search(root: Path, known: Sequence[Path] = (), who: tuple[int, int] | None = None) -> list[Elsewhere]:
    """Every HIP runtime under the sysroot `root` that is not one of `known` (real paths of the runtimes the loader
    already sees), ROCm 7 first, then those on disk before those only listed. `who`: (uid, gid) of the user the
    doctor speaks to (default: this process's); what lies where another user could have written it is marked
    `untrusted`."""
    from jax_rocm7_plugin._policy.rocm_policy import elsewhere_limits

    uid, gid = who if who is not None else (os.geteuid(), os.getegid())
    limits = elsewhere_limits()
    seen = {resolved(p) for p in known}
    found: list[Elsewhere] = []

    def add(item: Elsewhere) -> None:
        real = resolved(host_path(root, item.runtime)) if item.kind != "listed" else Path(item.runtime)
        if real in seen:
            return
        seen.add(real)
        found.append(_judged(root, item, uid, gid) if item.kind != "listed" else item)

    for item in _trees(root, limits["candidates"]):
        add(item)
    for item in _pip_sites(root, limits["candidates"]):
        add(item)
    for item in _dpkg(root, limits["list_files"], limits["list_bytes"]):
        add(item)
    for item in _rpm(root, limits["rpm_packages"]):
        add(item)
    return sorted(found, key=lambda e: (e.major != ROCM_MAJOR, e.kind == "listed"))


def _judged(root: Path, item: Elsewhere, uid: int, gid: int) -> Elsewhere:
    """`item` with why another user could have written it: its folder, each library folder and every folder above
    them owned by root or this user, and writable by no one else (a root-owned sticky folder above, like /tmp, stops
    no one's own folder in it being theirs alone): the rule the caches keep (_safe_io.untrusted_reason)."""
    from jax_rocm7_plugin._safe_io import untrusted_reason

    home = host_path(root, item.location)
    folders = [home, *(host_path(root, d) for d in item.library_dirs), host_path(root, os.path.dirname(item.runtime))]
    why = next(
        (r for f in dict.fromkeys(map(str, folders)) if (r := untrusted_reason(str(home), f, uid=uid, gid=gid))),
        None,
    )
    return item._replace(untrusted=why, root_owned=root_owned(root, item.location))


def _bounded_glob(root: Path, patterns: Sequence[str], limit: int) -> Iterator[Path]:
    count = 0
    for pattern in patterns:
        for path in glob.iglob(str(host_path(root, pattern))):  # lazily: the bound holds on a big /home
            count += 1
            if count > limit:
                return
            yield Path(path)


def _runtimes(directory: Path) -> list[Path]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(directory / n for n in names if _RUNTIME.match(n))


def _tree_version(home: Path, runtime: Path) -> str | None:
    from jax_rocm7_plugin._machine.rocm_install import read_version_file

    version = read_version_file(home)
    if version is not None:
        return version
    # The real file of the soname link carries the runtime's full version (libamdhip64.so.7.14.60300).
    real = resolved(runtime).name
    match = _VERSION.match(real.removeprefix(HIP_RUNTIME_PREFIX))
    return match.group(0) if match and "." in match.group(0) else None


def _trees(root: Path, limit: int) -> Iterator[Elsewhere]:
    from jax_rocm7_plugin._policy.rocm_policy import elsewhere_roots, library_dirs

    for home in _bounded_glob(root, elsewhere_roots(), limit):
        dirs = [home / d for d in library_dirs() if (home / d).is_dir()]
        runtimes = [r for d in dirs for r in _runtimes(d)]
        if not runtimes or not home.is_dir():
            continue
        runtime = max(runtimes, key=lambda p: p.name)
        yield Elsewhere(
            location=unrooted(home, root),
            kind="tree",
            runtime=unrooted(runtime, root),
            version=_tree_version(home, runtime),
            source=f"{runtime.name} on disk",
            library_dirs=tuple(unrooted(d, root) for d in dirs),
        )


def _pip_sites(root: Path, limit: int) -> Iterator[Elsewhere]:
    from jax_rocm7_plugin._policy.rocm_policy import elsewhere_sites

    for site in _bounded_glob(root, elsewhere_sites(), limit):
        runtimes = _runtimes(site / PIP_ROCM_PACKAGE / "lib")
        if not runtimes:
            continue
        distributions = _rocm_distributions(site)
        core = next((v for n, v in distributions if n.lower() == PIP_ROCM_DISTRIBUTION), None)
        yield Elsewhere(
            location=unrooted(site / PIP_ROCM_PACKAGE, root),
            kind="pip",
            runtime=unrooted(runtimes[-1], root),
            version=core,
            source=f"pip, in the environment of {unrooted(site, root)}",
            requirements=tuple(f"{n}=={v}" for n, v in distributions),
        )


def _rocm_distributions(site: Path) -> list[tuple[str, str]]:
    """(Name, Version) of every rocm* distribution installed in `site` (their METADATA headers)."""
    from jax_rocm7_plugin._safe_io import read_text

    found = []
    for info in sorted(site.glob("rocm*.dist-info")):
        try:
            text = read_text(info / "METADATA", 256 * 1024)
        except (OSError, ValueError):
            continue
        fields = dict(
            line.split(": ", 1) for line in text.split("\n\n", 1)[0].splitlines() if ": " in line and line[0] != " "
        )
        if "Name" in fields and "Version" in fields:
            found.append((fields["Name"].strip(), fields["Version"].strip()))
    return found


def _dpkg(root: Path, max_files: int, max_bytes: int) -> Iterator[Elsewhere]:
    """HIP runtimes dpkg says it installed (/var/lib/dpkg/info/PACKAGE[:ARCH].list: one installed path a line)."""
    from jax_rocm7_plugin._policy.rocm_policy import elsewhere_package_databases

    budget = max_bytes
    for listing in _bounded_glob(root, (elsewhere_package_databases()["dpkg_lists"],), max_files):
        from jax_rocm7_plugin._safe_io import read_text

        try:
            size = listing.stat().st_size
            if size > budget:
                return
            budget -= size
            text = read_text(listing, size + 4096)  # a regular file only: a FIFO planted there never blocks
        except (OSError, ValueError):
            continue
        if HIP_RUNTIME_PREFIX not in text:
            continue
        package = listing.name.removesuffix(".list").split(":", 1)[0]
        for line in text.splitlines():
            match = _LISTED_RUNTIME.search(line.strip())
            if match is not None:
                yield _listed(root, match.group(1), f"dpkg:{package}", f"dpkg's list of package {package}")


def _listed(root: Path, path: str, package: str, source: str) -> Elsewhere:
    """A runtime a package database names: a tree where the file is there, else the package's lost file."""
    on_disk = host_path(root, path)
    lib = os.path.dirname(path)
    home = os.path.dirname(lib) if os.path.basename(lib) in ("lib", "lib64") else lib
    if on_disk.exists():
        return Elsewhere(
            location=home,
            kind="tree",
            runtime=path,
            version=_tree_version(host_path(root, home), on_disk),
            source=source,
            package=package,
            library_dirs=(lib,),
        )
    return Elsewhere(location=home, kind="listed", runtime=path, version=None, source=source, package=package)


def _rpm(root: Path, max_packages: int) -> Iterator[Elsewhere]:
    """HIP runtimes rpm says it installed: its sqlite database (rpm >= 4.16: RHEL 9, Fedora 33, SUSE 15.4 on), one
    header blob a package in the Packages table."""
    from jax_rocm7_plugin._policy.rocm_policy import elsewhere_package_databases

    database = host_path(root, elsewhere_package_databases()["rpm_sqlite"])
    if not database.is_file():
        return
    import sqlite3

    rows = None
    # Read-only, with rpm's write-ahead log; where this user cannot open that (no -shm to share), the file as it is.
    for options in ("mode=ro", "mode=ro&immutable=1"):
        try:
            with sqlite3.connect(f"file:{database}?{options}", uri=True) as connection:
                rows = connection.execute("SELECT blob FROM Packages LIMIT ?", (max_packages,)).fetchall()
            break
        except sqlite3.Error:
            continue
    if rows is None:
        return
    for (blob,) in rows:
        if not isinstance(blob, bytes) or HIP_RUNTIME_PREFIX.encode() not in blob:
            continue
        header = rpm_header(blob)
        name = header.get(_RPM_NAME)
        if not isinstance(name, str):
            continue
        for path in rpm_files(header):
            if _LISTED_RUNTIME.search(path):
                yield _listed(root, path, f"rpm:{name}", f"rpm's database, package {name}")


def rpm_header(blob: bytes) -> dict[int, object]:
    """The tags of an rpm header blob this module reads: strings, string arrays and int32 arrays (a damaged blob
    gives what could be read)."""
    tags: dict[int, object] = {}
    if len(blob) < 8:
        return tags
    entries, size = struct.unpack(">ii", blob[:8])
    store = 8 + 16 * entries
    if entries < 0 or size < 0 or store + size > len(blob):
        return tags
    data = blob[store : store + size]
    for index in range(entries):
        tag, kind, offset, count = struct.unpack(">iiii", blob[8 + 16 * index : 24 + 16 * index])
        if tag not in (_RPM_NAME, _RPM_DIRINDEXES, _RPM_BASENAMES, _RPM_DIRNAMES) or not 0 <= offset < len(data):
            continue
        if kind == _RPM_STRING:
            tags[tag] = data[offset : data.find(b"\0", offset)].decode("utf-8", "replace")
        elif kind == _RPM_STRING_ARRAY:
            values, at = [], offset
            for _ in range(count):
                end = data.find(b"\0", at)
                if end < 0:
                    break
                values.append(data[at:end].decode("utf-8", "replace"))
                at = end + 1
            tags[tag] = values
        elif kind == _RPM_INT32 and offset + 4 * count <= len(data):
            tags[tag] = list(struct.unpack(f">{count}i", data[offset : offset + 4 * count]))
    return tags


def rpm_files(header: dict[int, object]) -> list[str]:
    """The installed paths of a header: DIRNAMES[DIRINDEXES[i]] + BASENAMES[i]."""
    names, indexes, dirs = header.get(_RPM_BASENAMES), header.get(_RPM_DIRINDEXES), header.get(_RPM_DIRNAMES)
    if not (isinstance(names, list) and isinstance(indexes, list) and isinstance(dirs, list)):
        return []
    return [dirs[i] + n for n, i in zip(names, indexes, strict=False) if 0 <= i < len(dirs)]


def refine(finding: Finding, found: Sequence[Elsewhere], ld_library_path: Sequence[str]) -> Finding:
    """rocm-not-found with what was found elsewhere: the install and the one step that makes the library see it
    (None found: the finding as it was, with the search said in its evidence)."""
    ours = [e for e in found if e.major == ROCM_MAJOR and e.untrusted is None]
    others = [f"also found, not ROCm {ROCM_MAJOR}: {e.said()}" for e in found if e.major != ROCM_MAJOR][:3]
    refused = [
        f"found, not offered (another user could have put it there): {e.said()}: {e.untrusted}"
        for e in found
        if e.untrusted is not None
    ][:3]
    if not ours:
        searched = "searched beyond the loader's path too: install roots, other Python environments, dpkg and rpm"
        return finding._replace(evidence=(*finding.evidence, searched, *refused, *others))
    best = ours[0]
    evidence = (
        f"found: {best.said()}",
        *(f"found: {e.said()}" for e in ours[1:3]),
        *finding.evidence,
        *refused,
        *others,
    )
    if best.kind == "tree":
        return _tree_finding(finding, best, ld_library_path, evidence)
    if best.kind == "pip":
        return _pip_finding(finding, best, evidence)
    return _listed_finding(finding, best, evidence)


def loader_step(
    location: str, dirs: Sequence[str], path: Sequence[str], *, link: bool, system: bool = True
) -> tuple[str, Remedy]:
    """The step that makes the dynamic loader see an install at `location` whose libraries are in `dirs` (machine
    paths), with LD_LIBRARY_PATH as it is (`path`), and the same as a change the doctor can check. `link`: also offer
    the /opt/rocm link (where nothing is there). `system`: the install is root's, so the steps for every process
    (which need sudo) may name it; else only this shell's. Every command is an argument list, quoted as the shell
    reads it back (shlex.join)."""
    value = ":".join([*dirs, *(p for p in path if p not in dirs)])
    export = shlex.join(["export", f"LD_LIBRARY_PATH={value}", f"ROCM_PATH={location}"])
    fix = f"make the dynamic loader look there: for this shell, {export}"
    if system:
        conf = shlex.join(["printf", "%s\\n", *dirs])
        fix += f"; for every process, {conf} | sudo tee /etc/ld.so.conf.d/rocm.conf && sudo ldconfig"
        if link:
            linked = shlex.join(["sudo", "ln", "-s", location, "/opt/rocm"])
            fix += f"; or link it where the library looks first: {linked}"
    return fix, Remedy(environment=(("LD_LIBRARY_PATH", value), ("ROCM_PATH", location)))


def _tree_finding(finding: Finding, tree: Elsewhere, path: Sequence[str], evidence: tuple[str, ...]) -> Finding:
    summary = (
        f"ROCm {tree.version or tree.major} is installed at {tree.location}, but not where the PJRT library and the "
        "dynamic loader look for it (its RUNPATH names /opt/rocm/lib and pip's folders)"
    )
    link = not tree.location.startswith("/opt/rocm")
    fix, remedy = loader_step(tree.location, tree.library_dirs, path, link=link, system=tree.root_owned)
    return finding._replace(summary=summary, fix=fix, evidence=evidence, remedy=remedy)


def _pip_finding(finding: Finding, pip: Elsewhere, evidence: tuple[str, ...]) -> Finding:
    # Names and versions another environment's metadata states are text another user may have written: only those
    # that are a distribution name and a version (packaging's grammar) enter the command.
    wanted = [r for r in pip.requirements if pinned(r) is not None]
    if not wanted and pip.version is not None and pinned(f"{PIP_ROCM_DISTRIBUTION}=={pip.version}") is not None:
        wanted = [f"{PIP_ROCM_DISTRIBUTION}=={pip.version}"]
    names = [exact[0] for r in wanted if (exact := pinned(r)) is not None]
    family = next((n.removeprefix("rocm-sdk-libraries-") for n in names if n.startswith("rocm-sdk-libraries-")), None)
    summary = (
        f"ROCm {pip.version or pip.major} from pip is installed in another Python environment ({pip.location}), not in "
        f"the one running jax ({sys.prefix})"
    )
    if not wanted:
        fix = f"install ROCm from pip into this environment ({PIP_ROCM_DISTRIBUTION} and its libraries of your GPUs)"
        return finding._replace(summary=summary, fix=fix, evidence=evidence)
    index = ["--extra-index-url", PIP_INDEX.format(family=family)] if family else []
    command = shlex.join([sys.executable, "-m", "pip", "install", *wanted, *index])
    fix = f"install the same ROCm into this environment: {command}"
    return finding._replace(summary=summary, fix=fix, evidence=evidence)


def _listed_finding(finding: Finding, listed: Elsewhere, evidence: tuple[str, ...]) -> Finding:
    system, package = (listed.package or ":").split(":", 1)
    if not PACKAGE_NAME[system].fullmatch(package):  # a name no package database allows: said, never run
        step = f"reinstall the {system} package that lists {listed.runtime}"
    elif system == "dpkg":
        step = shlex.join(["sudo", "apt-get", "install", "--reinstall", package])
    else:
        step = shlex.join(["sudo", "dnf", "reinstall", package])
    summary = (
        f"the package {package} says it installed the HIP runtime {listed.runtime}, but the file is not there "
        "(deleted, or an upgrade that stopped half way)"
    )
    return finding._replace(summary=summary, fix=f"reinstall the package: {step}", evidence=evidence)


def owner(root: Path, path: str) -> tuple[str, str] | None:
    """(package system, package) that installed the file at machine path `path` (or the file its link names), from
    dpkg's lists or rpm's database; None: no package database says so."""
    from jax_rocm7_plugin._policy.rocm_policy import elsewhere_limits

    limits = elsewhere_limits()
    wanted = {path, unrooted(resolved(host_path(root, path)), root)}
    for item in (*_dpkg(root, limits["list_files"], limits["list_bytes"]), *_rpm(root, limits["rpm_packages"])):
        if item.runtime in wanted and item.package is not None:
            system, _, package = item.package.partition(":")
            return system, package
    return None
