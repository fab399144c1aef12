"""build.py check on good wheels and on wheels broken one way at a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from build.wheel_check import check_wheel
from tests.conftest import REPO
from tests.native import compile_shared, fake_hip_runtime, pjrt_library_with_code_for
from tests.sysroots import bundle_for
from tests.wheels import build, edit

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
        good["plugin"], tmp_path, transform={"jax_rocm7_plugin/doctor.py": lambda b: b + b"#"}, keep_record=True
    )
    assert found == ["RECORD entry for jax_rocm7_plugin/doctor.py does not match its contents"]


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
        good["plugin"], tmp_path / "ext", replace={"jax_rocm7_plugin/_solver.so": b"\x7fELF"}
    )
    assert any(
        "carries extension modules, so its tag must be cpXY-cpXY-manylinux_2_28_x86_64" in p for p in with_extension
    )


def test_entry_point_must_resolve(good: dict[str, Path], tmp_path: Path) -> None:
    found = problems_after(good["plugin"], tmp_path, replace={"jax_plugins/rocm7/__init__.py": b"x = 1\n"})
    assert found == ["entry point jax_plugins.rocm7 has no initialize() for jax to call"]


def test_stand_in_library_is_not_a_rocm_wheel(standin_library: Path, tmp_path: Path) -> None:
    # the CPU stand-in: no ROCm in NEEDED (summary says so), no RUNPATH
    (pjrt,) = build(tmp_path, standin_library, "--only", "pjrt", "--skip-check")
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
