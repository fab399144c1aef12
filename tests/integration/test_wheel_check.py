"""build.py check on good wheels and on wheels broken one way at a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from jax_rocm7_build.wheel_check import check_wheel

from tests.support.environment import REPO
from tests.support.native import compile_shared, fake_hip_runtime, pjrt_library_with_code_for
from tests.support.sysroots import bundle_for
from tests.support.wheels import build, edit

GOOD_RUNPATH = ("$ORIGIN/../_rocm_sdk_core/lib", "/opt/rocm/lib")
LIBRARY = "jax_rocm7_pjrt/xla_rocm_plugin.so"


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("check")
    hip = fake_hip_runtime(directory / "hip", devices=1)
    compile_shared(directory / "hip", "foo", "int foo(void) { return 1; }\n", output_name="libfoo.so.1")
    pjrt_library_with_code_for(directory / "good", bundle_for(["gfx942"]), hip_dir=hip.parent, runpath=GOOD_RUNPATH)
    return directory


@pytest.fixture(scope="module")
def good(parts: Path) -> dict[str, Path]:
    pjrt, plugin = build(parts / "dist", parts / "good" / "libpjrt_gpu.so")  # build.py runs check itself
    return {"pjrt": pjrt, "plugin": plugin}


def variant_library(parts: Path, name: str, **options: object) -> bytes:
    hip = parts / "hip"
    library = pjrt_library_with_code_for(parts / name, bundle_for(["gfx942"]), hip_dir=hip, **options)  # type: ignore[arg-type]
    return library.read_bytes()


def test_good_wheels_pass(good: dict[str, Path]) -> None:
    assert check_wheel(good["pjrt"]) == []
    assert check_wheel(good["plugin"]) == []
    assert good["pjrt"].name == "jax_rocm7_pjrt-0.10.2-py3-none-manylinux_2_28_x86_64.whl"
    assert good["plugin"].name == "jax_rocm7_plugin-0.10.2-py3-none-any.whl"


def problems_after(good: Path, tmp_path: Path, name: str | None = None, **edits: object) -> list[str]:
    return check_wheel(edit(good, tmp_path / (name or good.name), **edits))  # type: ignore[arg-type]


def test_tampered_file_breaks_record(good: dict[str, Path], tmp_path: Path) -> None:
    found = problems_after(
        good["plugin"],
        tmp_path,
        transform={"jax_rocm7_plugin/_doctor/diagnose.py": lambda b: b + b"#"},
        keep_record=True,
    )
    assert found == ["RECORD entry for jax_rocm7_plugin/_doctor/diagnose.py does not match its contents"]


def test_a_record_entry_without_sha256_is_named(good: dict[str, Path], tmp_path: Path) -> None:
    import zipfile

    record = "jax_rocm7_pjrt-0.10.2.dist-info/RECORD"
    with zipfile.ZipFile(good["pjrt"]) as archive:
        text = archive.read(record).decode()
    line = next(x for x in text.splitlines() if x.startswith(LIBRARY + ","))
    changed = text.replace(line, f"{LIBRARY},md5=1B2M2Y8AsgTpgAmY7PhCfg,{line.rsplit(',', 1)[1]}")
    found = problems_after(good["pjrt"], tmp_path, replace={record: changed.encode()}, keep_record=True)
    assert found == [f"RECORD entry for {LIBRARY} gives no sha256 hash (md5=1B2M2Y8AsgTpgAmY7PhCfg)"]


def test_a_damaged_library_member_is_named_not_raised(good: dict[str, Path], tmp_path: Path) -> None:
    """A byte flipped inside the deflated library (a broken download): zip's CRC catches it, one line says so."""
    import zipfile

    damaged = tmp_path / good["pjrt"].name
    data = bytearray(good["pjrt"].read_bytes())
    with zipfile.ZipFile(good["pjrt"]) as archive:
        info = archive.getinfo(LIBRARY)
    header = info.header_offset
    name_length = int.from_bytes(data[header + 26 : header + 28], "little")
    extra_length = int.from_bytes(data[header + 28 : header + 30], "little")
    start = header + 30 + name_length + extra_length
    data[start + info.compress_size // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    found = check_wheel(damaged)
    # One line (RECORD's check and the ELF read both meet it), and no half-inflated library read as an ELF object.
    (line,) = found
    assert line.startswith(f"{LIBRARY} cannot be read from the archive: "), found


def test_unlisted_file(good: dict[str, Path], tmp_path: Path) -> None:
    found = problems_after(
        good["plugin"], tmp_path, replace={"jax_rocm7_plugin/extra.py": b"x = 1\n"}, keep_record=True
    )
    assert found == ["jax_rocm7_plugin/extra.py is not in RECORD"]


def test_missing_license(good: dict[str, Path], tmp_path: Path) -> None:
    found = problems_after(
        good["plugin"], tmp_path, replace={"jax_rocm7_plugin-0.10.2.dist-info/licenses/LICENSE": None}
    )
    assert found == [
        "no license file in the wheel",
        "METADATA names license file LICENSE, which the wheel lacks",
    ]


def test_wrong_tag(good: dict[str, Path], tmp_path: Path) -> None:
    found = problems_after(good["pjrt"], tmp_path, "jax_rocm7_pjrt-0.10.2-py3-none-linux_x86_64.whl")
    assert "tag is ['py3-none-linux_x86_64'], expected py3-none-manylinux_2_28_x86_64" in found
    assert any(p.startswith("WHEEL declares tags") for p in found)


def test_extra_exports(parts: Path, good: dict[str, Path], tmp_path: Path) -> None:
    library = variant_library(parts, "exports", runpath=GOOD_RUNPATH, extra_exports=["xla_internal_helper"])
    found = problems_after(good["pjrt"], tmp_path, replace={LIBRARY: library})
    assert found == ["the library must export GetPjrtApi only; it exports GetPjrtApi, xla_internal_helper"]


def test_runpath_without_pip_rocm_or_opt_rocm(parts: Path, good: dict[str, Path], tmp_path: Path) -> None:
    library = variant_library(parts, "runpath", runpath=("$ORIGIN/../lib",))
    found = problems_after(good["pjrt"], tmp_path, replace={LIBRARY: library})
    assert len(found) == 2
    assert found[0].startswith("RUNPATH has no $ORIGIN entry reaching a pip-installed ROCm")
    assert found[1] == "RUNPATH lacks /opt/rocm/lib"


def test_bundled_rocm_library(parts: Path, good: dict[str, Path], tmp_path: Path) -> None:
    hip = (parts / "hip" / "libamdhip64.so.7").read_bytes()
    found = problems_after(good["pjrt"], tmp_path, replace={"jax_rocm7_pjrt.libs/libamdhip64.so.7": hip})
    assert "bundles ROCm library jax_rocm7_pjrt.libs/libamdhip64.so.7: ROCm comes from the host or from pip" in found


def test_library_outside_the_manylinux_policy(parts: Path, good: dict[str, Path], tmp_path: Path) -> None:
    library = variant_library(parts, "policy", runpath=GOOD_RUNPATH, needs=["libfoo.so.1"])
    found = problems_after(good["pjrt"], tmp_path, replace={LIBRARY: library})
    assert any("needs libfoo.so.1, outside manylinux_2_28_x86_64 and not ROCm's" in p for p in found), found


def test_exact_pin_is_refused(good: dict[str, Path], tmp_path: Path) -> None:
    metadata = "jax_rocm7_plugin-0.10.2.dist-info/METADATA"
    found = problems_after(
        good["plugin"],
        tmp_path,
        transform={metadata: lambda b: b.replace(b"jax-rocm7-pjrt==0.10.2.*", b"jax-rocm7-pjrt==0.10.2")},
    )
    assert found == ["must require jax-rocm7-pjrt==0.10.2.*, requires ['jax-rocm7-pjrt==0.10.2']"]


def test_plugin_tags_must_match_contents(good: dict[str, Path], tmp_path: Path) -> None:
    renamed = problems_after(good["plugin"], tmp_path, "jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert any("carries no extension modules, so its tag must be py3-none-any" in p for p in renamed)
    with_extension = problems_after(
        good["plugin"], tmp_path / "ext", replace={"jax_rocm7_plugin/_native/_solver.so": b"\x7fELF"}
    )
    assert any(
        "carries extension modules, so its tag must be cpXY-cpXY-manylinux_2_28_x86_64" in p for p in with_extension
    )
    stray = problems_after(good["plugin"], tmp_path / "stray", replace={"jax_rocm7_plugin/_solver.so": b"\x7fELF"})
    (problem,) = stray
    assert problem.startswith("jax_rocm7_plugin/_solver.so is outside jax_rocm7_plugin/_native/: jaxlib would load it")


@pytest.fixture(scope="module")
def with_modules(parts: Path) -> Path:
    """A plugin wheel with two small compiled extension modules (test fixtures shaped like jaxlib's)."""
    modules = parts / "modules"
    for name in ("_solver", "rocm_plugin_extension"):
        source = f"int hipInit(unsigned);\nvoid* PyInit_{name}(void) {{ hipInit(0); return 0; }}\n"
        compile_shared(
            modules, name, source, libs=[":libamdhip64.so.7"], link_dirs=[parts / "hip"], output_name=f"{name}.so"
        )
    target = ("--python-version", "3.12", "--release", "0.12.0")
    (plugin,) = build(parts / "dist-modules", None, "--only", "plugin", "--extension-modules", str(modules), *target)
    return plugin


def test_a_plugin_with_modules_passes(with_modules: Path) -> None:
    assert with_modules.name == "jax_rocm7_plugin-0.12.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert check_wheel(with_modules) == []


METADATA_012 = "jax_rocm7_plugin-0.12.0.dist-info/METADATA"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"replace": {"jax_rocm7_plugin/_solver.py": None}},
            "jax_rocm7_plugin/_native/_solver.so has no public stub jax_rocm7_plugin/_solver.py that loads it",
        ),
        (
            {"replace": {"jax_rocm7_plugin/_native/_solver.so": b"\x7fELF junk"}},
            "jax_rocm7_plugin/_native/_solver.so is not the file jax_rocm7_plugin/_native/build_info.json records",
        ),
        (
            {
                "transform": {
                    METADATA_012: lambda b: b.replace(b"Requires-Python: ==3.12.*", b"Requires-Python: >=3.12")
                }
            },
            "Requires-Python is '>=3.12'; modules for CPython 3.12 need '==3.12.*'",
        ),
        (
            {"transform": {METADATA_012: lambda b: b.replace(b"Requires-Dist: jaxlib==0.12.0\n", b"")}},
            "must pin jaxlib==0.12.0 (the modules' only guard), pins nothing",
        ),
        (
            {"replace": {"jax_rocm7_plugin-0.12.0.dist-info/licenses/NOTICE": None}},
            "carries re-packaged extension modules but no NOTICE file",
        ),
        (
            {"name": "jax_rocm7_plugin-0.12.0-cp313-cp313-manylinux_2_28_x86_64.whl"},
            "jax_rocm7_plugin/_native/build_info.json says the modules are for cp312 and jaxlib 0.12.0, "
            "the wheel is cp313 for jaxlib 0.12.0",
        ),
    ],
)
def test_modules_tag_abi_and_pins_must_agree(
    with_modules: Path, tmp_path: Path, change: dict[str, object], expected: str
) -> None:
    name = str(change.pop("name", with_modules.name))
    if name != with_modules.name:  # the WHEEL file must agree with the new name, or that is reported first
        change["transform"] = {
            "jax_rocm7_plugin-0.12.0.dist-info/WHEEL": lambda b: b.replace(b"cp312-cp312", b"cp313-cp313")
        }
    found = problems_after(with_modules, tmp_path, name, **change)  # type: ignore[arg-type]
    assert expected in found, found


def test_entry_point_must_resolve(good: dict[str, Path], tmp_path: Path) -> None:
    found = problems_after(good["plugin"], tmp_path, replace={"jax_plugins/rocm7/__init__.py": b"x = 1\n"})
    assert found == ["entry point jax_plugins.rocm7 has no initialize() for jax to call"]


def test_stand_in_library_is_not_a_rocm_wheel(standin_wheels) -> None:  # type: ignore[no-untyped-def]
    # the CPU stand-in (the session's pjrt wheel of it, built with --skip-check): no ROCm in NEEDED (the summary
    # says so), no RUNPATH
    from jax_rocm7_plugin.version import JAX_RELEASE

    pjrt = standin_wheels(JAX_RELEASE, f"{sys.version_info.major}.{sys.version_info.minor}")["pjrt"]
    found = check_wheel(pjrt)
    assert any("the summary does not name the ROCm version" in p for p in found)
    assert "RUNPATH lacks /opt/rocm/lib" in found


def test_cli_one_line_per_problem_and_exit_status(good: dict[str, Path], tmp_path: Path) -> None:
    broken = edit(good["plugin"], tmp_path / good["plugin"].name, replace={"jax_plugins/rocm7/__init__.py": b""})
    done = subprocess.run(
        [sys.executable, str(REPO / "build" / "build.py"), "check", str(good["pjrt"]), str(broken)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{good['pjrt'].name}: ok",
        f"{broken.name}: entry point jax_plugins.rocm7 has no initialize() for jax to call",
    ]
    missing = subprocess.run([sys.executable, str(REPO / "build" / "build.py"), "check", str(tmp_path / "nope.whl")])
    assert missing.returncode == 2
