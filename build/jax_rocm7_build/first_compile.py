"""What a PJRT library needs outside itself for its first compile, read from its own strings.

XLA's AMDGPU backend links each kernel with ROCm's device bitcode (ocml.bc, ockl.bc, ...) and ld.lld.
A library whose XLA looks for them says so in the messages it carries: "Unable to find potential
ROCm-Device-Libs dir" and the amdgcn/bitcode suffix it searches; "unable to find ld.lld in PATH".
Newer builds link LLD and the device libraries in and carry neither (the published 0.11.0 and later).
`release-row` records the answer per release (releases.json "first_compile"); the doctor checks
those files where the release needs them.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

DEVICE_BITCODE_MARKERS = (b"Unable to find potential ROCm-Device-Libs dir", b"amdgcn/bitcode\0")
EXTERNAL_LLD_MARKERS = (b"unable to find ld.lld in PATH",)
# Where such a library looks, each place with the string that says so (NUL-terminated: whole strings). XLA looks
# for bitcode in HIP_DEVICE_LIB_PATH, then under the ROCm root (ROCM_PATH, else /opt/rocm) at amdgcn/bitcode; for
# ld.lld under the root at llvm/bin, then on PATH. A suffix the strings lack (lib/llvm/...) is not searched.
BITCODE_PLACES = ((b"HIP_DEVICE_LIB_PATH\0", "$HIP_DEVICE_LIB_PATH"), (b"\0amdgcn/bitcode\0", "{rocm}/amdgcn/bitcode"))
LLD_PLACES = ((b"\0llvm/bin\0", "{rocm}/llvm/bin"), (b"unable to find ld.lld in PATH", "$PATH"))


def first_compile_needs(library: Path) -> dict[str, Any]:
    """The releases.json "first_compile" entry for `library`."""
    with open(library, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        bitcode = [m for m in DEVICE_BITCODE_MARKERS if data.find(m) >= 0]
        lld = [m for m in EXTERNAL_LLD_MARKERS if data.find(m) >= 0]
        bitcode_search = [place for marker, place in BITCODE_PLACES if bitcode and data.find(marker) >= 0]
        lld_search = [place for marker, place in LLD_PLACES if lld and data.find(marker) >= 0]
    if bitcode or lld:
        found = ", ".join(repr(m.rstrip(b"\0").decode()) for m in (*bitcode, *lld))
        evidence = f"the published library's strings: {found}"
    else:
        evidence = "the published library's strings: no device-library or ld.lld lookup (LLD linked in)"
    places = ", ".join([*bitcode_search, *lld_search])
    return {
        "device_bitcode": bool(bitcode),
        "external_ld_lld": bool(lld),
        "evidence": evidence,
        "bitcode_search": bitcode_search,
        "lld_search": lld_search,
        "search_evidence": f"the published library's strings name where it looks: {places}" if places else evidence,
    }
