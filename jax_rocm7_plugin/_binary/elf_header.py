"""The few bytes of an ELF header the loader needs: is this an x86-64 shared object?

The full ELF reader (pyelftools) is for the build only; the loader and the doctor run
inside `import jax` and reads 20 bytes instead.
"""

from __future__ import annotations

from pathlib import Path

_ELF_MAGIC = b"\x7fELF"
_ELFCLASS64 = 2
_ELFDATA2LSB = 1
_ET_DYN = 3
_EM_X86_64 = 62


def shared_object_problem(path: Path) -> str | None:
    """None for a little-endian x86-64 ELF shared object, else what it is not."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError as error:
        return f"{path} cannot be read: {error.strerror or error}"
    if len(header) < 20 or header[:4] != _ELF_MAGIC:
        return f"{path} is not an ELF file"
    if header[4] != _ELFCLASS64 or header[5] != _ELFDATA2LSB:
        return f"{path} is not a 64-bit little-endian ELF file"
    e_type = int.from_bytes(header[16:18], "little")
    e_machine = int.from_bytes(header[18:20], "little")
    if e_machine != _EM_X86_64:
        return f"{path} is built for ELF machine {e_machine}, not x86-64"
    if e_type != _ET_DYN:
        return f"{path} is an ELF file of type {e_type}, not a shared object"
    return None
