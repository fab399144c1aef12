"""Which GPU code a HIP binary carries: AMDGPU code objects, alone or inside offload bundles.

Two kinds of files hold GPU code:
- an AMDGPU code object (`.co`, `.hsaco`): an ELF whose e_machine is EM_AMDGPU (224). Its e_flags
  name the processor (EF_AMDGPU_MACH, the low byte; the values are LLVM's, in gfx_targets.ELF_MACHS)
  and, from code object v4 on (EI_ABIVERSION >= 2), the xnack and sramecc settings it was built for
  (bits 8-9 and 10-11: unsupported, any, off, on); v3 (EI_ABIVERSION 1) has one bit each, "on";
  generic targets carry their version in the high byte.
- a host binary (a Python extension, a shared library) with clang offload bundles in `.hip_fatbin`,
  or a raw bundle file: each entry id names its target and features
  ("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"). offload_bundles reads them.
Pure readers; a file that is none of these is said to carry no GPU code.
"""

from __future__ import annotations

import os
from pathlib import Path

from jax_rocm7_plugin._binary.offload_bundles import COMPRESSED_MAGIC, PLAIN_MAGIC
from jax_rocm7_plugin._record import NamedTuple

EM_AMDGPU = 224
EM_X86_64 = 62
_XNACK_V4, _SRAMECC_V4 = 0x300, 0xC00
_XNACK_V3, _SRAMECC_V3 = 0x100, 0x200
_SETTING_V4 = {0: None, 1: "any", 2: "off", 3: "on"}  # 0: the processor does not support the feature
MAX_SCANNED_BYTES = 2 * 1024**3  # a raw bundle or a host binary without .hip_fatbin is scanned whole up to this


class CodeObject(NamedTuple):
    """One piece of GPU code: the target it was built for, and the settings it requires."""

    target: str  # gfx942, gfx9-4-generic, or "EF_AMDGPU_MACH 0x..." when the value is unknown
    xnack: str | None = None  # "on", "off", "any"; None: not stated (the processor lacks the feature)
    sramecc: str | None = None
    generic_version: int | None = None

    def __str__(self) -> str:
        features = "".join(f":{name}{'+' if value == 'on' else '-'}" for name, value in
                           (("sramecc", self.sramecc), ("xnack", self.xnack)) if value in ("on", "off"))  # fmt: skip
        return self.target + features


class BinaryCode(NamedTuple):
    """What one file carries."""

    path: str
    kind: str  # "code object", "offload bundles", "no GPU code", "unreadable"
    code: tuple[CodeObject, ...] = ()
    problems: tuple[str, ...] = ()


def code_object_of(header: bytes) -> CodeObject | None:
    """The code object an AMDGPU ELF header (its first 64 bytes) describes; None when it is not one."""
    from jax_rocm7_plugin._policy.gfx_targets import ELF_MACHS

    if len(header) < 52 or header[:4] != b"\x7fELF" or header[5] != 1:
        return None
    machine = int.from_bytes(header[18:20], "little")
    if machine != EM_AMDGPU:
        return None
    flags_offset = 48 if header[4] == 2 else 36  # e_flags: after e_entry/e_phoff/e_shoff (8 or 4 bytes each)
    flags = int.from_bytes(header[flags_offset : flags_offset + 4], "little")
    mach = flags & 0xFF
    target = ELF_MACHS.get(mach, f"EF_AMDGPU_MACH {mach:#x}")
    abi_version = header[8]
    if abi_version >= 2:  # code object v4 and later
        xnack, sramecc = _SETTING_V4[(flags & _XNACK_V4) >> 8], _SETTING_V4[(flags & _SRAMECC_V4) >> 10]
    elif abi_version == 1:  # v3: a set bit means "on", a clear one "off or not supported": unstated
        xnack = "on" if flags & _XNACK_V3 else None
        sramecc = "on" if flags & _SRAMECC_V3 else None
    else:
        xnack = sramecc = None
    generic = (flags >> 24) or None if target.endswith("-generic") else None
    return CodeObject(target, xnack, sramecc, generic)


def code_object_of_entry(entry_id: str) -> CodeObject | None:
    """The code object an offload bundle entry id names ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"); None for
    the host entry."""
    from jax_rocm7_plugin._binary.offload_bundles import target_of

    target = target_of(entry_id)
    if target is None:
        return None
    features = {f[:-1]: ("on" if f.endswith("+") else "off") for f in entry_id.split(":")[1:] if f[-1:] in "+-"}
    return CodeObject(target, features.get("xnack"), features.get("sramecc"))


def read_binary(path: Path) -> BinaryCode:
    """What GPU code the file at `path` carries."""
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError
    from jax_rocm7_plugin._binary.offload_bundles import scan_file_range, scan_library

    name = str(path)
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            size = os.fstat(handle.fileno()).st_size
    except OSError as error:
        return BinaryCode(name, "unreadable", problems=(error.strerror or str(error),))
    code = code_object_of(header)
    if code is not None:
        return BinaryCode(name, "code object", (code,))
    try:
        if header[:4] == b"\x7fELF":
            if int.from_bytes(header[18:20], "little") != EM_X86_64:
                return BinaryCode(name, "no GPU code")
            scan = scan_library(path)
        elif header.startswith((PLAIN_MAGIC, COMPRESSED_MAGIC)):
            scan = scan_file_range(path, 0, min(size, MAX_SCANNED_BYTES))
        else:
            return BinaryCode(name, "no GPU code")
    except (ElfError, OSError, ValueError) as error:
        return BinaryCode(name, "unreadable", problems=(str(error),))
    if scan is None or not scan.entry_ids:
        return BinaryCode(name, "no GPU code", problems=tuple(scan.problems) if scan is not None else ())
    found = dict.fromkeys(c for c in map(code_object_of_entry, scan.entry_ids) if c is not None)
    return BinaryCode(name, "offload bundles", tuple(found), tuple(scan.problems))


def binaries_under(path: Path, limit: int = 10_000) -> list[Path]:
    """`path` itself, or every regular file under a folder that starts like a GPU or host binary."""
    if not path.is_dir():
        return [path]
    found: list[Path] = []
    for folder, _, names in os.walk(path):
        for file_name in sorted(names):
            candidate = Path(folder) / file_name
            if candidate.is_symlink() or not candidate.is_file():
                continue
            try:
                with open(candidate, "rb") as handle:
                    start = handle.read(len(PLAIN_MAGIC))
            except OSError:
                continue
            if start.startswith((b"\x7fELF", PLAIN_MAGIC, COMPRESSED_MAGIC)):
                found.append(candidate)
                if len(found) >= limit:
                    return sorted(found)
    return sorted(found)
