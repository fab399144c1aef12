"""The Python environment jax runs in, as the process will see it: the distributions on its path, which of them
provides each top-level module, and the native runtimes they carry (what else will be mapped beside the PJRT
library when they are imported).

From each distribution's RECORD (PEP 376/627: one `path,hash,size` row per installed file; `packaging` is not
needed for its CSV): a top-level module is provided by a distribution whose RECORD lists `<name>/__init__.py`,
`<name>.py` or an extension module `<name>.<tag>.so`; a folder without `__init__.py` is a namespace package many
distributions share (`jax_plugins`), never a conflict. A native runtime is a shared object whose soname family
`_policy/opened_libraries.json` names as one interface's provider.

Bounded: at most MAX_DISTRIBUTIONS distributions and MAX_RECORD_BYTES of each RECORD; the path searched is
`sys.path` unless the caller gives one.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence

from jax_rocm7_plugin._machine.packages import normalize
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import read_text

MAX_DISTRIBUTIONS = 2000
MAX_RECORD_BYTES = 8 * 1024 * 1024


class Distribution(NamedTuple):
    name: str
    version: str
    location: str  # the folder on the path holding its .dist-info
    modules: tuple[str, ...]  # the top-level modules it provides (namespace packages left out)
    native: tuple[str, ...]  # its shared objects, relative to `location`
    requires: tuple[str, ...] = ()  # the distributions it requires (Requires-Dist), names normalized (PEP 503)
    info: str = ""  # its .dist-info folder, as found (its RECORD is there)


class PythonEnv(NamedTuple):
    distributions: tuple[Distribution, ...]

    def providers(self) -> Mapping[str, tuple[Distribution, ...]]:
        """Each top-level module with the distributions that provide it (more than one: they overwrote each
        other's files, or sit in two folders of the path and the first wins)."""
        found: dict[str, list[Distribution]] = {}
        for distribution in self.distributions:
            for module in distribution.modules:
                found.setdefault(module, []).append(distribution)
        return {module: tuple(each) for module, each in found.items()}


def _metadata(text: str) -> tuple[str | None, str | None, tuple[str, ...]]:
    name = version = None
    requires: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line (the description follows)
        key, _, value = line.partition(":")
        if key == "Name" and name is None:
            name = value.strip()
        elif key == "Version" and version is None:
            version = value.strip()
        elif key == "Requires-Dist" and "extra ==" not in value:  # an extra's requirement is not installed by it
            required = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", value)
            if required:
                requires.append(normalize(required.group(1)))
    return name, version, tuple(requires)


# RECORD's rows as patterns over the whole file (one pass in C: a large wheel's RECORD has thousands of rows): a
# package's __init__.py, a top-level module, a top-level extension module, any shared object. A path with a comma is
# quoted (csv) and matches none of them: no module or shared object the stack knows has one.
# Each anchored on the line's newline (the text searched starts with one): re scans for that literal, where `^` with
# MULTILINE would try every position.
_PACKAGE = re.compile(r"\n([A-Za-z_][A-Za-z0-9_]*)/__init__\.py,")
_MODULE = re.compile(r"\n([A-Za-z_][A-Za-z0-9_]*)\.py,")
_EXTENSION = re.compile(r"\n([A-Za-z_][A-Za-z0-9_]*)\.[^/,\n]*\.so,")
_SHARED_END = re.compile(r"\.so(?:\.[0-9.]+)?,")  # where a shared object's path ends; its line gives its start


def _provided(record: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    record = "\n" + record
    modules = [*_PACKAGE.findall(record), *(m for m in _MODULE.findall(record) if m != "__init__")]
    modules += _EXTENSION.findall(record)
    native = []
    for end in _SHARED_END.finditer(record):
        path = record[record.rfind("\n", 0, end.start()) + 1 : end.end() - 1]
        if (
            "," not in path
            and not path.startswith(("../", '"'))
            and not path.split("/", 1)[0].endswith((".dist-info", ".data"))
        ):
            native.append(path)
    return tuple(dict.fromkeys(modules)), tuple(native)


def read_python_env(path: Sequence[str] | None = None, root: str = "/") -> PythonEnv:
    """The distributions on `path` (sys.path where None) as the machine under `root` holds them (the sysroot: this
    interpreter's folders under it), each folder's distribution of one name once."""
    seen: set[tuple[str, str]] = set()
    found: list[Distribution] = []
    for entry in dict.fromkeys(path if path is not None else sys.path):
        if not entry or not entry.startswith("/"):
            continue
        folder = entry if root == "/" else os.path.join(root, entry.lstrip("/"))
        if not os.path.isdir(folder):
            continue
        try:
            entries = sorted(e for e in os.listdir(folder) if e.endswith(".dist-info"))
        except OSError:
            continue
        for entry in entries:
            if len(found) >= MAX_DISTRIBUTIONS:
                return PythonEnv(tuple(found))
            info = os.path.join(folder, entry)
            try:
                name, version, requires = _metadata(read_text(os.path.join(info, "METADATA"), 1024 * 1024))
                record = read_text(os.path.join(info, "RECORD"), MAX_RECORD_BYTES)
            except (OSError, ValueError):
                continue
            if not name or (folder, name.lower()) in seen:
                continue
            seen.add((folder, name.lower()))
            modules, native = _provided(record)
            found.append(Distribution(name, version or "", folder, modules, native, requires, info))
    return PythonEnv(tuple(found))
