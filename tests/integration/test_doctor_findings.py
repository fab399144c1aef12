"""One synthetic machine per finding id, diagnosed in process (the CLI is tested in test_doctor.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from tests.support.inprocess import doctor as diagnose
from tests.support.inprocess import loader_plan
from tests.support.native import HIP_RUNTIME, compile_shared, pjrt_library_with_code_for
from tests.support.starlark import PJRT_RUNPATH
from tests.support.sysroots import LIBRARY_TARGETS, Gpu, add_rocm, bundle_for, library_of, make_sysroot

GFX1031, GFX1100, GFX1151, GFX906 = 100301, 110000, 110501, 90006


def ids(report: Report) -> list[str]:
    """The findings' ids, known issues left out: the default machine's ROCm 7.2.0 has some, and they have their
    own tests (tests/integration/test_known_issues.py) on machines rebuilt from each entry's thread."""
    return [f.id for f in report.findings if f.id != "known-issue"]


def finding(report: Report, finding_id: str) -> Finding:
    return next(f for f in report.findings if f.id == finding_id)


def healthy(tmp_path: Path, build: Path, gpus: list[Gpu] | None = None) -> Path:
    root = make_sysroot(tmp_path / "root", gpus)
    add_rocm(root, build)
    return root


# What AMD sets for the 0.10.2 release (known issue jax-0.10.2-runtime-queue-hang): with it, a machine whose
# ROCm has none of the known bugs of gfx942 has nothing to report.
AVOIDS_KNOWN_ISSUES = {
    "ROCPROFILER_QUEUE_INTERPOSITION": "0",
    "DEBUG_HIP_DYNAMIC_QUEUES": "0",
    "HSA_NO_SCRATCH_RECLAIM": "1",
}


def test_healthy_rocm7_machine_has_no_findings(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path / "root")
    add_rocm(root, build, "7.14.0")
    report = diagnose(AVOIDS_KNOWN_ISSUES, root, library_of(build))
    assert report.ok and ids(report) == [], report.findings
    assert report.gpus[0].library_code == "gfx9-4-generic"
    assert report.installs[0].version == "7.14.0-56"
    assert report.library.missing_dependencies == ()


def test_rocm_not_found(tmp_path: Path, build: Path) -> None:
    report = diagnose({}, make_sysroot(tmp_path / "root"), library_of(build))
    assert ids(report)[:2] == ["rocm-not-found", "library-dependency-missing"]
    assert "libamdhip64.so.7" in finding(report, "library-dependency-missing").summary


def test_rocm_major_mismatch(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path / "root")
    add_rocm(root, build, "6.4.1", soname="libamdhip64.so.6")
    report = diagnose({}, root, library_of(build))
    mismatch = finding(report, "rocm-major-mismatch")
    assert mismatch.severity == "error" and any("6.4.1" in e for e in mismatch.evidence)


def test_rocm7_off_the_loader_path_is_named(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path / "root")
    home = add_rocm(root, build, link=False)  # /opt/rocm-7.2.0 only: RUNPATH /opt/rocm/lib misses it
    report = diagnose({}, root, library_of(build))
    # And 0.10.2's library looks for its bitcode under /opt/rocm (or ROCM_PATH), which is not there either.
    assert ids(report) == ["library-dependency-missing", "device-bitcode-missing"]
    missing = finding(report, "library-dependency-missing")
    assert (home / "lib" / "libamdhip64.so.7").exists()
    assert "/opt/rocm-7.2.0/lib/libamdhip64.so.7" in missing.evidence  # where it is, as the machine names it
    assert "export LD_LIBRARY_PATH=/opt/rocm-7.2.0/lib" in missing.fix and "sudo ln -s /opt/rocm-7.2.0" in missing.fix
    assert missing.remedy is not None and missing.remedy.checked is True, missing.remedy
    assert "HIP_DEVICE_LIB_PATH=/opt/rocm-7.2.0/amdgcn/bitcode" in finding(report, "device-bitcode-missing").fix
    assert diagnose({"LD_LIBRARY_PATH": "/opt/rocm-7.2.0/lib"}, root, library_of(build)).ok


def sysdeps_numa(directory: Path) -> Path:
    """A stand-in for TheRock's librocm_sysdeps_numa.so.1 (compiled here, test fixture)."""
    return compile_shared(
        directory,
        "sysdeps_numa",
        "int rocm_sysdeps_numa_probe(void) { return 0; }\n",
        flags=["-Wl,-soname,librocm_sysdeps_numa.so.1"],
        output_name="librocm_sysdeps_numa.so.1",
    )


def test_rocm_714_system_libraries_outside_the_runpath_are_named(tmp_path: Path, build: Path) -> None:
    """ROCm >= 7.14 keeps librocm_sysdeps_* in lib/rocm_sysdeps/lib: a RUNPATH of /opt/rocm/lib alone
    (the published 0.12.0 library's) misses them; pjrt/BUILD's RUNPATH reaches them."""
    hip_dir = build / "hip"
    numa = sysdeps_numa(tmp_path / "sysdeps")
    targets = bundle_for(LIBRARY_TARGETS)
    library = pjrt_library_with_code_for(
        tmp_path / "lib", targets, hip_dir=hip_dir, needs=[numa.name], link_dirs=[numa.parent]
    )
    root = make_sysroot(tmp_path / "root")
    add_rocm(root, build, "7.14.0", sysdeps=[numa])
    report = diagnose({}, root, library)
    # The loader loads it from the install's private directory first (the child's load test with it, then jax).
    assert report.ok and ids(report) == ["library-dependency-preloaded"]
    preloaded = finding(report, "library-dependency-preloaded")
    assert "librocm_sysdeps_numa.so.1" in preloaded.summary and " /opt/rocm/lib/rocm_sysdeps/lib," in preloaded.summary
    assert "LD_LIBRARY_PATH=/opt/rocm/lib/rocm_sysdeps/lib:$LD_LIBRARY_PATH" in preloaded.fix
    assert preloaded.evidence == ("librocm_sysdeps_numa.so.1, needed by the PJRT library",)
    assert ids(diagnose({"LD_LIBRARY_PATH": "/opt/rocm/lib/rocm_sysdeps/lib"}, root, library)) == []
    ours = pjrt_library_with_code_for(
        tmp_path / "ours", targets, hip_dir=hip_dir, needs=[numa.name], link_dirs=[numa.parent], runpath=PJRT_RUNPATH
    )
    assert diagnose({}, root, ours).ok


def test_rocm_path_mismatch(tmp_path: Path, build: Path) -> None:
    root = healthy(tmp_path, build)
    (root / "opt" / "rocm-6.4.0" / "lib").mkdir(parents=True)
    report = diagnose({"ROCM_PATH": "/opt/rocm-6.4.0"}, root, library_of(build))
    # ROCM_PATH is also where 0.10.2's library looks for its bitcode and ld.lld: not in that folder.
    assert ids(report) == ["rocm-path-mismatch", "device-bitcode-missing"] and report.ok


@pytest.mark.parametrize(
    ("gpus", "severity", "fix_part"),
    [
        ([Gpu(GFX906)], "error", "built for this GPU"),
        ([Gpu(GFX1031)], "error", "HSA_OVERRIDE_GFX_VERSION=10.3.0"),  # sibling gfx1030 is in the library
        ([Gpu(GFX1100), Gpu(GFX906, drm_render_minor=129)], "warning", "HIP_VISIBLE_DEVICES=0"),
    ],
)
def test_gpu_arch_not_in_library(tmp_path: Path, build: Path, gpus: list[Gpu], severity: str, fix_part: str) -> None:
    report = diagnose({}, healthy(tmp_path, build, gpus), library_of(build))
    uncovered = finding(report, "gpu-arch-not-in-library")
    assert uncovered.severity == severity and fix_part in uncovered.fix
    assert "gfx906" in uncovered.summary or "gfx1031" in uncovered.summary


def test_hidden_unsupported_gpu_is_not_reported(tmp_path: Path, build: Path) -> None:
    root = healthy(tmp_path, build, [Gpu(GFX1100), Gpu(GFX906, drm_render_minor=129)])
    assert ids(diagnose({"HIP_VISIBLE_DEVICES": "0"}, root, library_of(build))) == []


def test_hsa_override_judges_the_overridden_target(tmp_path: Path, build: Path) -> None:
    root = healthy(tmp_path, build, [Gpu(GFX906)])
    report = diagnose({"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}, root, library_of(build))
    assert ids(report) == ["hsa-override-gfx-version"] and report.ok
    assert "gfx1100" in report.findings[0].summary
    report = diagnose({"HSA_OVERRIDE_GFX_VERSION": "9.0.6"}, root, library_of(build))
    assert ids(report) == ["gpu-arch-not-in-library", "hsa-override-gfx-version"]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"JAX_PLATFORMS": "cpu"}, "jax-platforms-excludes-rocm"),
        ({"HIP_VISIBLE_DEVICES": "-1"}, "visible-devices-hide-all"),
        ({"CUDA_VISIBLE_DEVICES": "0"}, "cuda-visible-devices-set"),
        ({"XLA_PYTHON_CLIENT_MEM_FRACTION": "1.5"}, "xla-client-env-invalid"),
    ],
)
def test_environment_findings(tmp_path: Path, build: Path, environ: dict[str, str], expected: str) -> None:
    assert ids(diagnose(environ, healthy(tmp_path, build), library_of(build))) == [expected]


def test_shm_too_small_with_two_gpus(tmp_path: Path, build: Path) -> None:
    root = healthy(tmp_path, build, [Gpu(), Gpu(drm_render_minor=129)])
    (root / "proc").mkdir()
    (root / "proc" / "mounts").write_text("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n")
    report = diagnose({}, root, library_of(build))
    assert ids(report) == ["shm-too-small"] and "64 MiB" in report.findings[0].summary
    (root / "proc" / "mounts").write_text("shm /dev/shm tmpfs rw,size=16g 0 0\n")
    assert ids(diagnose({}, root, library_of(build))) == []


def test_library_without_get_pjrt_api(tmp_path: Path, build: Path) -> None:
    report = diagnose({}, healthy(tmp_path, build), build / "hip" / HIP_RUNTIME)
    invalid = finding(report, "pjrt-library-invalid")
    assert "exports no GetPjrtApi" in invalid.summary and not report.ok


def write_distribution(site: Path, name: str, version: str, entry_points: str = "", files: str = "") -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)
    (info / "RECORD").write_text(files)


def test_conflicting_and_cuda_plugins(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    write_distribution(site, "jax-rocm60-plugin", "0.6.0", "[jax_plugins]\nxla_rocm60 = jax_plugins.xla_rocm60\n")
    write_distribution(site, "jax-cuda12-plugin", "0.10.2", "[jax_plugins]\nxla_cuda12 = jax_plugins.xla_cuda12\n")
    monkeypatch.syspath_prepend(str(site))
    report = diagnose({}, healthy(tmp_path, build), library_of(build))
    assert ids(report) == ["conflicting-rocm-plugin", "cuda-plugin-present"]
    conflict = finding(report, "conflicting-rocm-plugin")
    assert conflict.fix.startswith("pip uninstall jax-rocm60-plugin")
    assert any("xla_rocm60" in e for e in conflict.evidence)


def test_upstream_pjrt_wheel_is_a_conflict(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    record = "jax_plugins/xla_rocm7/__init__.py,,\njax_plugins/xla_rocm7/xla_rocm_plugin.so,,\n"
    write_distribution(site, "jax-rocm7-pjrt", "0.10.2", "[jax_plugins]\nxla_rocm7 = jax_plugins.xla_rocm7\n", record)
    monkeypatch.syspath_prepend(str(site))
    report = diagnose({}, healthy(tmp_path, build), library_of(build))
    assert "conflicting-rocm-plugin" in ids(report)


def test_jaxlib_version_skew_from_distribution_metadata(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    write_distribution(site, "jaxlib", "0.10.1")
    monkeypatch.syspath_prepend(str(site))
    # As in the doctor's own process, which imports no jax: the installed distribution is the answer.
    monkeypatch.delitem(sys.modules, "jaxlib.version", raising=False)
    report = diagnose({}, healthy(tmp_path, build), library_of(build))
    assert ids(report) == ["version-skew-jaxlib"] and "0.10.1" in report.findings[0].summary


@pytest.mark.parametrize("with_library", [True, False], ids=["library", "no-library"])
def test_pip_rocm_without_bitcode(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch, with_library: bool
) -> None:
    """The doctor names a pip ROCm without bitcode whether or not a PJRT library is found."""
    site = tmp_path / "site"
    (site / "_rocm_sdk_core" / "lib").mkdir(parents=True)
    (site / "_rocm_sdk_core" / "__init__.py").write_text("")
    shutil.copy(build / "hip" / HIP_RUNTIME, site / "_rocm_sdk_core" / "lib" / HIP_RUNTIME)
    write_distribution(site, "rocm-sdk-core", "7.13.0a20260415")
    monkeypatch.syspath_prepend(str(site))
    root = make_sysroot(tmp_path / "root")
    report = diagnose({}, root, library_of(build) if with_library else None)
    assert "device-bitcode-missing" in ids(report)
    assert "rocm-not-found" not in ids(report)  # ROCm from pip counts as an install
    assert report.installs[-1].version == "7.13.0a20260415"


def test_deep_probe_with_a_runtime_that_sees_a_gpu(tmp_path: Path, build: Path) -> None:
    report = diagnose({}, healthy(tmp_path, build), library_of(build), deep=True)
    # Everything the HIP child and the load test look at is fine; the first jit is not: this PJRT-shaped
    # library (a test fixture) cannot create a client, and its ROCm lives only under the sysroot.
    assert ids(report) == ["first-jit-failed"]
    assert report.first_jit is not None and report.first_jit["step"] == "start the rocm backend"
    hip = report.hip
    assert hip["ok"] and hip["hip"]["device_count"]["value"] == 1 and hip["pjrt"]["c_api_version"] == "0.81"


def test_deep_probe_that_crashes_is_a_finding(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path / "root")
    home = add_rocm(root, build)
    (home / "lib" / HIP_RUNTIME).unlink()
    shutil.copy(library_of(build), home / "lib" / HIP_RUNTIME)  # an ELF object without hipInit
    report = diagnose({}, root, None, deep=True)
    assert "hip-probe-failed" in ids(report)


def test_hide_fix_counts_within_rocr_selection(tmp_path: Path, build: Path) -> None:
    """With ROCR_VISIBLE_DEVICES=1,2 HIP numbers those GPUs 0 and 1: the fix must use HIP's numbers."""
    gpus = [Gpu(GFX906), Gpu(GFX906, drm_render_minor=129), Gpu(GFX1100, drm_render_minor=130)]
    report = diagnose({"ROCR_VISIBLE_DEVICES": "1,2"}, healthy(tmp_path, build, gpus), library_of(build))
    uncovered = finding(report, "gpu-arch-not-in-library")
    assert uncovered.severity == "warning"
    assert uncovered.fix.startswith("hide GPU 0 (gfx906, Instinct MI50/MI60, Radeon VII) from HIP and keep GPU 1 ")
    assert uncovered.remedy is not None and uncovered.remedy.environment == (("HIP_VISIBLE_DEVICES", "1"),)
    assert uncovered.remedy.checked, uncovered.remedy.outcome  # the doctor re-read the machine with it set


def test_rocm_older_than_the_library_was_built_for(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.12.0's library is built for ROCm 7.14.0 (releases.json); on ROCm 7.2.1 the doctor says so, and names
    the release whose library fits (0.10.2, built for 7.2.0)."""
    monkeypatch.setattr("jax_rocm7_plugin.version.JAX_RELEASE", "0.12.0")
    root = make_sysroot(tmp_path / "root")
    add_rocm(root, build, "7.2.1")
    older = finding(diagnose({}, root, library_of(build)), "rocm-older-than-library")
    assert older.severity == "warning" and "built for ROCm 7.14.0" in older.summary and "7.2.1-56" in older.summary
    assert older.fix.startswith("install ROCm 7.14.0 or later") and '"jax[rocm7-local]==0.10.2"' in older.fix
    newer = make_sysroot(tmp_path / "newer")
    add_rocm(newer, build, "7.14.0")
    assert "rocm-older-than-library" not in ids(diagnose({}, newer, library_of(build)))


def test_an_nvidia_machine_is_told_it_is_one(tmp_path: Path) -> None:
    """Both pairs installed on an NVIDIA host: not 'install the amdgpu driver', but what this machine is."""
    root = make_sysroot(tmp_path / "root", topology=False, amdgpu_module=False, kfd=False, render_nodes=False)
    (root / "sys" / "module" / "nvidia").mkdir(parents=True)
    report = diagnose({}, root)
    other = finding(report, "other-vendor-gpu")
    assert ids(report)[0] == "other-vendor-gpu" and "amdgpu-driver-missing" not in ids(report)
    assert "NVIDIA" in other.summary and "pip uninstall jax-rocm7-plugin jax-rocm7-pjrt" in other.fix
    assert any("/sys/module/nvidia exists" in e for e in other.evidence)


def test_the_loader_preloads_private_system_libraries_and_the_library_loads(tmp_path: Path, build: Path) -> None:
    """The loader, for real: its child load test fails (librocm_sysdeps_numa.so.1 is not on the library's
    RUNPATH), the walk finds it in ROCm 7.14's lib/rocm_sysdeps/lib, and a second child load with it loaded
    first by absolute path succeeds; the plan carries it for the in-process load. (The library finds its HIP
    runtime through a RUNPATH to the fake build, which this host can load; the sysroot has the same runtime.)"""
    numa = sysdeps_numa(tmp_path / "sysdeps")
    hip_dir = build / "hip"
    library = pjrt_library_with_code_for(
        tmp_path / "lib",
        bundle_for(LIBRARY_TARGETS),
        hip_dir=hip_dir,
        runpath=(str(hip_dir), "/opt/rocm/lib"),
        needs=[numa.name],
        link_dirs=[numa.parent],
    )
    root = make_sysroot(tmp_path / "root")
    add_rocm(root, build, "7.14.0", sysdeps=[numa])
    plan = loader_plan({"XDG_CACHE_HOME": str(tmp_path / "cache")}, root, library)
    sysdeps = root / "opt" / "rocm" / "lib" / "rocm_sysdeps" / "lib" / numa.name
    assert not isinstance(plan, Finding), plan
    assert plan.preload == (str(sysdeps),) and [w.id for w in plan.warnings].count("library-dependency-preloaded") == 1
    assert plan.c_api_version is not None  # the second child load reached GetPjrtApi


def test_a_missing_system_library_is_named_with_its_chain_and_package(tmp_path: Path, build: Path) -> None:
    """The PJRT library needs libmid.so (in the sysroot's ROCm lib), which needs libdw.so.1 that the machine lacks:
    the evidence names the chain, and on Ubuntu the fix is the apt package (_policy/system_packages.json)."""
    stubs = tmp_path / "stubs"  # libdw.so.1 exists only to link against; the machine never gets it
    compile_shared(
        stubs, "dw", "int dwarf_begin(void) { return 0; }\n", flags=["-Wl,-soname,libdw.so.1"], output_name="libdw.so.1"
    )
    mid = compile_shared(
        tmp_path / "mid",
        "mid",
        "int dwarf_begin(void);\nint mid(void) { return dwarf_begin(); }\n",
        libs=[":libdw.so.1"],
        link_dirs=[stubs],
        flags=["-Wl,--no-as-needed"],
    )
    library = pjrt_library_with_code_for(
        tmp_path / "lib", bundle_for(LIBRARY_TARGETS), hip_dir=build / "hip", needs=[mid.name], link_dirs=[mid.parent]
    )
    root = make_sysroot(tmp_path / "root")
    home = add_rocm(root, build, "7.2.0")
    shutil.copy(mid, home / "lib" / mid.name)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n')
    missing = finding(diagnose({}, root, library), "library-dependency-missing")
    assert "libdw.so.1" in missing.summary
    assert "libdw.so.1, needed by libmid.so, needed by the PJRT library" in missing.evidence
    assert missing.fix == "install the system package(s) that provide them: sudo apt-get install libdw1"
    (root / "etc" / "os-release").write_text('ID="rocky"\nID_LIKE="rhel centos fedora"\n')
    assert finding(diagnose({}, root, library), "library-dependency-missing").fix.endswith(
        "sudo dnf install elfutils-libs"
    )


def test_without_rocm_its_consequences_fold_into_one_line(tmp_path: Path, build: Path) -> None:
    from jax_rocm7_plugin._doctor.render import render_text

    report = diagnose({}, make_sysroot(tmp_path / "root"), library_of(build))
    assert ids(report)[:2] == ["rocm-not-found", "library-dependency-missing"]  # --json keeps both
    text = render_text(report)
    assert "library-dependency-missing" not in text
    assert "      also missing for this reason: 1 library the PJRT library needs (--verbose lists them)" in text
    assert "library-dependency-missing" in render_text(report, verbose=True)


def test_when_preloading_does_not_help_the_loader_says_so_once(tmp_path: Path, build: Path) -> None:
    """The library needs the sysdeps library and a HIP runtime only the sysroot has (its RUNPATH is /opt/rocm/lib,
    which this host lacks): the second child load, with the sysdeps library first, fails too. The loader's checks
    name the preloading once and then the failed load's cause."""
    from jax_rocm7_plugin._pipeline import Facts, checks
    from jax_rocm7_plugin._settings import read_settings

    numa = sysdeps_numa(tmp_path / "sysdeps")
    library = pjrt_library_with_code_for(
        tmp_path / "lib", bundle_for(LIBRARY_TARGETS), hip_dir=build / "hip", needs=[numa.name], link_dirs=[numa.parent]
    )
    root = make_sysroot(tmp_path / "root")
    add_rocm(root, build, "7.14.0", sysdeps=[numa])
    environ = {"JAX_ROCM_PJRT_LIBRARY": str(library), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    facts = Facts(read_settings({**environ, "JAX_ROCM_SYSROOT": str(root)}))
    found = [f.id for f in checks(facts, thorough=False)]
    assert found.count("library-dependency-preloaded") == 1, found
    assert "library-dependency-missing" in found and facts.runtime is not None and facts.runtime.preload == ()
