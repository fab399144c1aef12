"""`release-row` reads what a library's first compile needs from its strings (files written here stand in
for libraries; the published ones are checked in tests/e2e/test_released_rows.py)."""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_build.first_compile import first_compile_needs


def test_a_library_that_looks_for_device_libraries_and_ld_lld(tmp_path: Path) -> None:
    library = tmp_path / "old.so"
    library.write_bytes(
        b"\x7fELF" + b"\0" * 64 + b"Unable to find potential ROCm-Device-Libs dir \0amdgcn/bitcode\0"
        b"unable to find ld.lld in PATH: %s\0"
    )
    needs = first_compile_needs(library)
    assert (needs["device_bitcode"], needs["external_ld_lld"]) == (True, True)
    assert "'unable to find ld.lld in PATH'" in needs["evidence"]
    assert needs["bitcode_search"] == ["{rocm}/amdgcn/bitcode"] and needs["lld_search"] == ["$PATH"]


def test_where_the_published_0_10_2_library_looks(tmp_path: Path) -> None:
    """The strings the published 0.10.2 library carries (checked against it in tests/e2e/test_released_rows.py):
    HIP_DEVICE_LIB_PATH and the root's amdgcn/bitcode; the root's llvm/bin and PATH for ld.lld."""
    library = tmp_path / "old.so"
    library.write_bytes(
        b"\x7fELF" + b"\0" * 64 + b"HSACO file cache hit\0llvm/bin\0amdgcn/bitcode\0may not nest\0ROCM_PATH\0"
        b"Unable to find potential ROCm-Device-Libs dir \0HIP_DEVICE_LIB_PATH\0unable to find ld.lld in PATH: %s\0"
    )
    needs = first_compile_needs(library)
    assert needs["bitcode_search"] == ["$HIP_DEVICE_LIB_PATH", "{rocm}/amdgcn/bitcode"]
    assert needs["lld_search"] == ["{rocm}/llvm/bin", "$PATH"]


def test_a_library_that_links_them_in(tmp_path: Path) -> None:
    library = tmp_path / "new.so"
    library.write_bytes(b"\x7fELF" + b"\0" * 64 + b"ld.lld (in-process) failed with fatal error \0amdgcn/bitcode/x\0")
    needs = first_compile_needs(library)
    assert (needs["device_bitcode"], needs["external_ld_lld"]) == (False, False)
