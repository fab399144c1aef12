"""ld.so-style resolution, checked against glibc's real loader where the host can load the objects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jax_rocm7_plugin._machine.ld_resolve import ld_so_conf_dirs, resolve_dependencies
from tests.support.native import compile_shared

NOTHING_LOADED: frozenset[str] = frozenset()


def dep_returning(directory: Path, value: int, name: str = "dep") -> Path:
    return compile_shared(directory, name, f"int {name}(void) {{ return {value}; }}\n")


def top_needing(directory: Path, dep_dir: Path, *flags: str, dep: str = "dep") -> Path:
    source = f"int {dep}(void);\nint top(void) {{ return {dep}(); }}\n"
    return compile_shared(directory, "top", source, libs=[dep], link_dirs=[dep_dir], flags=flags)


def real_loader_value(top: Path, **env: str) -> int:
    """What top() returns when glibc's loader resolves it: tells which libdep.so it took."""
    code = f"import ctypes; print(ctypes.CDLL({str(top)!r}).top())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return int(done.stdout)


def test_runpath_with_origin(tmp_path: Path) -> None:
    dep = dep_returning(tmp_path / "pkg" / "deps", 1)
    top = top_needing(tmp_path / "pkg", dep.parent, "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/deps")
    report = resolve_dependencies([top], Path("/"), (), preloaded=NOTHING_LOADED)
    assert report.found["libdep.so"] == dep and not report.missing
    assert real_loader_value(top) == 1


def test_ld_library_path_beats_runpath_but_not_rpath(tmp_path: Path) -> None:
    near = dep_returning(tmp_path / "near", 1)
    env_dir = dep_returning(tmp_path / "env", 2).parent
    runpath_top = top_needing(tmp_path / "runpath", near.parent, "-Wl,--enable-new-dtags", f"-Wl,-rpath,{near.parent}")
    rpath_top = top_needing(tmp_path / "rpath", near.parent, "-Wl,--disable-new-dtags", f"-Wl,-rpath,{near.parent}")
    env = {"LD_LIBRARY_PATH": str(env_dir)}
    ld_library_path = (str(env_dir),)
    ours_runpath = resolve_dependencies([runpath_top], Path("/"), ld_library_path, preloaded=NOTHING_LOADED)
    ours_rpath = resolve_dependencies([rpath_top], Path("/"), ld_library_path, preloaded=NOTHING_LOADED)
    assert ours_runpath.found["libdep.so"].parent == env_dir
    assert ours_rpath.found["libdep.so"].parent == near.parent
    assert real_loader_value(runpath_top, **env) == 2
    assert real_loader_value(rpath_top, **env) == 1


def test_ld_so_conf_include_under_sysroot(tmp_path: Path) -> None:
    root = tmp_path / "root"
    dep = dep_returning(root / "opt" / "rocm" / "lib", 1)
    top = top_needing(tmp_path / "lib", dep.parent)
    (root / "etc" / "ld.so.conf.d").mkdir(parents=True)
    (root / "etc" / "ld.so.conf").write_text("# comment\ninclude ld.so.conf.d/*.conf\n")
    (root / "etc" / "ld.so.conf.d" / "rocm.conf").write_text("/opt/rocm/lib\n")
    assert ld_so_conf_dirs(root) == ["/opt/rocm/lib"]
    report = resolve_dependencies([top], root, (), preloaded=NOTHING_LOADED)
    assert report.found["libdep.so"] == dep


def test_object_that_is_not_x86_64_elf_is_skipped(tmp_path: Path) -> None:
    dep = dep_returning(tmp_path / "good", 1)
    decoy = tmp_path / "decoy" / "libdep.so"
    decoy.parent.mkdir()
    decoy.write_text("INPUT(-lsomething)\n")  # a linker script, as some distributions ship
    top = top_needing(tmp_path / "top", dep.parent)
    report = resolve_dependencies([top], Path("/"), (str(decoy.parent), str(dep.parent)), preloaded=NOTHING_LOADED)
    assert report.found["libdep.so"] == dep


def test_every_missing_name_is_listed_with_who_needs_it(tmp_path: Path) -> None:
    gone_a = dep_returning(tmp_path / "build", 1, "gonea")
    gone_b = dep_returning(tmp_path / "build", 2, "goneb")
    deep_gone = dep_returning(tmp_path / "build", 3, "deepgone")
    mid = compile_shared(
        tmp_path / "mid",
        "mid",
        "int deepgone(void);\nint mid(void) { return deepgone(); }\n",
        libs=["deepgone"],
        link_dirs=[deep_gone.parent],
    )
    source = "int gonea(void); int goneb(void); int mid(void);\nint top(void) { return gonea() + goneb() + mid(); }\n"
    top = compile_shared(
        tmp_path / "top",
        "top",
        source,
        libs=["gonea", "goneb", "mid"],
        link_dirs=[gone_a.parent, mid.parent],
        flags=["-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../mid"],
    )
    for path in (gone_a, gone_b, deep_gone):
        path.unlink()
    report = resolve_dependencies([top], Path("/"), (), preloaded=NOTHING_LOADED)
    assert report.missing_names == ["libdeepgone.so", "libgonea.so", "libgoneb.so"]
    assert {(m.name, Path(m.needed_by).name) for m in report.missing} == {
        ("libgonea.so", "libtop.so"),
        ("libgoneb.so", "libtop.so"),
        ("libdeepgone.so", "libmid.so"),
    }
    failure = subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(top)!r})"], capture_output=True)
    assert failure.returncode != 0  # the real loader agrees that it cannot load


def test_include_cycle_terminates(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf\n/usr/local/lib\n")
    assert ld_so_conf_dirs(tmp_path) == ["/usr/local/lib"]


def fanning_out(root: Path, files: int) -> None:
    """ld.so.conf.d where every file includes the whole directory again (test fixture)."""
    conf_d = root / "etc" / "ld.so.conf.d"
    conf_d.mkdir(parents=True)
    (root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    for index in range(files):
        (conf_d / f"{index:02}.conf").write_text(f"include /etc/ld.so.conf.d/*.conf\n/opt/lib{index}\n")


def test_includes_that_fan_out_read_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: 12 files each including all 12 again, 8 levels deep, is 12**8 reads (the doctor hung)."""
    from jax_rocm7_plugin._machine import ld_resolve

    fanning_out(tmp_path, 12)
    reads: list[str] = []
    real_read = ld_resolve.read_text
    monkeypatch.setattr(ld_resolve, "read_text", lambda path, limit: reads.append(str(path)) or real_read(path, limit))
    assert sorted(ld_so_conf_dirs(tmp_path)) == sorted(f"/opt/lib{index}" for index in range(12))
    assert len(reads) == 13 == len(set(reads))


def test_includes_are_bounded_in_number(tmp_path: Path) -> None:
    fanning_out(tmp_path, 300)
    assert len(ld_so_conf_dirs(tmp_path)) < 300


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_ld_so_conf_parser_never_raises(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "etc").mkdir()
        (root / "etc" / "ld.so.conf").write_text(text, encoding="utf-8")
        assert all(d.startswith("/") for d in ld_so_conf_dirs(root))
