"""One pipeline for loader and doctor: for every finding id, the loader's blocking finding is the
doctor's first error, on a synthetic machine (a sysroot) made to produce exactly that id."""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from jax_rocm7_plugin._findings import FINDING_IDS, HEALTH_IDS, Finding
from jax_rocm7_plugin._pipeline import FACT_STEPS, STEPS, Facts, checks
from jax_rocm7_plugin._settings import PJRT_LIBRARY, read_settings
from tests.support.inprocess import doctor, loader_plan
from tests.support.native import (
    HIP_RUNTIME,
    compile_shared,
    fake_hip_runtime,
    fake_pjrt_library,
    library_needing_missing_dependency,
)
from tests.support.sysroots import Gpu, add_rocm, library_of, make_sysroot

GFX906 = 90006


class Case:
    """A machine, variables and a library that make the checks end in one finding id."""

    def __init__(self, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path, self.build, self.monkeypatch = tmp_path, build, monkeypatch
        self.root = tmp_path / "root"
        self.environ: dict[str, str] = {}
        self.library: Path | None = library_of(build)

    def gpu_machine(self, gpus: list[Gpu] | None = None, **options: bool) -> Case:
        make_sysroot(self.root, gpus, **options)
        add_rocm(self.root, self.build)
        return self


def _no_driver(case: Case) -> None:
    case.root.mkdir()


def _slow_probe(case: Case) -> None:
    case.gpu_machine()
    release = threading.Event()

    def hung(root: Path, groups_added: tuple[int, ...] = ()) -> None:
        release.wait(5)  # a wedged sysfs read, standing in for a hung driver

    case.monkeypatch.setattr("jax_rocm7_plugin._safe_io.DEADLINE_SECONDS", 0.2)
    case.monkeypatch.setattr("jax_rocm7_plugin._machine.devices.probe_machine", hung)


def _fake_pjrt_wheel(case: Case, version: str) -> None:
    """A jax_rocm7_pjrt locator package (test fixture) whose build_info says `version`."""
    package = case.tmp_path / "site" / "jax_rocm7_pjrt"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        f"def library_path():\n    return {str(library_of(case.build))!r}\n"
        f"def build_info():\n    return {{'version': {version!r}}}\n"
    )
    # Imported here and put in sys.modules through monkeypatch, so it is gone again after the test
    # (a module left there would stand in for the pjrt wheel in later tests of this process).
    spec = importlib.util.spec_from_file_location(package.name, package / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case.monkeypatch.setitem(sys.modules, package.name, module)
    case.library = None


def installed_elsewhere(case: Case, version: str) -> Path:
    """A built jax-rocm7-plugin `version` in a site folder after this tree on sys.path (test fixture: its metadata
    folder and package), as a venv holds it while Python runs from a checkout."""
    from jax_rocm7_plugin._machine import packages

    site = case.tmp_path / "installed-site"
    (site / f"jax_rocm7_plugin-{version}.dist-info").mkdir(parents=True)
    (site / "jax_rocm7_plugin").mkdir()
    (site / "jax_rocm7_plugin" / "version.py").write_text(f"JAX_RELEASE = __version__ = {version!r}\n")
    case.monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    packages._scan.cache_clear()
    return site / "jax_rocm7_plugin"


def _crashing_library(case: Case) -> None:
    case.gpu_machine()
    source = "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n"
    source += "void* GetPjrtApi(void) { return 0; }\n"
    case.library = compile_shared(case.tmp_path / "lib", "dies", source)


def _rocm6(case: Case) -> None:
    make_sysroot(case.root)
    hip6 = fake_hip_runtime(case.tmp_path / "hip6", devices=1, name="libamdhip64.so.6")
    (case.root / "opt" / "rocm" / "lib").mkdir(parents=True)
    (case.root / "opt" / "rocm" / "lib" / hip6.name).write_bytes(hip6.read_bytes())


def _nvidia(case: Case) -> None:
    """An NVIDIA host with both pairs installed: NVIDIA's driver banner, no amdgpu, no KFD."""
    make_sysroot(case.root, topology=False, amdgpu_module=False, kfd=False, render_nodes=False)
    (case.root / "proc" / "driver" / "nvidia").mkdir(parents=True)
    banner = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"
    (case.root / "proc" / "driver" / "nvidia" / "version").write_text(banner)


# Each blocking id: how to make a machine where it is the first error.
SCENARIOS: dict[str, Callable[[Case], object]] = {
    "amdgpu-driver-missing": _no_driver,
    "other-vendor-gpu": _nvidia,
    "no-gpu-nodes": lambda c: c.gpu_machine([]),
    "kfd-device-missing": lambda c: c.gpu_machine(kfd=False),
    "render-node-missing": lambda c: c.gpu_machine(render_nodes=False),
    "machine-probe-timeout": _slow_probe,
    "environment-variable-invalid": lambda c: (
        c.gpu_machine(),
        c.environ.update(JAX_ROCM_PJRT_LIBRARY="relative/lib.so"),
        setattr(c, "library", None),
    ),
    "jax-platforms-excludes-rocm": lambda c: (c.gpu_machine(), c.environ.update(JAX_PLATFORMS="cpu")),
    "visible-devices-hide-all": lambda c: (c.gpu_machine(), c.environ.update(ROCR_VISIBLE_DEVICES="5")),
    "pjrt-wheel-missing": lambda c: (c.gpu_machine(), setattr(c, "library", None)),
    "pjrt-library-invalid": lambda c: (c.gpu_machine(), setattr(c, "library", c.build / "hip" / HIP_RUNTIME)),
    "jaxlib-missing": lambda c: (
        c.gpu_machine(),
        c.monkeypatch.setattr("jax_rocm7_plugin._machine.jaxlib_version.jaxlib_version", lambda: None),
    ),
    "version-skew-jaxlib": lambda c: (
        c.gpu_machine(),
        c.monkeypatch.setattr("jax_rocm7_plugin._machine.jaxlib_version.jaxlib_version", lambda: "0.9.0"),
    ),
    "version-skew-pjrt": lambda c: (c.gpu_machine(), _fake_pjrt_wheel(c, "0.9.0")),
    # Run from a checkout of release 0.10.2 in a venv with jax 0.12.0 and our 0.12.0 wheels.
    "plugin-source-tree-shadows-install": lambda c: (
        c.gpu_machine(),
        installed_elsewhere(c, "0.12.0"),
        c.monkeypatch.setattr("jax_rocm7_plugin._machine.jaxlib_version.jaxlib_version", lambda: "0.12.0"),
    ),
    "xla-client-env-invalid": lambda c: (c.gpu_machine(), c.environ.update(XLA_PYTHON_CLIENT_PREALLOCATE="FALSE")),
    "gpu-arch-not-in-library": lambda c: c.gpu_machine([Gpu(GFX906)]),
    "hsa-override-gfx-version": lambda c: (c.gpu_machine(), c.environ.update(HSA_OVERRIDE_GFX_VERSION="11.0")),
    "rocm-not-found": lambda c: make_sysroot(c.root),
    "rocm-major-mismatch": _rocm6,
    "library-dependency-missing": lambda c: (
        c.gpu_machine(),
        setattr(c, "library", library_needing_missing_dependency(c.tmp_path / "lib")),
    ),
    "pjrt-library-crashed": _crashing_library,
    "pjrt-c-api-mismatch": lambda c: (c.gpu_machine(), setattr(c, "library", fake_pjrt_library(c.tmp_path, 1, 0))),
}

# Ids that are not the loader's to give, each with why.
NOT_FROM_THE_LOADER_CHECKS = {
    "conflicting-rocm-plugin": "doctor only: other plugins are listed after the checks (the loader leaves a 'rocm' "
    "another plugin registered alone)",
    "hip-no-device": "doctor --deep only: the HIP runtime is started in a child",
    "hip-probe-failed": "doctor --deep only",
    "first-jit-failed": "doctor --deep only: a jitted program runs in a child (test_first_jit.py)",
    "math-library-gpu-unsupported": "doctor only: the math libraries' kernel files (test_gpu_kernels.py)",
    "compile-temp-dir-unusable": "doctor only: the folder XLA compiles GPU kernels in (test_temp_dir.py)",
    "kernel-feature-missing": "doctor only: the kernel's build configuration (test_machine_sources.py)",
    "kernel-config-unseen": "doctor only: a reader's own path to the kernel's configuration (test_machine_sources.py)",
    "module-option-ignored": "doctor only: the module options the configuration names (test_machine_sources.py)",
    "module-option-not-in-effect": "doctor only: the module parameters in effect (test_machine_sources.py)",
    "python-module-provided-twice": "doctor only: the Python environment's distributions (test_machine_sources.py)",
    "runtime-provided-twice": "doctor only: the runtimes the environment would map (test_machine_sources.py)",
    "write-dir-unusable": "doctor only: the folders the stack writes (test_machine_sources.py)",
    "write-dir-full": "doctor only: the room where the stack writes (test_machine_sources.py)",
    "write-dir-shared": "doctor only: MIOpen's folders after its fallbacks (test_machine_sources.py)",
    "install-file-changed": "doctor only: installs against their manifests (test_machine_sources.py)",
    "transport-not-found": "doctor only: RCCL's network, judged from the fabric's files (test_transport.py)",
    "transport-slower-than-fabric": "doctor only: RCCL's network against the fabric (test_transport.py)",
    "transport-setting-against-guide": "doctor only: the sites' guides for a fabric (test_transport.py)",
    "runtime-library-missing": "doctor only: libraries the runtime opens by name (test_opened_libraries.py)",
    "rocm-client-failed": "the loader's, when the client fails to start in a multi-process job (test_job_check.py)",
    "loader-internal-error": "raised by an unforeseen exception, not by a check",
    "doctor-internal-error": "raised by an unforeseen exception, not by a check",
    "plugin-install-damaged": "raised by the entry module when our package cannot be imported (test_hostile.py)",
    # Same step and constructor as render-node-missing and kfd-device-missing; they need a user who
    # cannot open files (tests run as root here): tests/integration/test_machine.py forks as nobody.
    "kernel-unsupported": "doctor only: /proc/version against _policy/linux_kernels.json (test_remedies.py)",
    "rocm-installs-mixed": "doctor only: which install each library of the dependency walk comes from "
    "(test_remedies.py)",
    "kfd-permission-denied": "needs an unprivileged user (test_machine.py)",
    "render-node-permission-denied": "needs an unprivileged user (test_machine.py)",
}
# Ids that never block: the loader prints them (on success) as warnings; they are no first error.
NEVER_BLOCKING = {
    "wsl-detected",
    "rocm-path-mismatch",
    "cuda-plugin-present",
    "cuda-visible-devices-set",
    "shm-too-small",
    "device-bitcode-missing",
    "custom-calls-unavailable",
    "extension-module-unavailable",
    "apu-vram-carveout-small",
    "visible-devices-index-invalid",
    "rocm-older-than-library",
    "library-dependency-preloaded",
    "known-issue",  # the doctor's, from the pipeline's facts after the checks (test_known_issues.py)
    *HEALTH_IDS,  # the doctor's, from the node's health files (test_node_health.py)
}


def test_every_id_is_classified() -> None:
    classified = [*SCENARIOS, *NOT_FROM_THE_LOADER_CHECKS, *NEVER_BLOCKING]
    assert sorted(classified) == sorted(FINDING_IDS)


@pytest.mark.parametrize("finding_id", sorted(SCENARIOS))
def test_the_loaders_warning_is_the_doctors_first_error(
    finding_id: str, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = Case(tmp_path, build, monkeypatch)
    SCENARIOS[finding_id](case)
    outcome = loader_plan(case.environ, case.root, case.library)
    report = doctor(case.environ, case.root, case.library)
    first_error = next((f for f in report.findings if f.blocks_rocm), None)
    assert isinstance(outcome, Finding), outcome
    assert outcome.id == finding_id, outcome
    assert first_error is not None
    assert (outcome.id, outcome.summary, outcome.fix) == (first_error.id, first_error.summary, first_error.fix)


def _walk(facts: Facts, *, thorough: bool) -> list[tuple[str, dict[str, object]]]:
    """(step, fields) at every finding the checks yield, and once more when they end."""
    seen = []
    for _ in checks(facts, thorough=thorough):
        seen.append((facts.step, {name: getattr(facts, name) for name in FACT_STEPS}))
    seen.append((facts.step, {name: getattr(facts, name) for name in FACT_STEPS}))
    return seen


@pytest.mark.parametrize("thorough", [False, True], ids=["loader", "doctor"])
@pytest.mark.parametrize("scenario", ["healthy", *sorted(SCENARIOS)])
def test_what_each_step_learned_is_set_when_its_step_begins_and_final_when_the_next_one_does(
    scenario: str, thorough: bool, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Facts contract (_pipeline.py): fields of steps not begun are None; fields of finished steps
    no longer change; a run that is not cut short reaches the last step."""
    case = Case(tmp_path, build, monkeypatch)
    if scenario == "healthy":
        case.gpu_machine()
    else:
        SCENARIOS[scenario](case)
    environ = {**case.environ, **({PJRT_LIBRARY: str(case.library)} if case.library is not None else {})}
    facts = Facts(read_settings(environ, sysroot=case.root))
    seen = _walk(facts, thorough=thorough)
    final = seen[-1][1]
    steps = [STEPS.index(step) for step, _ in seen]
    assert steps == sorted(steps), "steps only move forward"
    for step, fields in seen:
        for name, value in fields.items():
            owner = STEPS.index(FACT_STEPS[name])
            if owner > STEPS.index(step):
                assert value is None, f"{name} set before step {FACT_STEPS[name]} began (now in {step})"
            elif owner < STEPS.index(step):
                assert value is final[name], f"{name} changed after step {FACT_STEPS[name]} ended (now in {step})"
    assert facts.step == STEPS[-1], "the checks end at their last step unless the settings stop them"
    assert final["view"] is not None and final["machine"] is not None
    if final["library"] is not None and final["library_targets"] is not None:
        assert final["coverage"] is not None  # the doctor reads coverage from here, not anew
