from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin._machine.rocm_pip import find_pip_rocm, pip_rocm_in_use, point_at_pip_rocm
from jax_rocm7_plugin._settings import read_settings


def in_use(pip_rocm, environ: dict[str, str]) -> bool:  # type: ignore[no-untyped-def]
    settings = read_settings(environ)
    return pip_rocm_in_use(pip_rocm, settings.rocm_path, settings.ld_library_path)


def make_pip_rocm(root: Path, *, bitcode: bool = True, lld: bool = True) -> Path:
    """The layout of TheRock's _rocm_sdk_core package: lib/, lib/llvm/{bin,amdgcn/bitcode}."""
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "libamdhip64.so.7").write_bytes(b"")
    if bitcode:
        (root / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
        (root / "lib" / "llvm" / "amdgcn" / "bitcode" / "ocml.bc").write_bytes(b"BC")
    if lld:
        (root / "lib" / "llvm" / "bin").mkdir(parents=True)
        (root / "lib" / "llvm" / "bin" / "ld.lld").write_bytes(b"")
    return root


def test_not_installed_without_hip_runtime(tmp_path: Path) -> None:
    assert find_pip_rocm(tmp_path) is None


def test_complete_install_is_pointed_at(tmp_path: Path) -> None:
    pip_rocm = find_pip_rocm(make_pip_rocm(tmp_path / "_rocm_sdk_core"))
    assert pip_rocm is not None and pip_rocm.complete
    environ = {"PATH": "/usr/bin"}
    assert in_use(pip_rocm, environ)
    changed = point_at_pip_rocm(pip_rocm, environ)
    assert environ["HIP_DEVICE_LIB_PATH"] == str(pip_rocm.root / "lib/llvm/amdgcn/bitcode")
    assert environ["ROCM_PATH"] == str(pip_rocm.root)
    assert environ["PATH"].split(":")[0] == str(pip_rocm.root / "lib/llvm/bin")
    assert len(changed) == 3


def test_user_settings_are_never_overridden(tmp_path: Path) -> None:
    pip_rocm = find_pip_rocm(make_pip_rocm(tmp_path / "_rocm_sdk_core"))
    assert pip_rocm is not None
    environ = {"HIP_DEVICE_LIB_PATH": "/mine", "ROCM_PATH": str(pip_rocm.root)}
    point_at_pip_rocm(pip_rocm, environ)
    assert environ["HIP_DEVICE_LIB_PATH"] == "/mine"


def test_system_rocm_in_use_touches_nothing(tmp_path: Path) -> None:
    pip_rocm = find_pip_rocm(make_pip_rocm(tmp_path / "_rocm_sdk_core"))
    system = tmp_path / "opt" / "rocm" / "lib"
    system.mkdir(parents=True)
    (system / "libamdhip64.so.7").write_bytes(b"")
    assert pip_rocm is not None
    assert not in_use(pip_rocm, {"LD_LIBRARY_PATH": f"/nowhere:{system}"})
    assert not in_use(pip_rocm, {"ROCM_PATH": str(system.parent)})
    assert in_use(pip_rocm, {"LD_LIBRARY_PATH": str(pip_rocm.root / "lib")})


def test_incomplete_install(tmp_path: Path) -> None:
    pip_rocm = find_pip_rocm(make_pip_rocm(tmp_path / "_rocm_sdk_core", bitcode=False))
    assert pip_rocm is not None and not pip_rocm.complete and pip_rocm.bitcode_dir is None
