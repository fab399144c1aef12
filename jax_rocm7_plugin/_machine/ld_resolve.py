"""Would the dynamic loader find every library a shared object needs? Answered without loading it.

Follows glibc's ld.so search order for each DT_NEEDED name of each object:
1. a name with a slash is a path;
2. DT_RPATH of the object and of the objects that loaded it, unless the object has DT_RUNPATH;
3. LD_LIBRARY_PATH;
4. DT_RUNPATH of the object (not inherited);
5. the directories of /etc/ld.so.conf (and its includes), which ld.so.cache is built from;
6. the default directories.
$ORIGIN, $LIB and $PLATFORM are expanded; only x86-64 shared objects count as a match,
as ld.so skips libraries of another architecture. Objects already mapped into this
process (libc, libm, ...) are reused by ld.so, so they count as found.

Machine paths (absolute RPATH/RUNPATH entries, LD_LIBRARY_PATH, ld.so.conf, default
directories) are read under the sysroot; $ORIGIN paths are real paths, relative to
where the object actually is.
"""

from __future__ import annotations

import glob
import itertools
import os
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from jax_rocm7_plugin._binary.elf_header import shared_object_problem
from jax_rocm7_plugin._binary.process_maps import mapped_objects
from jax_rocm7_plugin._machine import host_path, resolved
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import read_text

LD_SO_CONF = "/etc/ld.so.conf"
# glibc's built-in directories for x86-64, plus Debian/Ubuntu's multiarch ones.
DEFAULT_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)
_LIB_EXPANSIONS = ("lib64", "lib/x86_64-linux-gnu", "lib")
_MAX_INCLUDE_DEPTH = 8
_MAX_CONF_FILES = 256  # Debian ships ~5 under /etc/ld.so.conf.d; each file is read once, whatever includes it
_MAX_OBJECTS = 512  # a real dependency closure of ROCm is ~100 objects
_MAX_CONF_BYTES = 1024 * 1024  # ld.so.conf files are a few hundred bytes


class Missing(NamedTuple):
    name: str
    needed_by: str  # path of the object whose DT_NEEDED names it


class DependencyReport(NamedTuple):
    found: dict[str, Path]  # soname -> where the loader would take it from
    missing: tuple[Missing, ...]
    unreadable: tuple[str, ...]  # objects found but not readable as ELF
    needed_by: Mapping[str, str] = MappingProxyType({})  # path of each object found -> the object needing it first

    @property
    def missing_names(self) -> list[str]:
        return sorted({m.name for m in self.missing})

    def chain(self, missing: Missing, top: str | None = None) -> str:
        """ "libdw.so.1, needed by librocprofiler-sdk.so.1, needed by <top>": who needs a missing library, up to
        the object the walk started from (called `top` where given, else its file name)."""
        links = [missing.name]
        path, seen = missing.needed_by, set()
        while path in self.needed_by and path not in seen:
            seen.add(path)
            links.append(os.path.basename(path))
            path = self.needed_by[path]
        links.append(top or os.path.basename(path))
        return ", needed by ".join(links)


def ld_so_conf_dirs(root: Path) -> list[str]:
    """Directories listed by /etc/ld.so.conf under `root`, includes followed, in order."""
    dirs: list[str] = []
    _read_conf(root, LD_SO_CONF, dirs, depth=0, seen=set())
    return list(dict.fromkeys(dirs))


def _read_conf(root: Path, conf: str, dirs: list[str], depth: int, seen: set[str]) -> None:
    """Each file once (includes that include their own directory again fan out without end otherwise)."""
    if depth > _MAX_INCLUDE_DEPTH or conf in seen or len(seen) >= _MAX_CONF_FILES:
        return
    seen.add(conf)
    try:
        text = read_text(host_path(root, conf), _MAX_CONF_BYTES)
    except (OSError, ValueError):
        return
    for raw in text.splitlines():
        # ldconfig parses each line as a C string: a NUL (a damaged file) ends it there.
        line = raw.split("\0", 1)[0].split("#", 1)[0].strip()
        if not line or line.startswith("hwcap "):
            continue
        if line.startswith("include ") or line.startswith("include\t"):
            for pattern in line.split()[1:]:
                # Relative include patterns are relative to the including file's directory.
                absolute = pattern if pattern.startswith("/") else os.path.join(os.path.dirname(conf), pattern)
                # At most the bound's worth of matches: a pattern like /*/*/*/* must not walk the whole tree.
                matches = sorted(itertools.islice(glob.iglob(str(host_path(root, absolute))), _MAX_CONF_FILES))
                for match in matches:
                    _read_conf(root, os.path.normpath("/" + os.path.relpath(match, root)), dirs, depth + 1, seen)
            continue
        for entry in line.replace(",", " ").replace(":", " ").split():
            # Old syntax allowed "dir=type"; the type is irrelevant for lookup.
            directory = entry.split("=", 1)[0]
            if directory.startswith("/"):
                dirs.append(directory.rstrip("/") or "/")


def search_dirs(ld_library_path: Sequence[str], conf_dirs: Sequence[str]) -> list[str]:
    """Machine directories ld.so searches for any object, in order: LD_LIBRARY_PATH, ld.so.conf, defaults.

    `ld_library_path`: its absolute entries (Settings.ld_library_path)."""
    return list(dict.fromkeys([*ld_library_path, *conf_dirs, *DEFAULT_DIRS]))


class _SearchContext(NamedTuple):
    root: Path
    ld_library_path: tuple[str, ...]
    conf_dirs: tuple[str, ...]
    preloaded: frozenset[str]


def _expand(entry: str, origin: Path) -> list[Path | str]:
    """Real paths (from $ORIGIN) as Path, machine paths (to read under the sysroot) as str."""
    entry = entry.replace("${ORIGIN}", "$ORIGIN").replace("${LIB}", "$LIB").replace("${PLATFORM}", "$PLATFORM")
    entry = entry.replace("$PLATFORM", "x86_64")
    variants = [entry.replace("$LIB", lib) for lib in _LIB_EXPANSIONS] if "$LIB" in entry else [entry]
    expanded: list[Path | str] = []
    for variant in variants:
        if variant.startswith("$ORIGIN"):
            expanded.append(Path(os.path.normpath(str(origin) + variant[len("$ORIGIN") :])))
        elif variant.startswith("/"):
            expanded.append(variant)
    return expanded


def _candidate(context: _SearchContext, directory: Path | str, name: str) -> Path | None:
    path = (directory / name) if isinstance(directory, Path) else host_path(context.root, directory) / name
    if os.path.isfile(path) and shared_object_problem(path) is None:
        return path
    return None


def _search(
    context: _SearchContext, name: str, origin: Path, rpath: list[tuple[str, Path]], runpath: list[str]
) -> Path | None:
    if "/" in name:
        direct = Path(name) if not name.startswith("/") else host_path(context.root, name)
        return direct if os.path.isfile(direct) and shared_object_problem(direct) is None else None
    ordered: list[Path | str] = []
    if not runpath:
        for entry, declared_in in rpath:
            ordered.extend(_expand(entry, declared_in))
    ordered.extend(context.ld_library_path)
    for entry in runpath:
        ordered.extend(_expand(entry, origin))
    ordered.extend(context.conf_dirs)
    ordered.extend(DEFAULT_DIRS)
    for directory in ordered:
        found = _candidate(context, directory, name)
        if found is not None:
            return found
    return None


def resolve_opened(
    name: str,
    opener: Path | None,
    root: Path,
    ld_library_path: Sequence[str],
    *,
    conf_dirs: Sequence[str] | None = None,
) -> Path | None:
    """Where dlopen(`name`) called from `opener` would find it (its RPATH unless it has a RUNPATH,
    LD_LIBRARY_PATH, its RUNPATH, ld.so.conf's directories, the defaults); None where nothing matches.
    `opener` None: an object with neither (only the search every object shares)."""
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError, read_dynamic

    context = _SearchContext(
        root=root,
        ld_library_path=tuple(ld_library_path),
        conf_dirs=tuple(ld_so_conf_dirs(root) if conf_dirs is None else conf_dirs),
        preloaded=frozenset(),
    )
    rpath: list[tuple[str, Path]] = []
    runpath: list[str] = []
    origin = root
    if opener is not None:
        origin = resolved(opener).parent
        try:
            facts = read_dynamic(opener, exports=False)
            rpath, runpath = [(entry, origin) for entry in facts.rpath], list(facts.runpath)
        except (ElfError, OSError):
            pass
    return _search(context, name, origin, rpath, runpath)


def loaded_in_this_process() -> frozenset[str]:
    """File names of the shared objects mapped into this process (ld.so reuses them by soname)."""
    return frozenset(os.path.basename(p) for p in mapped_objects())


def resolve_dependencies(
    objects: list[Path],
    root: Path,
    ld_library_path: Sequence[str],
    *,
    preloaded: frozenset[str] | None = None,
    conf_dirs: Sequence[str] | None = None,
) -> DependencyReport:
    """The dependency closure of `objects` as ld.so would resolve it; every missing name listed.

    `conf_dirs`: ld_so_conf_dirs(root), when the caller has read it already.
    """
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError, read_dynamic

    context = _SearchContext(
        root=root,
        ld_library_path=tuple(ld_library_path),
        conf_dirs=tuple(ld_so_conf_dirs(root) if conf_dirs is None else conf_dirs),
        preloaded=loaded_in_this_process() if preloaded is None else preloaded,
    )
    found: dict[str, Path] = {}
    needed_by: dict[str, str] = {}
    missing: list[Missing] = []
    unreadable: list[str] = []
    seen_paths: set[Path] = set()
    # (object path, RPATH entries inherited from the objects that loaded it, with their $ORIGIN)
    queue: deque[tuple[Path, tuple[tuple[str, Path], ...]]] = deque((obj, ()) for obj in objects)
    while queue and len(seen_paths) < _MAX_OBJECTS:
        path, inherited_rpath = queue.popleft()
        real = resolved(path)
        if real in seen_paths:
            continue
        seen_paths.add(real)
        try:
            facts = read_dynamic(path, exports=False)
        except (ElfError, OSError) as error:
            unreadable.append(f"{path}: {error}")
            continue
        origin = real.parent
        rpath_chain = (*((entry, origin) for entry in facts.rpath), *inherited_rpath)
        for name in facts.needed:
            if name in found or name in context.preloaded:
                continue
            target = _search(context, name, origin, list(rpath_chain), facts.runpath)
            if target is None:
                missing.append(Missing(name, str(path)))
                continue
            found[name] = target
            needed_by.setdefault(str(target), str(path))
            queue.append((target, rpath_chain))
    return DependencyReport(found, tuple(missing), tuple(unreadable), needed_by)
