"""AMDGPU code objects for tests. Test fixtures, never shipped.

Two sources: `assembled` runs LLVM's assembler (Debian's llvm-mc, LLVM 14: up to gfx90a and gfx1030,
ci/run_tests.sh installs it) on a two-instruction kernel, so the file is what LLVM writes; and
`header_only` writes just the 64-byte ELF header of one (labelled so in its name) for what that
LLVM cannot assemble: gfx942, gfx1100, gfx1151 and the generic targets. The header layout and the
EF_AMDGPU_* bits follow LLVM's AMDGPUUsage ("AMDGPU ELF Header").
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from tests.support.environment import require

KERNEL = "v_nop\ns_endpgm\n"
_ABI_VERSION = {4: 2, 5: 3, 6: 4}  # code object version -> EI_ABIVERSION
_SETTING = {None: 0, "any": 1, "off": 2, "on": 3}


def assembled(directory: Path, processor: str, *features: str) -> Path:
    """A code object LLVM assembles for `processor` with `features` ("+xnack", "-sramecc", ...)."""
    llvm_mc = shutil.which("llvm-mc") or shutil.which("llvm-mc-14")
    require(llvm_mc is not None, "LLVM's assembler llvm-mc (apt-get install llvm)")
    assert llvm_mc is not None
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "kernel.s"
    source.write_text(KERNEL)
    output = directory / f"{processor}{''.join(features).replace('+', 'P').replace('-', 'M')}.co"
    command = [llvm_mc, "-triple=amdgcn-amd-amdhsa", f"-mcpu={processor}", "-filetype=obj", str(source)]
    command += ["-o", str(output)]
    if features:
        command.append(f"-mattr={','.join(features)}")
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and "not a recognized processor" not in done.stderr, done.stderr
    return output


def header_only(
    directory: Path,
    mach: int,
    *,
    name: str,
    version: int = 5,
    xnack: str | None = None,
    sramecc: str | None = None,
    generic_version: int = 0,
) -> Path:
    """The ELF header of a code object for EF_AMDGPU_MACH `mach` (code object v4-v6), nothing else."""
    flags = mach | _SETTING[xnack] << 8 | _SETTING[sramecc] << 10 | generic_version << 24
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, _ABI_VERSION[version]]) + bytes(7)  # ELFOSABI_AMDGPU_HSA = 64
    header = ident + struct.pack("<HHIQQQIHHHHHH", 1, 224, 1, 0, 0, 0, flags, 64, 0, 0, 64, 0, 0)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"header-only-{name}.co"
    path.write_bytes(header)
    return path
