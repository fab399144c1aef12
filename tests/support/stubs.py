"""Test fixture, never shipped: link stubs that stand in for ROCm libraries on a machine without ROCm.

For the ROCm sonames that real shared objects NEED (the published extension modules, the published
PJRT library), compile tiny shared objects with those sonames that export exactly the undefined
symbols the objects reference, with their symbol versions (`hipMemcpyAsync@hip_4.2`: without the
version node ld.so refuses the object). Functions return 0 unless told otherwise; data symbols are
zero-filled. The objects then load and import here; nothing in them can reach a GPU.

Which undefined symbols are ROCm's: those whose version need names a ROCm soname, and unversioned
references that neither a system library the object needs nor the CPython interpreter (its
libpython) defines.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection

from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library

SYSTEM_LIBRARY_DIR = Path("/lib/x86_64-linux-gnu")


class StubSymbol(NamedTuple):
    name: str
    version: str | None  # the version node the reference asks for (hip_4.2), or None
    is_data: bool


def _needed(elf: ELFFile) -> list[str]:
    section = elf.get_section_by_name(".dynamic")
    if not isinstance(section, DynamicSection):
        return []
    return [tag.needed for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]


def _version_needs(elf: ELFFile) -> dict[int, tuple[str, str]]:
    """version index -> (file, version name) from .gnu.version_r."""
    needs: dict[int, tuple[str, str]] = {}
    section = elf.get_section_by_name(".gnu.version_r")
    if isinstance(section, GNUVerNeedSection):
        for verneed, auxiliaries in section.iter_versions():
            for aux in auxiliaries:
                needs[aux["vna_other"]] = (verneed.name, aux.name)
    return needs


def _defined_names(path: Path) -> set[str]:
    with open(path, "rb") as handle:
        elf = ELFFile(handle)
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is None:
            return set()
        return {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}


def interpreter_names(interpreter: Path) -> set[str]:
    """What a CPython executable (and the libpython it NEEDs, next to it in ../lib) exports."""
    names = _defined_names(interpreter)
    with open(interpreter, "rb") as handle:
        libraries = [n for n in _needed(ELFFile(handle)) if n.startswith("libpython")]
    for name in libraries:
        for directory in (interpreter.resolve().parent.parent / "lib", SYSTEM_LIBRARY_DIR):
            if (directory / name).is_file():
                names |= _defined_names(directory / name)
                break
    return names


def rocm_references(path: Path, provided: set[str] = frozenset()) -> dict[str, list[StubSymbol]]:  # type: ignore[assignment]
    """ROCm soname -> the symbols `path` takes from it (unversioned ones under its first ROCm NEEDED).

    `provided`: names the process defines anyway (the interpreter's), never stubbed.
    """
    with open(path, "rb") as handle:
        elf = ELFFile(handle)
        needed = _needed(elf)
        rocm = [n for n in needed if is_rocm_library(n)]
        if not rocm:
            return {}
        needs = _version_needs(elf)
        versym = elf.get_section_by_name(".gnu.version")
        dynsym = elf.get_section_by_name(".dynsym")
        assert dynsym is not None
        references: list[tuple[str, str, tuple[str, str] | None]] = []
        for index, symbol in enumerate(dynsym.iter_symbols()):
            if symbol["st_shndx"] != "SHN_UNDEF" or not symbol.name or symbol["st_info"]["bind"] == "STB_WEAK":
                continue
            version = None
            if isinstance(versym, GNUVerSymSection):
                version = needs.get(versym.get_symbol(index)["ndx"])
            references.append((symbol.name, symbol["st_info"]["type"], version))
    system = set().union(
        *(
            _defined_names(SYSTEM_LIBRARY_DIR / n)
            for n in needed
            if not is_rocm_library(n) and (SYSTEM_LIBRARY_DIR / n).is_file()
        )
    )
    by_soname: dict[str, list[StubSymbol]] = defaultdict(list)
    for name, kind, version in references:
        if version is not None:
            if is_rocm_library(version[0]):
                by_soname[version[0]].append(StubSymbol(name, version[1], kind == "STT_OBJECT"))
        elif name not in system and name not in provided:
            by_soname[rocm[0]].append(StubSymbol(name, None, kind == "STT_OBJECT"))
    for soname in rocm:
        by_soname.setdefault(soname, [])
    return dict(by_soname)


def _source(symbols: Iterable[StubSymbol], returns: Mapping[str, int], strings: Mapping[str, str]) -> str:
    lines = ["/* Link stub for tests: generated, never shipped. */"]
    for index, symbol in enumerate(sorted(symbols)):
        if symbol.is_data:
            lines.append(f'char stub_data_{index}[256] __asm__("{symbol.name}");')
        elif symbol.name in strings:
            text = strings[symbol.name].replace('"', "")
            lines.append(f'const char* stub_{index}(void) __asm__("{symbol.name}");')
            lines.append(f'const char* stub_{index}(void) {{ return "{text}"; }}')
        else:
            lines.append(f'long stub_{index}(void) __asm__("{symbol.name}");')
            lines.append(f"long stub_{index}(void) {{ return {int(returns.get(symbol.name, 0))}; }}")
    return "\n".join(lines) + "\n"


def _version_script(symbols: Iterable[StubSymbol]) -> str | None:
    by_version: dict[str, list[str]] = defaultdict(list)
    unversioned = []
    for symbol in symbols:
        (by_version[symbol.version] if symbol.version else unversioned).append(symbol.name)
    if not by_version:
        return None
    nodes = sorted(by_version)
    by_version[nodes[0]].extend(unversioned)
    return "".join(f"{node} {{ global: {'; '.join(sorted(set(by_version[node])))}; }};\n" for node in nodes)


def make_link_stubs(
    objects: Iterable[Path],
    directory: Path,
    *,
    returns: Mapping[str, int] | None = None,
    strings: Mapping[str, str] | None = None,
    interpreter: Path | None = None,
) -> Path:
    """Compile one stub per ROCm soname the objects NEED into `directory` (put it on LD_LIBRARY_PATH).

    `returns`: return values for named functions (hipInit -> 100, hipErrorNoDevice); `strings`:
    functions that return a constant string (hipGetErrorName); `interpreter`: the CPython that will
    load the objects (its API is not stubbed).
    """
    provided = interpreter_names(interpreter) if interpreter is not None else set()
    merged: dict[str, set[StubSymbol]] = defaultdict(set)
    for path in objects:
        for soname, symbols in rocm_references(path, provided).items():
            merged[soname].update(symbols)
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler is not None, "the link stubs need a C compiler"
    directory.mkdir(parents=True, exist_ok=True)
    for soname, symbols in sorted(merged.items()):
        stem = soname.replace(".", "_").replace("-", "_")
        source = directory / f"{stem}.c"
        source.write_text(_source(symbols, returns or {}, strings or {}))
        command = [compiler, "-shared", "-fPIC", "-o", str(directory / soname), str(source), f"-Wl,-soname,{soname}"]
        script = _version_script(symbols)
        if script is not None:
            (directory / f"{stem}.map").write_text(script)
            command.append(f"-Wl,--version-script,{directory / f'{stem}.map'}")
        subprocess.run(command, check=True, capture_output=True)
    return directory
