"""Facts about an ELF shared object for build_info.json: NEEDED, RUNPATH/RPATH, exports, offload targets.

Build-only (pyelftools is a build and test requirement, not the plugin's). One parse:
pyelftools reads the section headers lazily, and the `.hip_fatbin` section's place in
the file is handed to the plugin's bundle scanner, so a 500 MB library costs only the
bytes of the sections asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from jax_rocm7_plugin._binary.offload_bundles import scan_file_range
from jax_rocm7_plugin._names import HIP_RUNTIME_PREFIX

FATBIN_SECTION = ".hip_fatbin"
_HIP_RUNTIME = re.compile(re.escape(HIP_RUNTIME_PREFIX) + r"(\d+)$")


@dataclass
class ElfFacts:
    path: Path
    machine: str
    elf_class: int
    elf_type: str
    needed: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)
    offload_targets: list[str] = field(default_factory=list)
    offload_bundles: int = 0
    offload_problems: list[str] = field(default_factory=list)

    @property
    def hip_runtime_major(self) -> int | None:
        """ROCm major the library links against, from the libamdhip64 soname it needs."""
        for name in self.needed:
            match = _HIP_RUNTIME.match(name)
            if match:
                return int(match.group(1))
        return None


class NotAnElfFile(Exception):
    pass


def read_elf_facts(path: Path, *, offload_targets: bool = True) -> ElfFacts:
    try:
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            facts = ElfFacts(
                path=path,
                machine=str(elf["e_machine"]),
                elf_class=elf.elfclass,
                elf_type=str(elf["e_type"]),
            )
            _read_dynamic(elf, facts)
            fatbin = elf.get_section_by_name(FATBIN_SECTION) if offload_targets else None
            if fatbin is not None and fatbin["sh_size"] and fatbin["sh_type"] != "SHT_NOBITS":
                scan = scan_file_range(path, fatbin["sh_offset"], fatbin["sh_size"])
                facts.offload_targets = sorted(scan.targets)
                facts.offload_bundles = scan.plain_bundles + scan.compressed_bundles
                facts.offload_problems = scan.problems
            return facts
    except ELFError as error:
        raise NotAnElfFile(f"{path}: {error}") from None


def _read_dynamic(elf: ELFFile, facts: ElfFacts) -> None:
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    facts.needed.append(tag.needed)
                elif tag.entry.d_tag == "DT_RUNPATH":
                    facts.runpath.extend(p for p in tag.runpath.split(":") if p)
                elif tag.entry.d_tag == "DT_RPATH":
                    facts.rpath.extend(p for p in tag.rpath.split(":") if p)
        elif isinstance(section, SymbolTableSection) and section.name == ".dynsym":
            for symbol in section.iter_symbols():
                if (
                    symbol.name
                    and symbol["st_shndx"] != "SHN_UNDEF"
                    and symbol["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
                ):
                    facts.exports.append(symbol.name)
    facts.exports.sort()
