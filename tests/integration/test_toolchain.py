"""Where a release's first compile needs ROCm's device bitcode and ld.lld (releases.json "first_compile"),
the doctor looks in every ROCm layout it knows; synthetic machines (sysroots) with and without them."""

from __future__ import annotations

import shutil
from pathlib import Path

from jax_rocm7_plugin._machine.toolchain import toolchain_findings
from jax_rocm7_plugin._policy import releases
from jax_rocm7_plugin._policy.releases import FirstCompile
from jax_rocm7_plugin._settings import read_settings
from jax_rocm7_plugin.version import JAX_RELEASE
from tests.support.inprocess import doctor
from tests.support.sysroots import add_rocm, make_sysroot

NEEDS_BOTH = FirstCompile(True, True, "test")


def _ids(root: Path, **env: str) -> list[str]:
    return [f.id for f in doctor(env, root).findings]


def test_the_release_table_says_what_each_release_needs() -> None:
    needs = {
        row.release: (row.first_compile.device_bitcode, row.first_compile.external_ld_lld) for row in releases.table()
    }
    assert needs["0.10.2"] == (True, True) and needs["0.12.0"] == (False, False)


def test_amds_layout_with_bitcode_and_lld_is_quiet(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path)
    add_rocm(root, build)
    assert "device-bitcode-missing" not in _ids(root)


def test_without_them_the_doctor_says_what_and_where_it_looked(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path)
    home = add_rocm(root, build, toolchain=False)
    settings = read_settings({}, sysroot=root)
    from jax_rocm7_plugin._machine.rocm_install import find_rocm_installs

    installs = find_rocm_installs(root, None, [])
    (finding,) = toolchain_findings(NEEDS_BOTH, installs, settings, "0.10.2")
    assert finding.id == "device-bitcode-missing" and finding.severity == "warning"
    assert "device bitcode (ocml.bc" in finding.summary and "the ld.lld linker" in finding.summary
    assert any(str(root / "opt/rocm/amdgcn/bitcode") in line for line in finding.evidence) and home.is_dir()
    assert any(str(root / "opt/rocm/lib/llvm/bin") in line for line in finding.evidence)  # TheRock's layout too
    if releases.get(JAX_RELEASE).first_compile.device_bitcode:  # type: ignore[union-attr]
        assert "device-bitcode-missing" in _ids(root)


def test_therocks_layout_and_the_variables_count(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path)
    home = add_rocm(root, build, toolchain=False)
    from jax_rocm7_plugin._machine.rocm_install import find_rocm_installs

    installs = find_rocm_installs(root, None, [])
    (home / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
    (home / "lib" / "llvm" / "amdgcn" / "bitcode" / "ocml.bc").write_bytes(b"BC")
    (home / "lib" / "llvm" / "bin").mkdir(parents=True)
    (home / "lib" / "llvm" / "bin" / "ld.lld").write_text("")
    assert toolchain_findings(NEEDS_BOTH, installs, read_settings({}, sysroot=root), "0.10.2") == []
    shutil.rmtree(home / "lib" / "llvm")
    (root / "elsewhere" / "bitcode").mkdir(parents=True)
    (root / "elsewhere" / "bitcode" / "ocml.bc").write_bytes(b"BC")
    (root / "tools").mkdir()
    (root / "tools" / "ld.lld").write_text("")
    settings = read_settings({"HIP_DEVICE_LIB_PATH": "/elsewhere/bitcode", "PATH": "/tools:/usr/bin"}, sysroot=root)
    assert toolchain_findings(NEEDS_BOTH, installs, settings, "0.10.2") == []


def test_a_release_that_links_them_in_needs_nothing(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path)
    add_rocm(root, build, toolchain=False)
    from jax_rocm7_plugin._machine.rocm_install import find_rocm_installs

    installs = find_rocm_installs(root, None, [])
    assert (
        toolchain_findings(FirstCompile(False, False, "linked in"), installs, read_settings({}, sysroot=root), "0.12.0")
        == []
    )


# Where the published 0.10.2 library looks (releases.json, from its strings).
AS_0_10_2 = FirstCompile(
    True, True, "test", ("$HIP_DEVICE_LIB_PATH", "{rocm}/amdgcn/bitcode"), ("{rocm}/llvm/bin", "$PATH"), "strings"
)


def test_the_table_records_where_each_release_looks() -> None:
    row = releases.get("0.10.2")
    assert row is not None
    assert (row.first_compile.bitcode_search, row.first_compile.lld_search) == (
        AS_0_10_2.bitcode_search,
        AS_0_10_2.lld_search,
    )


def test_therocks_layout_is_where_0_10_2_does_not_look_and_the_fix_says_so(tmp_path: Path, build: Path) -> None:
    """TheRock's /opt/rocm keeps bitcode and ld.lld under lib/llvm (ROCm/TheRock#4269): the 0.10.2 library does not
    look there, so its first compile fails; the fix points it at those folders, and with them set it is quiet."""
    from jax_rocm7_plugin._machine.rocm_install import find_rocm_installs

    root = make_sysroot(tmp_path)
    home = add_rocm(root, build, toolchain=False)
    (home / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
    (home / "lib" / "llvm" / "amdgcn" / "bitcode" / "ocml.bc").write_bytes(b"BC")
    (home / "lib" / "llvm" / "bin").mkdir(parents=True)
    (home / "lib" / "llvm" / "bin" / "ld.lld").write_text("")
    installs = find_rocm_installs(root, None, [])
    (finding,) = toolchain_findings(AS_0_10_2, installs, read_settings({}, sysroot=root), "0.10.2")
    assert "where this machine's ROCm does not keep them" in finding.summary
    assert "export HIP_DEVICE_LIB_PATH=/opt/rocm/lib/llvm/amdgcn/bitcode" in finding.fix
    assert "export PATH=/opt/rocm/lib/llvm/bin:$PATH" in finding.fix
    environ = {"HIP_DEVICE_LIB_PATH": "/opt/rocm/lib/llvm/amdgcn/bitcode", "PATH": "/opt/rocm/lib/llvm/bin:/usr/bin"}
    assert toolchain_findings(AS_0_10_2, installs, read_settings(environ, sysroot=root), "0.10.2") == []
    # AMD's layout under ROCM_PATH is where it looks.
    amd = make_sysroot(tmp_path / "amd")
    add_rocm(amd, build, "7.2.0", link=False)
    settings = read_settings({"ROCM_PATH": "/opt/rocm-7.2.0"}, sysroot=amd)
    assert toolchain_findings(AS_0_10_2, find_rocm_installs(amd, "/opt/rocm-7.2.0", []), settings, "0.10.2") == []
