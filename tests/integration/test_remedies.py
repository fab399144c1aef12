"""The invariants of a working machine, each on a machine that breaks it and on the nearest healthy one, and the
doctor's proof of its own fix: it diagnoses again with the fix made, and the fix must clear what it was for.

Machines are synthetic sysroots (tests/support/fleet.py builds them from the documented formats; test fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.proof import NO_ERROR, prove
from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding, Remedy
from jax_rocm7_plugin._settings import read_settings
from tests.support.fleet import HEALTHY, Host, diagnose_host
from tests.support.sysroots import Gpu

MI300X = HEALTHY[0]
RELEASE, ROCM = "0.12.0", "7.14.0"


def _loud(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.severity != "info"]


def _diagnose(host: Host, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> Report:
    return diagnose_host(host, ROCM, RELEASE, tmp_path, build, monkeypatch)


def assert_proven(finding: Finding) -> None:
    """The finding's fix is a change the doctor made and checked: with it, the doctor finds no error."""
    assert finding.remedy is not None, finding
    assert finding.remedy.checked is True, finding.remedy.outcome
    assert f"(checked: {NO_ERROR})" in finding.checked_fix()


# --- Access by number, not by name -----------------------------------------------------------------------------

# A container whose /etc/group calls gid 109 'render' (Ubuntu's number), on a host whose render group is 110
# (Debian's): the nodes are owned by 110. The user is "in render" by name, and still refused.
CONTAINER_USER = MI300X.but(
    name="MI300X x8 in a container, user in 'render' by name (gid 109), nodes owned by the host's 110",
    container=True,
    uid=1000,
    groups=(1000, 44, 109),
    node_gid=110,
    group_names={"video": 44, "render": 109, "user": 1000},
)


def test_a_group_held_by_name_but_not_by_number_is_named_by_number(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(CONTAINER_USER, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert kfd.severity == "error" and not report.ok
    assert "--group-add 110" in kfd.fix
    assert "--group-add render" not in kfd.fix and "usermod" not in kfd.fix  # names it already holds
    assert any("gid 110 (no name here)" in line for line in kfd.evidence)
    assert any("gid 109 ('render' here)" in line for line in kfd.evidence)
    assert kfd.remedy == Remedy(groups=(110,), checked=True, outcome=NO_ERROR)
    assert_proven(kfd)


def test_the_process_holding_the_nodes_group_by_number_is_healthy(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = CONTAINER_USER.but(groups=(1000, 44, 110))  # docker run --group-add 110
    report = _diagnose(healthy, tmp_path, build, monkeypatch)
    assert report.ok and _loud(report) == [], [f.sentence() for f in _loud(report)]


def test_a_host_user_outside_the_group_is_told_its_name_there(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_user = MI300X.but(uid=1000, groups=(1000,), node_gid=110, group_names={"render": 110, "user": 1000})
    report = _diagnose(host_user, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert "usermod -aG render" in kfd.fix and "110" in kfd.fix
    assert_proven(kfd)


def test_a_group_the_user_namespace_does_not_map_is_no_group_to_add(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In an unprivileged LXC guest the host's render group shows as the overflow id: adding 65534 is no fix."""
    lxc = MI300X.but(uid=1000, groups=(1000, 109), node_gid=65534, group_names={"render": 109, "nogroup": 65534})
    report = _diagnose(lxc, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert "lxc.idmap" in kfd.fix and "--group-add 65534" not in kfd.fix
    assert kfd.remedy is None  # not a change the doctor can make


# --- The proof itself ------------------------------------------------------------------------------------------


def test_a_remedy_that_does_not_clear_its_finding_says_so(tmp_path: Path) -> None:
    settings = read_settings({"HIP_VISIBLE_DEVICES": "7"}, sysroot=tmp_path)
    finding = Finding("visible-devices-hide-all", "error", "s", "f", remedy=Remedy((("HIP_VISIBLE_DEVICES", "0"),)))
    seen: list[str | None] = []

    def rerun(changed: object) -> list[Finding]:
        seen.append(changed.environ.get("HIP_VISIBLE_DEVICES"))  # type: ignore[attr-defined]
        return [finding._replace(remedy=None)]

    (checked,) = prove([finding], settings, rerun)
    assert seen == ["0"]  # the rerun saw the change
    assert checked.remedy is not None and checked.remedy.checked is False
    assert checked.fix == "f"  # the fix's words stay the loader's
    assert "not enough on its own" in checked.checked_fix() and "HIP_VISIBLE_DEVICES=0" in checked.checked_fix()


def test_a_remedy_is_checked_once_for_findings_that_share_it(tmp_path: Path) -> None:
    settings = read_settings({}, sysroot=tmp_path)
    remedy = Remedy((("X", None),))
    findings = [
        Finding("known-issue", "warning", "a", "f", remedy=remedy),
        Finding("shm-too-small", "warning", "b", "g", remedy=remedy),
    ]
    calls = []
    proven = prove(findings, settings, lambda changed: calls.append(changed) or [])
    assert len(calls) == 1 and all(f.remedy is not None and f.remedy.checked for f in proven)


# --- One ROCm per process --------------------------------------------------------------------------------------


def _two_rocms(tmp_path: Path, build: Path, environ: dict[str, str]) -> Report:
    """ROCm 7.14.0 at /opt/rocm (what the 0.12.0 pair serves) and an older 7.2.0 beside it with HIP and rocBLAS
    only; a PJRT library that needs HIP and the three math libraries (link stubs), RUNPATH /opt/rocm/lib."""
    from tests.support.fleet import released_pair
    from tests.support.inprocess import doctor
    from tests.support.native import pjrt_library_with_code_for
    from tests.support.sysroots import (
        MATH_SONAMES,
        PUBLISHED_TARGETS,
        add_math_libraries,
        add_rocm,
        bundle_for,
        make_sysroot,
    )

    root = make_sysroot(tmp_path / "root", list(MI300X.gpus[:1]))
    home = add_rocm(root, build, "7.14.0")
    add_math_libraries(home / "lib", build, ("gfx942",))
    old = add_rocm(root, build, "7.2.0", link=False)
    add_math_libraries(old / "lib", build, ("gfx942",), libraries=("rocBLAS",))
    library = pjrt_library_with_code_for(
        tmp_path / "lib",
        bundle_for(list(PUBLISHED_TARGETS)),
        hip_dir=build / "hip",
        needs=tuple(MATH_SONAMES.values()),
        link_dirs=(build / "rocm-libs",),
    )
    with pytest.MonkeyPatch.context() as patch, released_pair(RELEASE, patch):
        return doctor(environ, root, library)


def test_an_old_rocm_first_on_ld_library_path_mixes_two_installs(tmp_path: Path, build: Path) -> None:
    report = _two_rocms(tmp_path, build, {"LD_LIBRARY_PATH": "/opt/rocm-7.2.0/lib"})
    mixed = next(f for f in report.findings if f.id == "rocm-installs-mixed")
    assert mixed.severity == "error" and not report.ok
    assert "ROCm 7.14.0-56 and 7.2.0-56" in mixed.summary
    assert any(
        line.startswith("/opt/rocm-7.2.0 (7.2.0-56): libamdhip64.so.7, librocblas.so.5") for line in mixed.evidence
    )
    assert "take /opt/rocm-7.2.0/lib off LD_LIBRARY_PATH (unset LD_LIBRARY_PATH)" in mixed.fix
    assert mixed.remedy is not None and mixed.remedy.environment == (("LD_LIBRARY_PATH", None),)
    assert_proven(mixed)


def test_two_installs_side_by_side_are_one_rocm_per_process(tmp_path: Path, build: Path) -> None:
    """The nearest healthy machine: the old ROCm is still installed, but nothing points the loader at it."""
    report = _two_rocms(tmp_path, build, {})
    assert "rocm-installs-mixed" not in [f.id for f in report.findings]
    assert report.ok, [f.sentence() for f in _loud(report)]


# --- Every GPU the process uses is served, or hidden -----------------------------------------------------------

GIB = 1024**3
# A Ryzen 7000 desktop: an RX 7900 XTX and the CPU's Raphael iGPU (gfx1036, 512 MiB), which AMD's math libraries
# do not serve (ggml-org/llama.cpp#8618, ROCm/TheRock#5543: HIP_VISIBLE_DEVICES keeping the discrete GPU).
DESKTOP = Host(
    "RX 7900 XTX + Raphael iGPU",
    (
        Gpu(110000, drm_render_minor=128, device_id=0x744C, vram_bytes=24 * GIB),
        Gpu(100306, drm_render_minor=129, device_id=0x164E, vram_bytes=GIB // 2, simd_count=4),
    ),
    system_bytes=64 * GIB,
)


def test_an_unserved_igpu_beside_a_discrete_gpu_is_hidden_by_value(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(DESKTOP, tmp_path, build, monkeypatch)
    unserved = [f for f in report.findings if f.id == "math-library-gpu-unsupported" and f.severity == "error"]
    assert unserved and not report.ok
    for finding in unserved:
        assert "gfx1036" in finding.summary
        assert (
            finding.fix.startswith("hide GPU 1 (gfx1036")
            and "keep GPU 0 (gfx1100): HIP_VISIBLE_DEVICES=0" in finding.fix
        )
        assert_proven(finding)


def test_the_igpu_once_hidden_gets_no_finding_at_all(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(DESKTOP.but(environ={"HIP_VISIBLE_DEVICES": "0"}), tmp_path, build, monkeypatch)
    assert report.ok and _loud(report) == [], [f.sentence() for f in _loud(report)]
    assert not any("gfx1036" in f.summary or "KFD node 2" in " ".join(f.evidence) for f in report.findings)


def test_no_gpu_served_is_not_fixed_by_hiding(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the iGPU alone there is nothing to keep: the fix is a ROCm that serves it, and no remedy is made up."""
    alone = DESKTOP.but(gpus=DESKTOP.gpus[1:])
    report = _diagnose(alone, tmp_path, build, monkeypatch)
    unserved = [f for f in report.findings if f.id == "math-library-gpu-unsupported" and f.severity == "error"]
    assert unserved and all(f.remedy is None and "HIP_VISIBLE_DEVICES" not in f.fix for f in unserved)


# --- A build for the right GPU family ---------------------------------------------------------------------------


def test_a_gpu_outside_the_family_build_is_named_with_the_build_of_the_same_release(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strix Halo on TheRock's gfx94X wheels (ROCm/TheRock#4578's machine): the fix is the gfx1151 build of the
    installed release (7.14.0: AMD's multi-arch index with the device extra), not another ROCm release."""
    strix = Host(
        "Strix Halo on TheRock's gfx94X-dcgpu wheels",
        (Gpu(110501, drm_render_minor=128, device_id=0x1586, vram_bytes=96 * GIB),),
        layout="pip",
        pip_family="gfx94X_dcgpu",
        kernels=("gfx942",),
        system_bytes=128 * GIB,
    )
    report = _diagnose(strix, tmp_path, build, monkeypatch)
    rocblas = next(f for f in report.findings if f.id == "math-library-gpu-unsupported" and "rocBLAS" in f.summary)
    expected = (
        'pip install --index-url https://repo.amd.com/rocm/whl-multi-arch/ "rocm[libraries,device-gfx1151]==7.14.0"'
    )
    assert "the same release, ROCm 7.14.0, for gfx1151" in rocblas.fix and expected in rocblas.fix
    assert "use a ROCm release" not in rocblas.fix


def test_the_family_builds_of_the_per_family_releases() -> None:
    from jax_rocm7_plugin._policy.rocm_families import family_of, install_command

    assert family_of("gfx1101", "7.11.1") == "gfx110X-all" and family_of("gfx1101", "7.10.0") == "gfx110X-dgpu"
    assert family_of("gfx1103", "7.10.0") is None  # gfx110X-dgpu did not carry the iGPU
    assert install_command("gfx90a", "7.12.0") == (
        'pip install --index-url https://repo.amd.com/rocm/whl/gfx90a/ "rocm[libraries,devel]==7.12.0"'
    )


# --- Every variable the stack reads has a valid value ----------------------------------------------------------

# The host with a network interface and an RDMA device in sysfs (their documented files: an interface's folder under
# /sys/class/net with its operstate; an RDMA device's ports/<n>/state), so values naming them are checked.
NETWORKED = MI300X.but(
    files={
        "/sys/class/net/eth0/operstate": "up\n",
        "/sys/class/net/lo/operstate": "unknown\n",
        "/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
        "/sys/class/infiniband/mlx5_0/ports/1/gids/0": "fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4d\n",
        "/sys/class/infiniband/mlx5_0/ports/1/gids/3": "0000:0000:0000:0000:0000:0000:0000:0000\n",
    }
)


# Values misread, from the curated table (stack_variables.json, whose entries win over generated ones).
CURATED_MISREADS = [
    ("XLA_FLAGS", "-\u2013xla_gpu_autotune_level=0", "error", "--xla_gpu_autotune_level=0"),  # jax-ml/jax#13148
    ("XLA_FLAGS", " ", "error", None),  # taken for a file name
    ("NCCL_IB_DISABLE", "yes", "warning", "1"),  # read as 0: InfiniBand stays on
    ("NCCL_P2P_LEVEL", "pxb", "warning", "PXB"),  # matched exactly
    ("JAX_ENABLE_X64", "", "error", None),  # ValueError at import jax
    ("ROCBLAS_TENSILE_LIBPATH", "", "error", None),  # the first matmul aborts
    ("ROCPROFILER_QUEUE_INTERPOSITION", "", "error", None),  # rocprofiler's empty boolean ends the process
    ("NCCL_SOCKET_IFNAME", "ib9", "warning", "eth0"),  # no such interface (an error in a job): the ones here
    ("NCCL_IB_HCA", "mlx5_0:2", "warning", "mlx5_0"),  # the device has port 1 only: the devices here
    ("NCCL_IB_GID_INDEX", "3", "warning", None),  # the port's GID 3 is zeros (unused): RCCL would take it as is
    ("NCCL_IB_GID_INDEX", "7", "warning", None),  # the port has no GID 7
]
# Values misread, judged only by a rule of the table generated from the readers' sources
# (stack_variables_generated.json): none of these names is curated (test_generated_rows_are_judged_by_generated_rules).
GENERATED_MISREADS = [
    ("ROCPROFILER_LIBRARY_CTOR", "", "error", None),  # rocprofiler's empty boolean ends the process
    ("MIOPEN_DEBUG_CONV_DIRECT", "", "error", None),  # MIOpen throws on every read
    ("GPU_FORCE_BLIT_COPY_SIZE", "lots", "warning", None),  # HIP's atoi: 0
    ("HIP_MEM_POOL_SUPPORT", "yes", "warning", "1"),  # HIP's bool: only true or a number
    ("NCCL_MIN_NCHANNELS", "abc", "warning", None),  # RCCL's strtoll: 0, not its default
    ("JAX_TRACEBACK_FILTERING", "Auto", "error", "auto"),  # jax's enum: ValueError at import
    ("OFI_NCCL_USE_IPV6_TCP", "yes", "error", None),  # aws-ofi-nccl's bool: the plugin does not start
    ("OFI_NCCL_CQ_SIZE", "12k", "error", None),  # aws-ofi-nccl's number: likewise
    ("OFI_NCCL_PROTOCOL", "rdmaa", "error", None),  # aws-ofi-nccl's enum (SENDRECV, RDMA in any case)
    # Typed by the parsing call their value reaches (value_flows: strcmp against "0", sscanf, atoi).
    ("HSA_DISABLE_CACHE", "false", "warning", "0"),  # libhsakmt: strcmp(value, "0"): "false" disables the cache
    ("HSA_SVM_GUARD_PAGES", "two", "warning", None),  # sscanf("%u") fails: its default stays
    ("HSA_ZFB", "on", "warning", None),  # atoi: 0
]


def test_generated_rows_are_judged_by_generated_rules() -> None:
    import json

    from jax_rocm7_plugin._policy import stack_variables

    folder = Path(stack_variables.__file__).parent
    generated = json.loads((folder / "stack_variables_generated.json").read_text(encoding="utf-8"))
    curated = json.loads((folder / "stack_variables.json").read_text(encoding="utf-8"))
    curated_names = {v["name"] for v in curated["variables"]}
    judged = {v["name"] for v in generated["variables"] if v["rule"] != "read"}
    names = {name for name, *_ in GENERATED_MISREADS}
    assert names <= judged and not names & curated_names, (names - judged, names & curated_names)


@pytest.mark.parametrize(("variable", "value", "severity", "corrected"), CURATED_MISREADS + GENERATED_MISREADS)
def test_a_value_its_reader_misreads_is_named_with_the_value_that_keeps_what_was_meant(
    variable: str,
    value: str,
    severity: str,
    corrected: str | None,
    tmp_path: Path,
    build: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report = _diagnose(NETWORKED.but(environ={variable: value}), tmp_path, build, monkeypatch)
    (finding,) = [f for f in report.findings if f.id == "environment-variable-invalid"]
    assert finding.severity == severity and finding.summary.startswith(f"{variable}={value!r}")
    if corrected is not None:
        assert finding.fix == f"set {variable}={corrected}"
    else:
        assert finding.fix.startswith(f"unset {variable}")
    assert_proven(finding)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("XLA_FLAGS", "--xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer="),
        ("NCCL_IB_DISABLE", "1"),
        ("NCCL_DEBUG", "info"),  # RCCL reads it in any case
        ("JAX_ENABLE_X64", "True"),
        ("XLA_FLAGS", ""),  # empty: nothing to read
        ("ROCPROFILER_QUEUE_INTERPOSITION", "0"),
        ("MIOPEN_DEBUG_CONV_DIRECT", "disabled"),
        ("NCCL_MIN_NCHANNELS", "0x10"),  # strtoll's base 0
        ("NCCL_SOCKET_IFNAME", "eth"),  # a prefix of eth0
        ("NCCL_SOCKET_IFNAME", "^docker,lo"),  # what to leave out
        ("NCCL_IB_HCA", "=mlx5_0:1"),
        ("HSA_ENABLE_SDMA", "0"),
        ("OFI_NCCL_PROTOCOL", "rdma"),  # strcasecmp
        ("NCCL_IB_GID_INDEX", "0"),  # the active port's link-local GID
        ("NCCL_IB_GID_INDEX", "-1"),  # RCCL's own search
        ("HSA_DISABLE_CACHE", "1"),  # strcmp against "0": on
        ("TENSILE_DB", "0x8000"),  # strtol in base 0: hex is a number
        ("HSA_ASYNCEVENTS_THREAD_PRIORITY", "MAX"),  # a word ROCr compares before its strtol
        ("OFI_NCCL_USE_IPV6_TCP", "1"),  # a number, for both plugins
    ],
)
def test_valid_values_are_quiet(
    variable: str, value: str, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(NETWORKED.but(environ={variable: value}), tmp_path, build, monkeypatch)
    assert "environment-variable-invalid" not in [f.id for f in report.findings]
    assert report.ok and _loud(report) == [], [f.sentence() for f in _loud(report)]


# --- A value is judged by the call its reader hands it to (the generated table's flows) -------------------------

# The host with a log folder and a file where a folder is expected; the values below are typed only by the call
# their reader passes them to (fopen for writing, dlmopen, create_directories), not by their names.
WITH_FOLDERS = NETWORKED.but(files={"/var/log/rocm/.keep": "", "/srv/cache": "a file, not a folder\n"})


@pytest.mark.parametrize(
    ("variable", "value", "what"),
    [
        ("AMD_LOG_LEVEL_FILE", "/var/log/hip/hip.log", "whose folder /var/log/hip is not there"),
        ("RCCL_DUMP_ROME_MODEL_FILE", "/var/log/rocm", "which is a folder, not a file"),
        ("HSA_MODEL_LIB", "/opt/model/libffm.so", "which is not there"),
        ("MIOPEN_CUSTOM_CACHE_DIR", "/srv/cache/miopen", "/srv/cache on its way is a file"),
    ],
)
def test_a_value_naming_what_its_call_cannot_use_is_named_with_the_call(
    variable: str, value: str, what: str, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(WITH_FOLDERS.but(environ={variable: value}), tmp_path, build, monkeypatch)
    (finding,) = [f for f in report.findings if f.id == "environment-variable-invalid"]
    assert finding.severity == "warning" and what in finding.summary, finding.summary
    assert any(e.startswith("where ") and "#L" in e for e in finding.evidence), finding.evidence
    assert finding.fix.startswith(f"unset {variable}")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AMD_LOG_LEVEL_FILE", "/var/log/rocm/hip.log"),  # its folder is there
        ("MIOPEN_CUSTOM_CACHE_DIR", "/home/user/.cache/miopen"),  # made with its parents
        ("MIOPEN_CUSTOM_CACHE_DIR", "~/.cache/miopen"),  # MIOpen expands ~: not judged here
        ("HSA_TOOLS_LIB", "libnothing.so"),  # split into names by ROCr: which part is loaded is ROCr's to say
    ],
)
def test_a_value_its_call_can_use_is_quiet(
    variable: str, value: str, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(WITH_FOLDERS.but(environ={variable: value}), tmp_path, build, monkeypatch)
    assert "environment-variable-invalid" not in [f.id for f in report.findings], [
        f.sentence() for f in report.findings
    ]


def test_a_value_on_a_file_system_that_does_not_answer_is_named_in_time(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value naming a path on a stale network mount: the look-up waits as the mount does (here, a look-up that
    sleeps stands in for it); the doctor names the value after its deadline instead of waiting."""
    import time

    from jax_rocm7_plugin._doctor.invariants import NAMED_SECONDS
    from jax_rocm7_plugin._machine import named_things

    monkeypatch.setattr(named_things, "missing", lambda *arguments: time.sleep(60))
    started = time.monotonic()
    report = _diagnose(WITH_FOLDERS.but(environ={"AMD_LOG_LEVEL_FILE": "/nfs/stale/hip.log"}), tmp_path, build,
                       monkeypatch)  # fmt: skip
    assert time.monotonic() - started < NAMED_SECONDS + 15
    (finding,) = [f for f in report.findings if f.id == "environment-variable-invalid"]
    assert f"did not answer within {NAMED_SECONDS:g} s" in finding.summary


# --- The kernel supports this GPU --------------------------------------------------------------------------------

STRIX = Host(
    "Strix Halo (96 GiB carve-out)",
    (Gpu(110501, drm_render_minor=128, device_id=0x1586, vram_bytes=96 * GIB),),
    system_bytes=128 * GIB,
)


@pytest.mark.parametrize(
    ("release", "finding"),
    [
        ("6.11.0-29-generic", True),  # Ubuntu 24.04's GA kernel
        ("6.14.0-1017-oem", True),  # one OEM build before the fixes
        ("6.14.0-1018-oem", False),  # AMD's first fixed OEM build
        ("6.17.0-19-generic", False),  # the first fixed HWE build
        ("6.17.0-8-generic", True),
        ("6.18.4-arch1-1", False),  # upstream 6.18.4 on any other distribution
        ("6.16.9-200.fc42.x86_64", None),  # a distribution kernel the data cannot judge: not judged
        ("5.14.0-570.el9_6.x86_64", None),
    ],
)
def test_strix_halos_kernel_is_judged_by_its_kind(
    release: str, finding: bool | None, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    banner = f"Linux version {release} (builder@host) (gcc 13.3.0, GNU ld 2.42) #1 SMP PREEMPT_DYNAMIC"
    report = _diagnose(STRIX.but(proc_version=banner), tmp_path, build, monkeypatch)
    found = [f for f in report.findings if f.id == "kernel-unsupported"]
    assert bool(found) == bool(finding), [f.sentence() for f in found]
    if found:
        assert release in found[0].summary and "6.14.0-1018" in found[0].fix and "6.18.4" in found[0].fix


def test_a_kernel_is_judged_only_for_the_gpus_that_need_it(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "Linux version 6.8.0-45-generic (buildd@host) (gcc 13.2.0) #45-Ubuntu SMP PREEMPT_DYNAMIC"
    report = _diagnose(MI300X.but(proc_version=old), tmp_path, build, monkeypatch)
    assert "kernel-unsupported" not in [f.id for f in report.findings]


@pytest.mark.parametrize(
    ("release", "finding"),
    [
        ("5.4.0-150-generic", True),  # Ubuntu 20.04's: older than any ROCm 7 distribution's
        ("5.10.0-28-amd64", True),  # Debian 11's
        ("5.15.0-91-generic", False),  # Ubuntu 22.04's
        ("5.14.0-570.el9_6.x86_64", False),  # RHEL 9.6's
        ("4.18.0-553.el8_10.x86_64", False),  # RHEL 8.10's: backports, not judged
    ],
)
def test_a_kernel_older_than_any_rocm_7_distributions_is_named(
    release: str, finding: bool, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    banner = f"Linux version {release} (builder@host) (gcc 9.4.0) #1 SMP"
    report = _diagnose(MI300X.but(proc_version=banner), tmp_path, build, monkeypatch)
    found = [f for f in report.findings if f.id == "kernel-unsupported"]
    assert bool(found) == finding, [f.sentence() for f in found]
    if found:
        assert "older than any AMD supports ROCm 7 on" in found[0].summary and "5.15" in found[0].fix


# --- A fix never widens access -----------------------------------------------------------------------------------

# A Proxmox LXC guest whose dev entries left /dev/kfd and the render nodes to gid 0 (root): joining root would reach
# the node and every file the root group owns. What repaired such machines was giving the nodes the render group.
ROOT_OWNED = MI300X.but(
    name="MI300X x8, device nodes owned by group root (gid 0), user in video and render",
    uid=1000,
    groups=(1000, 44, 110),
    node_gid=0,
    group_names={"root": 0, "video": 44, "render": 110, "user": 1000},
)


def test_nodes_owned_by_the_root_group_get_the_render_group_not_the_user_root(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _diagnose(ROOT_OWNED, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert "usermod -aG root" not in kfd.fix and "--group-add 0" not in kfd.fix, kfd.fix
    assert "sudo chgrp render /" in kfd.fix and "render (gid 110 here)" in kfd.fix and "gid=" in kfd.fix, kfd.fix
    assert "then add this user to render" not in kfd.fix  # it holds render already
    assert any(line.startswith("root (gid 0): ") for line in kfd.evidence), kfd.evidence
    assert kfd.remedy is None  # a change of the nodes' owner, which the doctor cannot make


def test_nodes_no_group_may_open_get_the_mode_amds_rules_give_never_a_wider_one(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Device nodes left owner-only (0600: a udev rule of the site's, a container's dev entry): the fix is the group
    mode AMD's udev rules give (0660, the render group), held to the access policy like every fix (_diagnose runs
    the doctor through tests/support/inprocess.py)."""
    owner_only = MI300X.but(
        name="MI300X x8, device nodes 0600",
        uid=1000,
        groups=(1000, 110),
        node_gid=110,
        node_mode=0o600,
        group_names={"render": 110, "user": 1000},
    )
    report = _diagnose(owner_only, tmp_path, build, monkeypatch)
    kfd = next(f for f in report.findings if f.id == "kfd-permission-denied")
    assert "mode 600" in kfd.fix and 'MODE="0660"' in kfd.fix and 'GROUP="render"' in kfd.fix, kfd.fix
    assert "0666" not in kfd.fix and "a+rw" not in kfd.fix, kfd.fix
    assert kfd.remedy is None  # a change of the nodes' mode, which the doctor cannot make


@pytest.mark.parametrize(
    ("fix", "widens"),
    [
        ("sudo usermod -aG root $USER", True),
        ("sudo usermod -aG video,docker $USER", True),
        ("docker run --group-add 0 ...", True),
        ("sudo chmod 666 /dev/kfd", True),
        ("sudo chmod a+rw /dev/kfd", True),
        ('SUBSYSTEM=="kfd", MODE="0666"', True),
        ("sudo setenforce 0", True),
        ("docker run --privileged", True),
        ("sudo usermod -aG render $USER and log in again", False),
        ("docker run --group-add 110", False),
        ('SUBSYSTEM=="kfd", GROUP="render", MODE="0660"', False),
    ],
)
def test_the_widening_check_itself(fix: str, widens: bool) -> None:
    from jax_rocm7_plugin._policy.access_policy import widening

    assert (widening(fix) is not None) == widens, widening(fix)


def test_an_xla_flag_the_librarys_xla_does_not_know_is_named_with_the_one_meant(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XLA_FLAGS' names are judged against the flags the library's XLA registers (ROCm's XLA branch of jax 0.10.2,
    read by `build.py variables`): a misspelt one ends the process at backend start."""
    host = MI300X.but(environ={"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_schedular=true"})
    report = diagnose_host(host, "7.2.0", "0.10.2", tmp_path, build, monkeypatch)
    (finding,) = [f for f in report.findings if f.id == "environment-variable-invalid"]
    assert finding.severity == "error" and "Unknown flag(s) in XLA_FLAGS" in finding.summary
    assert finding.fix == "set XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true"
    assert_proven(finding)
    # The same name on a release whose XLA the table did not read is not judged by name.
    quiet = diagnose_host(host, ROCM, RELEASE, tmp_path / "later", build, monkeypatch)
    assert "environment-variable-invalid" not in [f.id for f in quiet.findings]
