"""The lean ELF reader agrees with pyelftools on real libraries and fails cleanly on damaged ones."""

from __future__ import annotations

import contextlib
import functools
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax_rocm7_build.elf_facts import read_elf_facts

from jax_rocm7_plugin._binary.elf_dynamic import ElfError, read_dynamic, read_needed
from tests.support.native import compile_shared

HOST_LIBRARIES = [Path("/lib/x86_64-linux-gnu/libstdc++.so.6"), Path("/lib/x86_64-linux-gnu/libamdhip64.so.5")]


def assert_agrees_with_pyelftools(path: Path) -> None:
    ours = read_dynamic(path)
    reference = read_elf_facts(path, offload_targets=False)
    assert list(ours.needed) == reference.needed
    assert list(ours.runpath) == reference.runpath
    assert list(ours.rpath) == reference.rpath
    assert list(ours.exports) == sorted(reference.exports)
    assert ours.machine == reference.machine and ours.elf_type == reference.elf_type


def test_agrees_on_the_standin_pjrt_plugin(standin_library: Path) -> None:
    assert_agrees_with_pyelftools(standin_library)
    assert {"GetPjrtApi"} <= set(read_dynamic(standin_library).exports)


@pytest.mark.parametrize("path", [p for p in HOST_LIBRARIES if p.exists()], ids=lambda p: p.name)
def test_agrees_on_host_libraries(path: Path) -> None:
    assert_agrees_with_pyelftools(path)


def test_needed_through_the_program_headers_agrees_on_every_object_of_this_environment(standin_library: Path) -> None:
    """read_needed (the environment reader's, program headers only) against the sections' reading, on the stand-in
    library, the host's libraries and every shared object of this virtual environment (jaxlib's, numpy's ...)."""
    import sysconfig

    site = Path(sysconfig.get_paths()["platlib"])
    objects = [standin_library, *(p for p in HOST_LIBRARIES if p.exists()), *sorted(site.rglob("*.so*"))]
    compared = 0
    for path in objects:
        if not path.is_file():
            continue
        try:
            expected = read_dynamic(path, exports=False).needed
        except ElfError:
            continue
        assert read_needed(path) == expected, path
        compared += 1
    assert compared >= 20, compared


def test_agrees_on_runpath_and_rpath(tmp_path: Path) -> None:
    dep = compile_shared(tmp_path / "d", "dep", "int dep(void) { return 1; }\n")
    for dtags in ("--enable-new-dtags", "--disable-new-dtags"):
        top = compile_shared(
            tmp_path / dtags,
            "top",
            "int dep(void);\nint top(void) { return dep(); }\n",
            libs=["dep"],
            link_dirs=[dep.parent],
            flags=[f"-Wl,{dtags}", "-Wl,-rpath,$ORIGIN/x:/opt/rocm/lib"],
        )
        assert_agrees_with_pyelftools(top)


def test_not_elf(tmp_path: Path) -> None:
    text = tmp_path / "lib.so"
    text.write_text("INPUT(-lfoo)\n")
    with pytest.raises(ElfError):
        read_dynamic(text)
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    with pytest.raises(ElfError):
        read_dynamic(empty)


@functools.cache
def victim_bytes() -> bytes:
    with tempfile.TemporaryDirectory(prefix="elf-victim-") as directory:
        return compile_shared(Path(directory), "victim", "int victim(void) { return 7; }\n").read_bytes()


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_damaged_objects_raise_only_elf_error(data: st.DataObject) -> None:
    original = victim_bytes()

    cut = data.draw(st.integers(0, len(original)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 255)), max_size=8))
    damaged = bytearray(original[:cut])
    for position, value in flips:
        if position < len(damaged):
            damaged[position] = value
    with tempfile.NamedTemporaryFile(suffix=".so") as handle:
        handle.write(bytes(damaged))
        handle.flush()
        with contextlib.suppress(ElfError):
            read_dynamic(Path(handle.name))
