"""Every known issue (_policy/known_issues.json) on a machine rebuilt from its thread, and on a control machine
where the cause is removed: the doctor names the entry on the first and not on the second.

Machines are synthetic sysroots (tests/support/sysroots.py: KFD topology, /opt/rocm-<version> with its
.info/version) diagnosed in process with the fake HIP 7 build; the launcher's variables, XLA_FLAGS and the
other installed distributions are set the way the threads describe them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._policy import known_issues
from tests.support.inprocess import doctor as diagnose
from tests.support.sysroots import Gpu, add_rocm, library_of, make_sysroot

GFX90A, GFX906, GFX908, GFX942, GFX950 = 90010, 90006, 90008, 90402, 90500
GFX1103, GFX1150, GFX1151, GFX1152 = 110003, 110500, 110501, 110502
# AMD's variables for 0.10.2 (entry jax-0.10.2-runtime-queue-hang): set on machines about other entries, so
# that each control names nothing at all.
AMD_0_10_2 = {"ROCPROFILER_QUEUE_INTERPOSITION": "0", "DEBUG_HIP_DYNAMIC_QUEUES": "0", "HSA_NO_SCRATCH_RECLAIM": "1"}


@dataclass
class Machine:
    """What a thread describes: the GPUs, the ROCm release, variables, and machine files beyond those."""

    gpus: list[int] = field(default_factory=lambda: [GFX942])
    rocm: str = "7.14.0"
    environ: dict[str, str] = field(default_factory=lambda: dict(AMD_0_10_2))
    wsl: bool = False
    files: dict[str, str] = field(default_factory=dict)  # machine path -> content
    therock_layout: bool = False  # bitcode and LLD under lib/llvm only (TheRock's tarball)
    distributions: tuple[str, ...] = ()  # other distributions installed beside ours
    release: str | None = None  # the library's jax release, where not the checkout's

    def but(self, **changes: object) -> Machine:
        values = {**self.__dict__, **changes}
        if "environ" in changes:
            values["environ"] = {**self.environ, **changes["environ"]}  # type: ignore[dict-item]
        return Machine(**values)

    def without(self, *names: str) -> Machine:
        return Machine(**{**self.__dict__, "environ": {k: v for k, v in self.environ.items() if k not in names}})


# entry id -> (the machine of its thread, the control: the same machine with the cause removed)
CASES: dict[str, tuple[Machine, Machine]] = {
    "jax-0.10.2-runtime-queue-hang": (
        Machine(gpus=[GFX90A], rocm="7.2.3", environ={}),
        Machine(gpus=[GFX90A], rocm="7.2.3", environ={}, release="0.11.2"),
    ),
    "gfx950-init-hang-comgr-namespace": (
        Machine(gpus=[GFX950], rocm="7.2.1"),
        Machine(gpus=[GFX950], rocm="7.2.1", environ={**AMD_0_10_2, "AMD_COMGR_NAMESPACE": "1"}),
    ),
    "rocm-7.2.0-command-buffer-segfault": (Machine(gpus=[GFX90A], rocm="7.2.0"), Machine(gpus=[GFX90A], rocm="7.2.1")),
    "gfx950-while-loop-command-buffer-segfault": (
        Machine(gpus=[GFX950], rocm="7.1.0"),
        Machine(gpus=[GFX950], rocm="7.1.0", environ={**AMD_0_10_2, "XLA_FLAGS": "--xla_gpu_enable_command_buffer="}),
    ),
    "rccl-7.14-multinode-large-message-slow": (
        Machine(environ={**AMD_0_10_2, "SLURM_JOB_NUM_NODES": "4"}),
        Machine(environ={**AMD_0_10_2, "SLURM_JOB_NUM_NODES": "1"}),
    ),
    "rccl-7.1.1-pollara-alltoall-slow": (
        Machine(rocm="7.1.1", environ={**AMD_0_10_2, "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}),
        Machine(rocm="7.2.0", environ={**AMD_0_10_2, "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}),
    ),
    "wsl-dxg-detection-off-before-7.13": (
        Machine(gpus=[], wsl=True, rocm="7.2.3"),
        Machine(gpus=[], wsl=True, rocm="7.13.0"),
    ),
    "rocprofiler-queue-interposition-hang": (
        Machine(environ={"DEBUG_HIP_DYNAMIC_QUEUES": "0", "HSA_NO_SCRATCH_RECLAIM": "1"}, release="0.12.0"),
        Machine(environ={"DEBUG_HIP_DYNAMIC_QUEUES": "0", "HSA_NO_SCRATCH_RECLAIM": "1"}, rocm="7.2.3"),
    ),
    "gfx908-autotuner-invalid-image": (
        Machine(gpus=[GFX906, GFX908], rocm="7.2.0"),
        Machine(gpus=[GFX906, GFX908], rocm="7.2.0", environ={**AMD_0_10_2, "XLA_FLAGS": "--xla_gpu_autotune_level=0"}),
    ),
    "gfx1150-first-queue-hang-7.2": (
        Machine(gpus=[GFX1150], rocm="7.2.1", files={"/sys/module/amdgpu/version": "6.14.4\n"}),
        Machine(gpus=[GFX1150], rocm="7.2.1", files={"/sys/module/amdgpu/version": "6.16.6\n"}),
    ),
    "jax-0.10.2-bitcode-lld-not-found-therock": (
        Machine(therock_layout=True),
        Machine(therock_layout=True, environ={**AMD_0_10_2, "HIP_DEVICE_LIB_PATH": "/opt/rocm/lib/llvm/amdgcn"}),
    ),
    "rocr-intercept-queue-invalid-packet": (Machine(gpus=[GFX90A], rocm="7.1.0"), Machine(gpus=[GFX90A], rocm="7.2.3")),
    "gfx1103-override-to-gfx1100-vgprs": (
        Machine(gpus=[GFX1103], environ={**AMD_0_10_2, "HSA_OVERRIDE_GFX_VERSION": "11.0.0"}),
        Machine(gpus=[GFX1103]),
    ),
    "gfx1151-vgpr-count-crash": (Machine(gpus=[GFX1151], rocm="7.10.0"), Machine(gpus=[GFX1151], rocm="7.11.0")),
    "gc-11.5-mes-firmware-0x83-hang": (
        Machine(gpus=[GFX1151], files={"/sys/class/drm/renderD128/device/fw_version/mes_fw_version": "0x00000083\n"}),
        Machine(gpus=[GFX1151], files={"/sys/class/drm/renderD128/device/fw_version/mes_fw_version": "0x00000080\n"}),
    ),
    "gfx942-d2h-copy-slow-sdma0": (Machine(rocm="7.2.3"), Machine(rocm="7.14.0")),
    "miopen-7.2-conv-segfault": (Machine(gpus=[GFX90A], rocm="7.2.2"), Machine(gpus=[GFX90A], rocm="7.2.3")),
    "rccl-7.2.0-single-gpu-alltoall-hang": (
        Machine(gpus=[GFX90A], rocm="7.2.0", environ={**AMD_0_10_2, "XLA_FLAGS": "--xla_gpu_enable_command_buffer="}),
        Machine(
            gpus=[GFX90A, GFX90A],
            rocm="7.2.0",
            environ={**AMD_0_10_2, "XLA_FLAGS": "--xla_gpu_enable_command_buffer="},
        ),
    ),
    "gfx90a-scratch-reclaim-collective-latency": (
        Machine(gpus=[GFX90A, GFX90A], environ={"ROCPROFILER_QUEUE_INTERPOSITION": "0"}, release="0.12.0"),
        Machine(gpus=[GFX90A], environ={"ROCPROFILER_QUEUE_INTERPOSITION": "0"}, release="0.12.0"),
    ),
    "jaxlib-plugin-list-lacks-rocm10": (Machine(distributions=("jax-rocm10-plugin",)), Machine()),
}
_MES = "/sys/class/drm/renderD128/device/fw_version/mes_fw_version"
# entry id -> the nearest machine its `affects` covers but its sources do not confirm (confirmed.where fails):
# the doctor names it as info, saying where it was seen, and never warns. Safe entries are seen with the
# loader's workaround off (else they are info everywhere).
NEIGHBOURS: dict[str, Machine] = {
    "gfx950-init-hang-comgr-namespace": Machine(gpus=[GFX950], rocm="7.14.0", release="0.12.0"),
    "gfx908-autotuner-invalid-image": Machine(gpus=[GFX908], rocm="7.2.0"),  # AMD could not reproduce it alone
    "gfx90a-scratch-reclaim-collective-latency": Machine(
        gpus=[GFX90A, GFX90A], rocm="7.15.0", environ={"JAX_ROCM_WORKAROUNDS": "0"}, release="0.12.0"
    ),
    "gc-11.5-mes-firmware-0x83-hang": Machine(gpus=[GFX1152], files={_MES: "0x00000083\n"}),  # Krackan: unconfirmed
}
# Other entries a thread's machine also has, by design of the data (the same ROCm release has several bugs).
ALSO: dict[str, set[str]] = {
    "rocm-7.2.0-command-buffer-segfault": {"miopen-7.2-conv-segfault", "rccl-7.2.0-single-gpu-alltoall-hang"},
    "gfx950-init-hang-comgr-namespace": {"miopen-7.2-conv-segfault"},
    "gfx950-while-loop-command-buffer-segfault": {"rocr-intercept-queue-invalid-packet"},
    "rccl-7.1.1-pollara-alltoall-slow": {"rocr-intercept-queue-invalid-packet", "gfx942-d2h-copy-slow-sdma0"},
    "rocprofiler-queue-interposition-hang": set(),
    "gfx908-autotuner-invalid-image": {"miopen-7.2-conv-segfault", "rocm-7.2.0-command-buffer-segfault"},
    "gfx1150-first-queue-hang-7.2": {"miopen-7.2-conv-segfault"},
    "rocr-intercept-queue-invalid-packet": set(),
    "gfx1151-vgpr-count-crash": set(),
    "gfx942-d2h-copy-slow-sdma0": set(),
    "miopen-7.2-conv-segfault": set(),
    "rccl-7.2.0-single-gpu-alltoall-hang": {"miopen-7.2-conv-segfault"},
    "wsl-dxg-detection-off-before-7.13": set(),
}


def build_machine(machine: Machine, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_sysroot(
        tmp_path / "root",
        [Gpu(gfx_target_version=v, drm_render_minor=128 + i) for i, v in enumerate(machine.gpus)],
        topology=not machine.wsl,
        amdgpu_module=not machine.wsl,
        kfd=not machine.wsl,
        dxg=machine.wsl,
    )
    home = add_rocm(root, build, machine.rocm, toolchain=not machine.therock_layout)
    if machine.therock_layout:
        (home / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
        (home / "lib" / "llvm" / "bin").mkdir(parents=True)
    for path, content in machine.files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    if machine.distributions:
        site = tmp_path / "site"
        for name in machine.distributions:
            info = site / f"{name.replace('-', '_')}-0.12.0.dist-info"
            info.mkdir(parents=True)
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.12.0\n")
            (info / "RECORD").write_text("")
        monkeypatch.syspath_prepend(str(site))
    if machine.release is not None:
        monkeypatch.setattr("jax_rocm7_plugin.version.JAX_RELEASE", machine.release)
    return root


def known(report: Report) -> dict[str, Finding]:
    return {f.known_issue: f for f in report.findings if f.known_issue is not None}


Diagnose = Callable[[Machine], Report]


@pytest.fixture
def doctor_on(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> Diagnose:
    count = iter(range(100))

    def run(machine: Machine) -> Report:
        where = tmp_path / str(next(count))
        with monkeypatch.context() as patch:  # sys.path and the release go back after each machine
            root = build_machine(machine, where, build, patch)
            return diagnose(machine.environ, root, library_of(build))

    return run


def test_every_entry_has_a_machine_and_a_control() -> None:
    assert sorted(CASES) == sorted(e.id for e in known_issues.entries())


@pytest.mark.parametrize("entry", sorted(CASES))
def test_the_doctor_names_the_bug_on_its_threads_machine_and_not_on_the_control(
    entry: str, doctor_on: Diagnose
) -> None:
    trigger, control = CASES[entry]
    found = known(doctor_on(trigger))
    assert entry in found, f"{entry} not named; found {sorted(found)}"
    assert set(found) - {entry} <= ALSO.get(entry, set()), sorted(found)
    named = found[entry]
    issue = next(e for e in known_issues.entries() if e.id == entry)
    assert issue.sources[0] in named.summary and issue.title in named.summary
    assert named.severity == ("info" if issue.workaround.safe else issue.severity)
    assert named.to_json()["known_issue"] == entry
    assert entry not in known(doctor_on(control))


def test_every_narrowed_entry_has_an_unconfirmed_neighbour() -> None:
    narrowed = sorted(e.id for e in known_issues.entries() if e.confirmed.where)
    assert sorted(NEIGHBOURS) == narrowed


@pytest.mark.parametrize("entry", sorted(NEIGHBOURS))
def test_where_the_sources_do_not_confirm_it_the_entry_is_info_naming_where_it_was_seen(
    entry: str, doctor_on: Diagnose
) -> None:
    named = known(doctor_on(NEIGHBOURS[entry]))
    assert entry in named, sorted(named)
    issue = next(e for e in known_issues.entries() if e.id == entry)
    assert named[entry].severity == "info" and f"confirmed only {issue.confirmed.seen}" in named[entry].summary


def test_a_firmware_bug_is_named_on_every_sibling_the_sources_confirm(doctor_on: Diagnose) -> None:
    """Keyed on the graphics IP, not the product: Strix Point (gfx1150) carries the same MES firmware."""
    named = known(doctor_on(Machine(gpus=[GFX1150], files={_MES: "0x00000083\n"})))
    assert named["gc-11.5-mes-firmware-0x83-hang"].severity == "warning"
    assert "gfx1150 (graphics IP 11.5.0)" in " ".join(named["gc-11.5-mes-firmware-0x83-hang"].evidence)


def test_the_graphics_ip_comes_from_the_drivers_ip_discovery_where_it_says(doctor_on: Diagnose) -> None:
    """A GPU whose KFD target is overridden in sysfs terms still has its own IP: the driver's word wins."""
    folder = "/sys/class/drm/renderD128/device/ip_discovery/die/0/GC/0/"
    files = {_MES: "0x00000083\n", folder + "major": "11\n", folder + "minor": "5\n", folder + "revision": "1\n"}
    named = known(doctor_on(Machine(gpus=[GFX1152], files=files)))
    assert named["gc-11.5-mes-firmware-0x83-hang"].severity == "warning"


def test_a_safe_workaround_the_user_turned_off_is_a_warning_with_the_variables(doctor_on: Diagnose) -> None:
    machine = Machine(environ={"JAX_ROCM_WORKAROUNDS": "0"})
    named = known(doctor_on(machine))["jax-0.10.2-runtime-queue-hang"]
    assert named.severity == "warning" and "ROCPROFILER_QUEUE_INTERPOSITION=0" in named.fix


def test_a_users_own_value_is_kept_and_the_bug_still_named(doctor_on: Diagnose) -> None:
    machine = Machine(environ={"ROCPROFILER_QUEUE_INTERPOSITION": "1"})
    named = known(doctor_on(machine))["jax-0.10.2-runtime-queue-hang"]
    assert named.severity == "warning" and "the loader sets" not in named.summary


def test_a_workaround_half_set_by_the_user_is_completed_not_warned(doctor_on: Diagnose) -> None:
    """One of the three variables already holds the wanted value: the loader fills in the other two (applied
    whole), so the doctor says what the loader sets, as info, instead of warning."""
    machine = Machine(environ={"ROCPROFILER_QUEUE_INTERPOSITION": "0"})
    named = known(doctor_on(machine))["jax-0.10.2-runtime-queue-hang"]
    assert named.severity == "info", named.sentence()
    assert "the loader sets DEBUG_HIP_DYNAMIC_QUEUES=0, HSA_NO_SCRATCH_RECLAIM=1 " in named.summary


def test_no_known_issues_where_no_gpu_can_be_used(doctor_on: Diagnose) -> None:
    assert known(doctor_on(Machine(gpus=[], rocm="7.2.0", environ={}))) == {}


def test_the_therock_fix_names_the_installs_own_folder(doctor_on: Diagnose) -> None:
    named = known(doctor_on(Machine(therock_layout=True)))["jax-0.10.2-bitcode-lld-not-found-therock"]
    assert "/opt/rocm/lib/llvm/amdgcn/bitcode" in named.fix


# The loader, for real: jax imports this checkout's plugin and registers the stand-in PJRT library under 'rocm' on
# a synthetic GPU machine. A spy on jax's register_plugin (which dlopens the library in-process) records the
# variables at that moment. The checkout serves 0.10.2, whose entry has a safe workaround.
_SPY = """
import json, logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
NAMES = ("ROCPROFILER_QUEUE_INTERPOSITION", "DEBUG_HIP_DYNAMIC_QUEUES", "HSA_NO_SCRATCH_RECLAIM")
before = {name: os.environ.get(name) for name in NAMES}
from jax._src import xla_bridge
at_load = {}
original = xla_bridge.register_plugin
def spy(name, *args, **kwargs):
    if name == "rocm":
        at_load.update({n: os.environ.get(n) for n in NAMES})
    return original(name, *args, **kwargs)
xla_bridge.register_plugin = spy
import jax
platforms = sorted(xla_bridge.backends())
print(json.dumps({"before": before, "at_load": at_load, "platforms": platforms}))
"""


def _loader_run(tmp_path: Path, library: Path, **variables: str) -> tuple[dict[str, dict[str, str | None]], str]:
    import json
    import subprocess
    import sys

    from tests.support.environment import plugin_environment

    root = make_sysroot(tmp_path / "machine")
    environ = plugin_environment(root, library, tmp_path / "cache", **variables)
    done = subprocess.run(
        [sys.executable, "-c", _SPY], env=environ, capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "rocm" in result["platforms"], done.stderr
    return result, done.stderr


def test_the_loader_sets_the_safe_workaround_before_jax_loads_it(tmp_path: Path, standin_library: Path) -> None:
    result, log = _loader_run(tmp_path, standin_library)
    assert result["before"] == dict.fromkeys(result["before"])  # nothing set by the caller
    assert result["at_load"] == {
        "ROCPROFILER_QUEUE_INTERPOSITION": "0",
        "DEBUG_HIP_DYNAMIC_QUEUES": "0",
        "HSA_NO_SCRATCH_RECLAIM": "1",
    }
    said = [line for line in log.splitlines() if "avoiding known issues" in line]
    assert len(said) == 1 and " INFO " in said[0] and "jax-0.10.2-runtime-queue-hang" in said[0], log
    assert " WARNING " not in log.replace("UpdateGlobalProcessInfo", "")


def test_the_loader_keeps_the_users_value_and_sets_nothing_else_of_it(tmp_path: Path, standin_library: Path) -> None:
    result, log = _loader_run(tmp_path, standin_library, ROCPROFILER_QUEUE_INTERPOSITION="1")
    assert result["at_load"] == {
        "ROCPROFILER_QUEUE_INTERPOSITION": "1",
        "DEBUG_HIP_DYNAMIC_QUEUES": None,
        "HSA_NO_SCRATCH_RECLAIM": None,
    }
    assert "avoiding known issues" not in log


def test_the_loader_completes_a_workaround_the_user_began(tmp_path: Path, standin_library: Path) -> None:
    result, log = _loader_run(tmp_path, standin_library, HSA_NO_SCRATCH_RECLAIM="1")
    assert result["at_load"] == {
        "ROCPROFILER_QUEUE_INTERPOSITION": "0",
        "DEBUG_HIP_DYNAMIC_QUEUES": "0",
        "HSA_NO_SCRATCH_RECLAIM": "1",
    }
    said = [line for line in log.splitlines() if "avoiding known issues" in line]
    assert len(said) == 1 and "HSA_NO_SCRATCH_RECLAIM" not in said[0], log  # it set only what it set


def test_the_loader_sets_nothing_when_workarounds_are_off(tmp_path: Path, standin_library: Path) -> None:
    result, log = _loader_run(tmp_path, standin_library, JAX_ROCM_WORKAROUNDS="0")
    assert set(result["at_load"].values()) == {None}
    assert "avoiding known issues" not in log


def test_a_first_jit_that_ran_withdraws_what_it_disproves() -> None:
    """--deep's first jit ran: 'the start hangs' (gfx950's known issue) and 'no bitcode' were predictions, and the
    report rewords them as what was seen instead of contradicting itself."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._doctor.rules import withdrawn_by_first_jit

    hang = catalog.known_issue("gfx950-init-hang-comgr-namespace", "warning", "a hang (src)", "set it", ("GPU gfx950",))
    seen = withdrawn_by_first_jit(hang)
    assert seen.severity == "info" and "did not happen in this run" in seen.summary
    crash = catalog.known_issue("miopen-7.2-conv-segfault", "warning", "a crash (src)", "rebuild", ("ROCm 7.2.2",))
    assert withdrawn_by_first_jit(crash) == crash  # a jitted matmul says nothing about convolutions
    bitcode = catalog.device_bitcode_missing(("no ocml.bc",), "ROCm's device bitcode is not where XLA looks")
    assert (
        withdrawn_by_first_jit(bitcode).severity == "info"
        and "first jit compiled" in withdrawn_by_first_jit(bitcode).summary
    )
