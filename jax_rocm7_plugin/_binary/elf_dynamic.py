"""A lean reader for the few ELF facts the doctor needs: NEEDED, RUNPATH/RPATH, exports, sections.

The wheel build reads ELF with pyelftools (build/jax_rocm7_build/elf_facts.py). The doctor cannot:
importing pyelftools alone costs ~47 ms and parsing a ROCm library's dependency
closure with it ~150 ms more, against a budget of 100 ms for the whole report.
This reader maps the file and unpacks only the section headers, the dynamic
section and the dynamic symbol table (64-bit little-endian ELF, i.e. x86-64).
Tests check that it agrees with pyelftools on real libraries.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from jax_rocm7_plugin._record import NamedTuple

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_DYN = struct.Struct("<qQ")
_SYM = struct.Struct("<IBBHQQ")
SHT_NOBITS, _SHT_DYNAMIC, _SHT_DYNSYM = 8, 6, 11  # SHT_NOBITS: a section with no bytes in the file
_DT_NULL, _DT_NEEDED, _DT_RPATH, _DT_RUNPATH = 0, 1, 15, 29
_STB_GLOBAL, _STB_WEAK = 1, 2
_MACHINES = {62: "EM_X86_64", 183: "EM_AARCH64", 224: "EM_AMDGPU", 3: "EM_386"}
_TYPES = {1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}


class ElfError(Exception):
    """Not a 64-bit little-endian ELF file, or a truncated or inconsistent one."""


class Section(NamedTuple):
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


class DynamicInfo(NamedTuple):
    machine: str
    elf_type: str
    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    rpath: tuple[str, ...]
    exports: tuple[str, ...]  # defined GLOBAL/WEAK dynamic symbols, sorted
    sections: dict[str, Section]


def _cstring(data: mmap.mmap | bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset < 0 or offset >= len(data) or end < 0:
        raise ElfError(f"string offset {offset} outside the file")
    return data[offset:end].decode("utf-8", errors="replace")


def _sections(data: mmap.mmap, names: bool = True) -> tuple[int, int, list[Section]]:
    if len(data) < _EHDR.size or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    (
        _ident,
        e_type,
        e_machine,
        _version,
        _entry,
        _phoff,
        shoff,
        _flags,
        _ehsize,
        _phentsize,
        _phnum,
        shentsize,
        shnum,
        shstrndx,
    ) = _EHDR.unpack_from(data, 0)
    if shoff == 0:
        return e_type, e_machine, []
    if shentsize != _SHDR.size or shoff + _SHDR.size > len(data):
        raise ElfError("section header table is outside the file")
    if shnum == 0:  # extended numbering: the count lives in section 0
        shnum = _SHDR.unpack_from(data, shoff)[5]
    if shoff + shnum * _SHDR.size > len(data):
        raise ElfError("section header table is truncated")
    raw = [_SHDR.unpack_from(data, shoff + i * _SHDR.size) for i in range(shnum)]
    if shstrndx >= len(raw):
        raise ElfError("section name table index out of range")
    names_at = raw[shstrndx][4]
    sections = []
    for name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in raw:
        if sh_type != SHT_NOBITS and offset + size > len(data):
            raise ElfError("a section runs past the end of the file (truncated?)")
        shown = _cstring(data, names_at + name) if names else ""
        sections.append(Section(shown, sh_type, offset, size, link, entsize))
    return e_type, e_machine, sections


_PHDR = struct.Struct("<IIQQQQQQ")
_PT_LOAD, _PT_DYNAMIC, _DT_STRTAB, _DT_STRSZ = 1, 2, 5, 10
MAX_DYNAMIC_BYTES = 64 * 1024
MAX_STRTAB_BYTES = 4 * 1024 * 1024


def read_needed(path: Path) -> tuple[str, ...]:
    """NEEDED of an ELF object through its program headers alone (the dynamic segment and its string table): a few
    small reads, for a reader of many objects (the Python environment's)."""
    with open(path, "rb") as stream:
        head = stream.read(_EHDR.size)
        if len(head) < _EHDR.size or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise ElfError("not a 64-bit little-endian ELF file")
        fields = _EHDR.unpack(head)
        phoff, phentsize, phnum = fields[5], fields[9], fields[10]
        if phentsize != _PHDR.size or phnum > 256:
            raise ElfError("program headers of an unknown size")
        stream.seek(phoff)
        table = stream.read(phnum * _PHDR.size)
        if len(table) < phnum * _PHDR.size:
            raise ElfError("program header table is truncated")
        loads, dynamic = [], None
        for i in range(phnum):
            p_type, _flags, offset, vaddr, _paddr, filesz, _memsz, _align = _PHDR.unpack_from(table, i * _PHDR.size)
            if p_type == _PT_LOAD:
                loads.append((vaddr, offset, filesz))
            elif p_type == _PT_DYNAMIC:
                dynamic = (offset, filesz)
        if dynamic is None:
            return ()
        stream.seek(dynamic[0])
        raw = stream.read(min(dynamic[1], MAX_DYNAMIC_BYTES))
        needed, strtab, strsz = [], None, MAX_STRTAB_BYTES
        for pos in range(0, len(raw) - _DYN.size + 1, _DYN.size):
            tag, value = _DYN.unpack_from(raw, pos)
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                needed.append(value)
            elif tag == _DT_STRTAB:
                strtab = value
            elif tag == _DT_STRSZ:
                strsz = min(value, MAX_STRTAB_BYTES)
        where = next((off + strtab - va for va, off, size in loads if strtab is not None and va <= strtab < va + size),
                     None)  # fmt: skip
        if where is None:
            raise ElfError("the dynamic string table is in no loaded segment")
        stream.seek(where)
        strings = stream.read(strsz)
    return tuple(_cstring(strings, offset) for offset in needed)


def read_dynamic(path: Path, *, exports: bool = True, names: bool = True) -> DynamicInfo:
    """NEEDED, RUNPATH, RPATH and (optionally) exported symbols of an ELF object; `names` False leaves the sections
    unnamed (`sections` empty), for a reader of many objects that needs only their dynamic section."""
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            e_type, e_machine, sections = _sections(data, names or exports)
            needed: list[str] = []
            runpath: list[str] = []
            rpath: list[str] = []
            for section in sections:
                if section.type != _SHT_DYNAMIC or section.link >= len(sections):
                    continue
                strings = sections[section.link].offset
                for pos in range(section.offset, section.offset + section.size - _DYN.size + 1, _DYN.size):
                    tag, value = _DYN.unpack_from(data, pos)
                    if tag == _DT_NULL:
                        break
                    if tag == _DT_NEEDED:
                        needed.append(_cstring(data, strings + value))
                    elif tag == _DT_RUNPATH:
                        runpath.extend(p for p in _cstring(data, strings + value).split(":") if p)
                    elif tag == _DT_RPATH:
                        rpath.extend(p for p in _cstring(data, strings + value).split(":") if p)
            symbols = _exports(data, sections) if exports else []
            return DynamicInfo(
                machine=_MACHINES.get(e_machine, str(e_machine)),
                elf_type=_TYPES.get(e_type, str(e_type)),
                needed=tuple(needed),
                runpath=tuple(runpath),
                rpath=tuple(rpath),
                exports=tuple(sorted(symbols)),
                sections={s.name: s for s in sections if s.name} if names else {},
            )
    except (ValueError, struct.error) as error:  # mmap of an empty file, short reads
        raise ElfError(str(error)) from None


def _exports(data: mmap.mmap, sections: list[Section]) -> list[str]:
    names: list[str] = []
    for section in sections:
        if section.type != _SHT_DYNSYM or section.link >= len(sections):
            continue
        strings = sections[section.link].offset
        end = section.offset + section.size - _SYM.size + 1
        for pos in range(section.offset + _SYM.size, end, _SYM.size):  # entry 0 is the null symbol
            st_name, st_info, _other, st_shndx, _value, _size = _SYM.unpack_from(data, pos)
            if st_shndx != 0 and st_name and (st_info >> 4) in (_STB_GLOBAL, _STB_WEAK):
                names.append(_cstring(data, strings + st_name))
    return names
