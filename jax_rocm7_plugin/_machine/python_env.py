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

import csv
import os
import re
import sys
from collections.abc import Mapping, Sequence

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


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


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
                requires.append(normalized(required.group(1)))
    return name, version, tuple(requires)


def _record_files(text: str) -> list[str]:
    return [row[0] for row in csv.reader(text.splitlines()) if row and row[0]]


def _provided(files: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    modules, native = [], []
    for path in files:
        parts = path.replace("\\", "/").split("/")
        if parts[0] in ("..", "") or parts[0].endswith((".dist-info", ".data")):
            continue
        if len(parts) == 2 and parts[1] == "__init__.py":
            modules.append(parts[0])
        elif len(parts) == 1 and parts[0].endswith(".py") and parts[0] != "__init__.py":
            modules.append(parts[0][: -len(".py")])
        elif len(parts) == 1 and ".so" in parts[0] and "." in parts[0]:
            modules.append(parts[0].split(".", 1)[0])  # an extension module at the top: <name>.<tag>.so
        if ".so" in parts[-1] and (parts[-1].endswith(".so") or ".so." in parts[-1]):
            native.append("/".join(parts))
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
            modules, native = _provided(_record_files(record))
            found.append(Distribution(name, version or "", folder, modules, native, requires))
    return PythonEnv(tuple(found))
