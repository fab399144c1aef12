"""What a packager can trust about our wheels: `build.py check WHEEL...`, one line per problem.

Both wheels: file name, WHEEL tags and METADATA agree; RECORD lists every file with
the right sha256 and size; license files are there; the summary names the ROCm
version. jax-rocm7-pjrt: tag py3-none-manylinux_2_28_x86_64, and auditwheel's
manylinux_2_28 policy holds with the host's ROCm libraries excluded (and none of
them bundled); the library exports GetPjrtApi only; its RUNPATH reaches both a
pip-installed ROCm next to the package and /opt/rocm/lib. jax-rocm7-plugin: the
jax_plugins entry point resolves to a module with initialize(); it pins
jax-rocm7-pjrt==X.Y.Z.*; its tag matches whether it carries extension modules.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import posixpath
import re
import tempfile
import zipfile
import zlib
from email.message import Message
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from jax_rocm7_build.downloads import copy_and_hash
from jax_rocm7_plugin._names import (
    ENTRY_POINT_MODULE,
    ENTRY_POINT_NAME,
    LIBRARY_FILE,
    PIP_ROCM_PACKAGE,
    PJRT_DISTRIBUTION,
    PJRT_ENTRY_SYMBOL,
    PJRT_PACKAGE,
    PLUGIN_DISTRIBUTION,
    PLUGIN_PACKAGE,
)
from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library
from jax_rocm7_plugin._policy.versions import pin_for

PJRT = PJRT_DISTRIBUTION
PLUGIN = PLUGIN_DISTRIBUTION
PJRT_TAG = Tag("py3", "none", "manylinux_2_28_x86_64")
LIBRARY_MEMBER = f"{PJRT_PACKAGE}/{LIBRARY_FILE}"
POLICY = "manylinux_2_28_x86_64"
ENTRY_POINT = (ENTRY_POINT_NAME, ENTRY_POINT_MODULE)
# Data the plugin reads at run time (the release table, ROCm's policy).
PLUGIN_DATA = (
    f"{PLUGIN_PACKAGE}/_policy/releases.json",
    f"{PLUGIN_PACKAGE}/_policy/rocm_policy.json",
    f"{PLUGIN_PACKAGE}/_policy/cluster_policy.json",
)
# Site-packages directories where ROCm from pip puts its libraries (TheRock, and the older `rocm` package).
PIP_ROCM_DIRS = re.compile(rf"({re.escape(PIP_ROCM_PACKAGE)}|_rocm_sdk_libraries[\w-]*|rocm)/lib")
# Linkers define __start_<section>/__stop_<section> for sections named like C identifiers and
# export them whatever the version script says; they are addresses, not an interface.
_SECTION_BOUND = re.compile(r"__(start|stop)_[A-Za-z_][A-Za-z0-9_]*")


def check_wheel(path: Path) -> list[str]:
    """Every problem found in one wheel (empty when it is good)."""
    try:
        name, version, _build, tags = parse_wheel_filename(path.name)
    except Exception as error:  # noqa: BLE001 - packaging raises several types for bad names
        return [f"file name is not a wheel name: {error}"]
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        return [f"not a readable zip archive: {error}"]
    # The library is inflated once: RECORD's hash writes it here, and its ELF facts are read from here.
    with archive, tempfile.TemporaryDirectory() as scratch:
        kept = {LIBRARY_MEMBER: Path(scratch) / LIBRARY_MEMBER} if name == PJRT else {}
        problems = _common(archive, str(name), version, set(tags), kept)
        if name == PJRT:
            problems += _pjrt(archive, path, set(tags), Path(scratch))
        elif name == PLUGIN:
            problems += _plugin(archive, path, version, set(tags))
        else:
            problems.append(f"not one of our wheels ({name})")
    # One line per problem: a library that cannot be inflated is met by RECORD's check and by the ELF read.
    return list(dict.fromkeys(problems))


def _dist_info(archive: zipfile.ZipFile) -> str | None:
    roots = {n.split("/", 1)[0] for n in archive.namelist() if n.split("/", 1)[0].endswith(".dist-info")}
    return next(iter(roots)) if len(roots) == 1 else None


def _common(archive: zipfile.ZipFile, name: str, version: Version, tags: set[Tag], kept: dict[str, Path]) -> list[str]:
    problems: list[str] = []
    info = _dist_info(archive)
    if info is None:
        return ["no single *.dist-info directory"]
    names = set(archive.namelist())
    wheel = Parser().parsestr(archive.read(f"{info}/WHEEL").decode()) if f"{info}/WHEEL" in names else None
    if wheel is None:
        problems.append("WHEEL file missing")
    else:
        declared = {t for line in wheel.get_all("Tag", []) for t in _tags(line)}
        if declared != tags:
            problems.append(f"WHEEL declares tags {sorted(map(str, declared))}, the file name {sorted(map(str, tags))}")
    if f"{info}/METADATA" not in names:
        return [*problems, "METADATA missing"]
    metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
    if canonicalize_name(metadata.get("Name", "")) != name or Version(metadata.get("Version", "0")) != version:
        problems.append(
            f"METADATA says {metadata.get('Name')} {metadata.get('Version')}, the file name {name} {version}"
        )
    problems += _record(archive, info, kept)
    licenses = [n for n in names if n.startswith(f"{info}/licenses/") and not n.endswith("/")]
    declared_licenses = metadata.get_all("License-File", [])
    if not licenses:
        problems.append("no license file in the wheel")
    for declared in declared_licenses:
        if f"{info}/licenses/{declared}" not in names:
            problems.append(f"METADATA names license file {declared}, which the wheel lacks")
    summary = metadata.get("Summary", "")
    if not re.search(r"ROCm \d+(\.\d+|\.x)", summary) or "unknown" in summary.lower():
        problems.append(f"the summary does not name the ROCm version: {summary!r}")
    return problems


def _tags(text: str) -> set[Tag]:
    interpreter, abi, platform = text.strip().split("-")
    return {Tag(i, a, p) for i in interpreter.split(".") for a in abi.split(".") for p in platform.split(".")}


def _member_digest(archive: zipfile.ZipFile, member: str, copy_to: Path | None) -> tuple[str, int]:
    """sha256 (RECORD's urlsafe base64) and size of one member. Where copy_to is given (the ~460 MB library), the
    member is streamed there on the way, and the file appears only once it is whole."""
    if copy_to is None:
        data = archive.read(member)
        return _record_hash(hashlib.sha256(data).digest()), len(data)
    copy_to.parent.mkdir(parents=True, exist_ok=True)
    partial = copy_to.with_name(copy_to.name + ".part")
    with archive.open(member) as source:
        hexdigest = copy_and_hash(source, partial, archive.getinfo(member).file_size, lambda _done: None)
    partial.rename(copy_to)
    return _record_hash(bytes.fromhex(hexdigest)), copy_to.stat().st_size


def _record_hash(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _record(archive: zipfile.ZipFile, info: str, kept: dict[str, Path]) -> list[str]:
    record_name = f"{info}/RECORD"
    if record_name not in archive.namelist():
        return ["RECORD missing"]
    problems: list[str] = []
    listed: set[str] = set()
    for line in archive.read(record_name).decode().splitlines():
        if not line.strip():
            continue
        member, digest, size = [*line.rsplit(",", 2), "", ""][:3]
        listed.add(member)
        if member == record_name:
            continue
        algorithm, _, expected = digest.partition("=")
        if algorithm != "sha256":
            problems.append(f"RECORD entry for {member} gives no sha256 hash ({digest or 'none'})")
            continue
        try:
            actual, length = _member_digest(archive, member, kept.get(member))
        except KeyError:
            problems.append(f"RECORD lists {member}, which the wheel lacks")
            continue
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            problems.append(f"{member} cannot be read from the archive: {error}")
            continue
        if actual != expected or size != str(length):
            problems.append(f"RECORD entry for {member} does not match its contents")
    unlisted = [n for n in archive.namelist() if not n.endswith("/") and n not in listed]
    problems.extend(f"{member} is not in RECORD" for member in unlisted)
    return problems


def _pjrt(archive: zipfile.ZipFile, path: Path, tags: set[Tag], scratch: Path) -> list[str]:
    problems: list[str] = []
    if tags != {PJRT_TAG}:
        problems.append(f"tag is {sorted(map(str, tags))}, expected {PJRT_TAG}")
    bundled = [n for n in archive.namelist() if is_rocm_library(posixpath.basename(n))]
    problems.extend(f"bundles ROCm library {n}: ROCm comes from the host or from pip" for n in bundled)
    if LIBRARY_MEMBER not in archive.namelist():
        return [*problems, f"{LIBRARY_MEMBER} is missing"]
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError, read_dynamic

    library = scratch / LIBRARY_MEMBER  # written there by RECORD's check
    if not library.is_file():  # RECORD did not list it (said above): read it anyway
        try:
            archive.extract(LIBRARY_MEMBER, scratch)
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            return [*problems, f"{LIBRARY_MEMBER} cannot be read from the archive: {error}"]
    try:
        facts = read_dynamic(library)
    except ElfError as error:
        return [*problems, f"{LIBRARY_MEMBER} is not a readable ELF object: {error}"]
    exports = [e for e in facts.exports if not _SECTION_BOUND.fullmatch(e)]
    if exports != [PJRT_ENTRY_SYMBOL]:
        shown = ", ".join(exports[:6]) + (f" (+{len(exports) - 6} more)" if len(exports) > 6 else "")
        problems.append(f"the library must export {PJRT_ENTRY_SYMBOL} only; it exports {shown or 'nothing'}")
    problems += _runpath(facts.runpath or facts.rpath)
    problems += _policy(path, facts.needed)
    return problems


def _runpath(entries: tuple[str, ...]) -> list[str]:
    problems = []
    here = posixpath.dirname(LIBRARY_MEMBER)
    pip_dirs = [
        e
        for e in entries
        if e.startswith("$ORIGIN") and PIP_ROCM_DIRS.fullmatch(posixpath.normpath(here + e[len("$ORIGIN") :]))
    ]
    if not pip_dirs:
        problems.append(
            "RUNPATH has no $ORIGIN entry reaching a pip-installed ROCm next to the package "
            f"(e.g. $ORIGIN/../{PIP_ROCM_PACKAGE}/lib); it is {':'.join(entries) or 'empty'}"
        )
    if "/opt/rocm/lib" not in entries:
        problems.append("RUNPATH lacks /opt/rocm/lib")
    return problems


def _policy(path: Path, needed: tuple[str, ...]) -> list[str]:
    """auditwheel's verdict for manylinux_2_28 with the host's ROCm libraries excluded."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.wheel_abi import analyze_wheel_abi

    excluded = frozenset(n for n in needed if is_rocm_library(n))
    try:
        info = analyze_wheel_abi(
            Libc.GLIBC, Architecture.x86_64, path, excluded, disable_isa_ext_check=True, allow_graft=False
        )
    except Exception as error:  # noqa: BLE001 - auditwheel raises its own error types per failure
        return [f"auditwheel could not analyze the wheel: {error}"]
    problems = []
    target = next(p for p in info.policies if p.name == POLICY)
    if info.overall_policy.priority < target.priority:
        problems.append(f"auditwheel: the wheel needs {info.overall_policy.name}, newer than {POLICY}")
    for member, references in info.full_external_refs.items():
        outside = sorted(references[POLICY].libs) if POLICY in references else []
        if outside:
            problems.append(f"auditwheel: {member} needs {', '.join(outside)}, outside {POLICY} and not ROCm's")
    return problems


def _plugin(archive: zipfile.ZipFile, path: Path, version: Version, tags: set[Tag]) -> list[str]:
    problems: list[str] = []
    info = _dist_info(archive)
    assert info is not None
    names = set(archive.namelist())
    from jax_rocm7_plugin._machine.packages import jax_plugin_entry_points

    text = archive.read(f"{info}/entry_points.txt").decode() if f"{info}/entry_points.txt" in names else ""
    entry = dict(jax_plugin_entry_points(text)).get(ENTRY_POINT[0])
    if entry != ENTRY_POINT[1]:
        problems.append(f"entry point jax_plugins:{ENTRY_POINT[0]} is {entry!r}, expected {ENTRY_POINT[1]!r}")
    else:
        module = ENTRY_POINT[1].replace(".", "/") + "/__init__.py"
        if module not in names:
            problems.append(f"entry point {ENTRY_POINT[1]} does not resolve: {module} is missing")
        elif not _defines_initialize(archive.read(module).decode()):
            problems.append(f"entry point {ENTRY_POINT[1]} has no initialize() for jax to call")
    metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
    release = ".".join(str(p) for p in (*version.release, 0, 0)[:3])
    pins = [
        Requirement(r) for r in metadata.get_all("Requires-Dist", []) if canonicalize_name(Requirement(r).name) == PJRT
    ]
    if [str(p.specifier) for p in pins] != [pin_for(release)]:
        problems.append(f"must require {PJRT}{pin_for(release)}, requires {[str(p) for p in pins] or 'nothing'}")
    problems += _extension_modules(archive, path, release, tags, metadata)
    problems += [
        f"{member} is missing (the plugin reads it at run time)" for member in PLUGIN_DATA if member not in names
    ]
    problems += _unresolved_imports(archive, names)
    return problems


def _unresolved_imports(archive: zipfile.ZipFile, names: set[str]) -> list[str]:
    """Modules of ours that the wheel's own modules import but the wheel lacks (a sub-package left out)."""
    problems = []
    for member in sorted(n for n in names if n.startswith(f"{PLUGIN_PACKAGE}/") and n.endswith(".py")):
        try:
            tree = ast.parse(archive.read(member))
        except SyntaxError as error:
            problems.append(f"{member} does not parse: {error}")
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(PLUGIN_PACKAGE):
                continue
            base = (node.module or "").replace(".", "/")
            if f"{base}.py" not in names and f"{base}/__init__.py" not in names:
                problems.append(f"{member} imports {node.module}, which the wheel does not carry")
    return problems


def _extension_modules(
    archive: zipfile.ZipFile, path: Path, release: str, tags: set[Tag], metadata: Message
) -> list[str]:
    """Modules, tag, ABI and pins agree: cpXY-cpXY-manylinux_2_28 with modules for CPython X.Y only,
    Requires-Python ==X.Y.*, jaxlib pinned to the release, each module behind its public stub."""
    from jax_rocm7_plugin._names import EXTENSION_MODULES, NATIVE_DIR
    from jax_rocm7_plugin._names import NATIVE_BUILD_INFO as BUILD_INFO

    names = set(archive.namelist())
    native_prefix = f"{PLUGIN_PACKAGE}/{NATIVE_DIR}/"
    natives = sorted(n for n in names if n.startswith(native_prefix) and n.endswith(".so"))
    problems = [
        f"{n} is outside {native_prefix}: jaxlib would load it during every `import jax`"
        for n in sorted(names)
        if n.startswith(f"{PLUGIN_PACKAGE}/") and n.endswith(".so") and n not in natives
    ]
    pins = [Requirement(r) for r in metadata.get_all("Requires-Dist", []) if Requirement(r).name == "jaxlib"]
    if not natives:
        if tags != {Tag("py3", "none", "any")}:
            problems.append(
                f"carries no extension modules, so its tag must be py3-none-any, not {sorted(map(str, tags))}"
            )
        return problems
    tag = next(iter(tags)) if len(tags) == 1 else None
    if tag is None or tag.interpreter != tag.abi or not tag.interpreter.startswith("cp") or tag.platform != POLICY:
        return [
            *problems,
            f"carries extension modules, so its tag must be cpXY-cpXY-{POLICY}, not {sorted(map(str, tags))}",
        ]
    python = f"{tag.interpreter[2]}.{tag.interpreter[3:]}"
    info_name = native_prefix + BUILD_INFO
    info = json.loads(archive.read(info_name)) if info_name in names else None
    if info is None:
        problems.append(f"{info_name} is missing: where the modules came from is not recorded")
    elif info.get("python_tag") != tag.interpreter or info.get("jaxlib") != release:
        problems.append(
            f"{info_name} says the modules are for {info.get('python_tag')} and jaxlib {info.get('jaxlib')}, "
            f"the wheel is {tag.interpreter} for jaxlib {release}"
        )
    if metadata.get("Requires-Python") != f"=={python}.*":
        problems.append(
            f"Requires-Python is {metadata.get('Requires-Python')!r}; modules for CPython {python} need '=={python}.*'"
        )
    if [str(p.specifier) for p in pins] != [f"=={release}"]:
        problems.append(
            f"must pin jaxlib=={release} (the modules' only guard), pins {[str(p) for p in pins] or 'nothing'}"
        )
    if not any(n.endswith("/licenses/NOTICE") for n in names):
        problems.append("carries re-packaged extension modules but no NOTICE file")
    recorded = (info or {}).get("modules", {})
    needed: set[str] = set()
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError, read_dynamic

    with tempfile.TemporaryDirectory() as directory:
        for member in natives:
            module = posixpath.basename(member).split(".", 1)[0]
            if module not in EXTENSION_MODULES:
                problems.append(f"{member}: jaxlib never imports a ROCm module named {module}")
                continue
            stub = f"{PLUGIN_PACKAGE}/{module}.py"
            if stub not in names or "load_native(__name__)" not in archive.read(stub).decode():
                problems.append(f"{member} has no public stub {stub} that loads it")
            data = archive.read(member)
            if recorded.get(module, {}).get("sha256") != hashlib.sha256(data).hexdigest():
                problems.append(f"{member} is not the file {info_name} records")
            extracted = Path(archive.extract(member, directory))
            try:
                facts = read_dynamic(extracted)
            except ElfError as error:
                problems.append(f"{member} is not a readable ELF object: {error}")
                continue
            if f"PyInit_{module}" not in facts.exports:
                problems.append(f"{member} does not export PyInit_{module}: not a CPython extension module")
            needed.update(facts.needed)
    return problems + _policy(path, tuple(sorted(needed)))


def _defines_initialize(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.FunctionDef) and node.name == "initialize" for node in tree.body) or any(
        isinstance(node, ast.ImportFrom) and any((alias.asname or alias.name) == "initialize" for alias in node.names)
        for node in tree.body
    )
