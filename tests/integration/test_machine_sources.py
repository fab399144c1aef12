"""The four invariants over the machine's other sources, each on the healthy fleet's machines (tests/support/fleet.py)
with one source changed as a public failure shows it: a need is met (rule_needs.py), a reference resolves
(rule_references.py), one provider per interface (rule_providers.py), the effective value is judged
(rule_effective.py). Each test fails without its rule; each has a control that stays quiet."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from tests.support.fleet import HEALTHY, SITE, Host, _dist, build_host
from tests.support.inprocess import doctor

EIGHT = HEALTHY[0]  # MI300X x8
ONE = HEALTHY[4]  # MI210 x1
MODULES = "amdgpu 19542016 0 - Live 0x0000000000000000\nttm 110592 1 amdgpu, Live 0x0000000000000000\n"


def _run(host: Host, tmp_path: Path, build: Path, mp: pytest.MonkeyPatch, **environ: str) -> Report:
    root, base, library = build_host(host, "7.14.0", tmp_path, build, mp)
    return doctor({**base, **environ}, root, library)


def _ids(report: Report, *ids: str) -> list[str]:
    return [f.sentence() for f in report.findings if f.id in ids]


# --- a need is met ------------------------------------------------------------------------------------------------

_NO_P2P = "CONFIG_HSA_AMD=y\nCONFIG_HSA_AMD_SVM=y\n# CONFIG_HSA_AMD_P2P is not set\n# CONFIG_PCI_P2PDMA is not set\n"


def test_a_kernel_without_peer_to_peer_is_named_where_the_host_has_gpus_to_share(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    files = {"/proc/sys/kernel/osrelease": "6.12.18\n", "/boot/config-6.12.18": _NO_P2P}
    report = _run(EIGHT.but(files=files), tmp_path / "8", build, mp)
    (finding,) = [f for f in report.findings if f.id == "kernel-feature-missing"]
    assert finding.severity == "warning" and "CONFIG_HSA_AMD_P2P, CONFIG_PCI_P2PDMA" in finding.summary
    assert finding.fix.startswith("boot a kernel built with CONFIG_HSA_AMD_P2P=y CONFIG_PCI_P2PDMA=y")
    assert "8 AMD GPU(s)" in finding.summary and finding.concerns.files == ("/boot/config-6.12.18",)  # type: ignore[union-attr]
    # One GPU and no RDMA: peer-to-peer is no need of this host's.
    assert _ids(_run(ONE.but(files=files), tmp_path / "1", build, mp), "kernel-feature-missing") == []
    # One GPU beside an RDMA NIC: dma-buf and PCIe peer-to-peer to the NIC are, GPU-to-GPU peer-to-peer is not.
    nic = {**files, "/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n"}
    (beside,) = [f for f in _run(ONE.but(files=nic), tmp_path / "nic", build, mp).findings
                 if f.id == "kernel-feature-missing"]  # fmt: skip
    assert "built without CONFIG_PCI_P2PDMA (" in beside.summary and "CONFIG_HSA_AMD_P2P" not in beside.summary
    assert "1 AMD GPU(s) and RDMA devices need" in beside.summary


def test_a_kernel_without_kfd_is_an_error_and_an_unknown_configuration_is_not_judged(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    files = {"/proc/sys/kernel/osrelease": "6.1.0\n", "/usr/lib/modules/6.1.0/config": "# CONFIG_HSA_AMD is not set\n"}
    report = _run(ONE.but(files=files), tmp_path / "a", build, mp)
    errors = [f for f in report.findings if f.id == "kernel-feature-missing" and f.severity == "error"]
    assert len(errors) == 1 and "CONFIG_HSA_AMD (CONFIG_HSA_AMD: KFD" in errors[0].summary
    assert _ids(_run(ONE, tmp_path / "b", build, mp), "kernel-feature-missing") == []  # no configuration to read


def test_a_full_file_system_where_the_stack_writes_is_named(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    from jax_rocm7_plugin._machine import write_dirs

    real = os.statvfs

    class Full:  # stands in for a full file system (none can be made here without privileges)
        def __init__(self, path: str) -> None:
            fs = real(path)
            self.f_flag, self.f_frsize, self.f_bavail = fs.f_flag, 4096, 1000

    (tmp_path / "root-home").mkdir()
    host = ONE.but(files={"/home/user/.keep": ""})
    mp.setattr(write_dirs.os, "statvfs", Full)
    found = _ids(_run(host, tmp_path / "full", build, mp, HOME="/home/user"), "write-dir-full")
    assert any("MIOpen's kernel cache is /home/user/.cache/miopen" in s and "3 MiB free" in s for s in found), found
    mp.setattr(write_dirs.os, "statvfs", real)
    assert _ids(_run(host, tmp_path / "room", build, mp, HOME="/home/user"), "write-dir-full") == []


# --- a reference resolves -----------------------------------------------------------------------------------------


def test_a_module_option_aimed_at_a_module_not_loaded_or_at_no_parameter_does_nothing(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    files = {
        "/proc/cmdline": "ro amdttm.pages_limit=32768000 amdgpu.gtt_size=122880 usbcore.autosuspend=-1\n",
        "/proc/modules": MODULES,
        "/sys/module/ttm/parameters/pages_limit": "16376986\n",
        "/sys/module/amdgpu/parameters/gttsize": "-1\n",
    }
    found = _ids(_run(ONE.but(files=files), tmp_path, build, mp), "module-option-ignored")
    assert len(found) == 2, found
    assert "amdttm.pages_limit=32768000, but the module amdttm is not loaded (ttm is" in found[0]
    assert "set ttm.pages_limit=32768000 instead" in found[0]
    assert "amdgpu has no parameter gtt_size" in found[1]  # a misspelling of gttsize: the kernel ignores it


def test_a_folder_the_stack_writes_in_that_this_user_cannot_is_named_default_or_set(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    user = HEALTHY[15]  # user 1000 in a container, given the nodes' group
    report = _run(user.but(files={"/home/user/.keep": ""}), tmp_path / "a", build, mp, HOME="/home/user")
    found = _ids(report, "write-dir-unusable")  # /home/user is root's (0755): nothing can be created there
    assert any("MIOpen's tuning database is /home/user/.config/miopen (default (MIOPEN_USER_DB_PATH unset))" in s
               for s in found), found  # fmt: skip
    assert all("this process is uid 1000" in s for s in found)
    root = tmp_path / "b"
    report = _run(user, root, build, mp, HOME="/tmp", MIOPEN_USER_DB_PATH="/tmp/db")
    assert _ids(report, "write-dir-unusable") == []  # /tmp is 1777: the control


def test_an_install_that_is_not_what_its_package_installed_is_named_with_the_reinstall_step(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    import base64
    import hashlib

    def sha(text: str) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()

    good, info = "VERSION = '0.12.0'\n", f"{SITE}/jaxlib-0.12.0.dist-info"
    record = (
        f"jaxlib/version.py,sha256={sha(good)},{len(good)}\njaxlib/xla.py,sha256={sha('x')},1\n"
        f"jaxlib/gone.py,sha256={sha('g')},1\njaxlib-0.12.0.dist-info/RECORD,,\n"
    )
    files = {
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: jaxlib\nVersion: 0.12.0\n",
        f"{info}/RECORD": record,
        f"{SITE}/jaxlib/version.py": good,
        f"{SITE}/jaxlib/xla.py": "y",  # one byte, as recorded, but another one: another digest
        "/var/lib/dpkg/info/rocm-core.md5sums": "d41d8cd98f00b204e9800998ecf8427e  opt/rocm/.info/kept\n"
        "0cc175b9c0f1b6a831c399e269772661  opt/rocm/.info/changed\n",
        "/opt/rocm/.info/kept": "",
        "/opt/rocm/.info/changed": "b",
    }
    found = [
        f for f in _run(ONE.but(files=files), tmp_path / "a", build, mp).findings if f.id == "install-file-changed"
    ]
    assert [f.fix for f in found] == [
        "reinstall it: pip install --force-reinstall --no-deps jaxlib==0.12.0",
        "reinstall it: sudo apt-get install --reinstall rocm-core",
    ]
    assert "1 missing, 1 changed" in found[0].summary and f"{SITE}/jaxlib/gone.py" in found[0].summary
    assert found[1].evidence == ("changed: /opt/rocm/.info/changed",)
    files[f"{info}/RECORD"] = f"jaxlib/version.py,sha256={sha(good)},{len(good)}\n"
    files["/var/lib/dpkg/info/rocm-core.md5sums"] = "d41d8cd98f00b204e9800998ecf8427e  opt/rocm/.info/kept\n"
    assert _ids(_run(ONE.but(files=files), tmp_path / "b", build, mp), "install-file-changed") == []


def test_an_rpm_install_is_held_to_its_database_but_files_rpm_did_not_install_or_lets_be_edited(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    """rpm's SQLite database (a stand-in written from its documented format, tests/support/rpmdb.py): a changed
    and a missing file of rocm-core are named with dnf's reinstall; a %config file edited, a %ghost absent and a
    file rpm did not install (nodocs: state 2) are not."""
    from tests.support import rpmdb

    regular, config, ghost = 0o100644, 1, 64
    files = [
        ("/opt/rocm/.info/kept", b"7.0.2\n", regular, 0, 0),
        ("/opt/rocm/.info/changed", b"a\n", regular, 0, 0),
        ("/opt/rocm/.info/gone", b"g\n", regular, 0, 0),
        ("/opt/rocm/etc/edited.conf", b"as shipped\n", regular, config, 0),
        ("/opt/rocm/run/ghost.pid", b"", regular, ghost, 0),
        ("/opt/rocm/share/doc/README", b"docs\n", regular, 0, 2),
        ("/opt/rocm/lib", b"", 0o040755, 0, 0),
    ]
    on_disk = {
        "/etc/os-release": 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="fedora"\n',
        "/opt/rocm/.info/kept": "7.0.2\n",
        "/opt/rocm/.info/changed": "b\n",
        "/opt/rocm/etc/edited.conf": "edited by the site\n",
    }

    def run(folder: str, packages: dict[str, bytes]) -> list[Finding]:
        root, base, library = build_host(ONE.but(files=on_disk), "7.14.0", tmp_path / folder, build, mp)
        rpmdb.write(root / "var/lib/rpm/rpmdb.sqlite", packages)
        return [f for f in doctor(base, root, library).findings if f.id == "install-file-changed"]

    (finding,) = run("a", {"rocm-core": rpmdb.package("rocm-core", "7.0.2-56", files), "bash": b"not read"})
    assert finding.fix == "reinstall it: sudo dnf reinstall rocm-core"
    assert finding.evidence == ("missing: /opt/rocm/.info/gone", "changed: /opt/rocm/.info/changed")
    assert "rpm's rocm-core 7.0.2-56" in finding.summary
    whole = [f for f in files if f[0] not in ("/opt/rocm/.info/changed", "/opt/rocm/.info/gone")]
    assert run("b", {"rocm-core": rpmdb.package("rocm-core", "7.0.2-56", whole)}) == []
    assert run("c", {"rocm-core": b"\x00\x00\xff\xff" * 8}) == []  # a header that is not whole: nothing held


def test_a_damaged_rpm_database_leaves_a_report_in_time(tmp_path: Path, build: Path, mp: pytest.MonkeyPatch) -> None:
    """The loader's hostile rules for rpm's database: garbage, half of one, a 4 GiB hole, a FIFO, a folder, a link
    to itself. Each leaves a report within a few seconds, with nothing held to it."""
    import time

    from tests.support import rpmdb

    whole = tmp_path / "whole.sqlite"
    rpmdb.write(whole, {"rocm-core": rpmdb.package("rocm-core", "7.0.2-1", [("/opt/rocm/x", b"x", 0o100644, 0, 0)])})

    def half(path: Path) -> None:
        path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])

    def sparse(path: Path) -> None:
        with path.open("wb") as handle:
            handle.truncate(4 * 1024**3)

    damages = {
        "garbage": lambda p: p.write_bytes(os.urandom(4096)),
        "half": half,
        "sparse": sparse,
        "fifo": lambda p: os.mkfifo(p),
        "folder": lambda p: p.mkdir(),
        "self-link": lambda p: p.symlink_to(p.name),
    }
    for name, damage in damages.items():
        root, base, library = build_host(ONE, "7.14.0", tmp_path / name, build, mp)
        database = root / "var/lib/rpm/rpmdb.sqlite"
        database.parent.mkdir(parents=True, exist_ok=True)
        damage(database)
        started = time.monotonic()
        report = doctor(base, root, library)
        assert time.monotonic() - started < 20, name
        assert "install-file-changed" not in [f.id for f in report.findings], name


# --- one provider per interface -----------------------------------------------------------------------------------


def test_one_module_from_two_distributions_names_both_and_the_one_to_keep(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    files = {
        **_dist("torch", "2.7.0", ("torch/__init__.py",), ("pytorch-triton-rocm",)),
        **_dist("pytorch-triton-rocm", "3.2.0", ("triton/__init__.py",)),
        **_dist("triton", "3.3.0", ("triton/__init__.py",)),
        **_dist("plugin-a", "1.0", ("jax_plugins/a/__init__.py",)),  # a namespace package: shared, no conflict
        **_dist("plugin-b", "1.0", ("jax_plugins/b/__init__.py",)),
    }
    report = _run(ONE.but(files=files), tmp_path, build, mp)
    (finding,) = [f for f in report.findings if f.id == "python-module-provided-twice"]
    assert "the Python module triton: pytorch-triton-rocm 3.2.0" in finding.summary
    assert "(required by torch)" in finding.summary and "(required by no installed distribution)" in finding.summary
    assert finding.fix == "keep one: pip uninstall triton, then pip install --force-reinstall pytorch-triton-rocm"


def test_two_openmp_runtimes_are_named_with_who_brings_each_and_one_is_not(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    torch = _dist("torch", "2.12", ("torch/lib/libtorch_cpu.so",))
    vendored = f"{SITE}/coacd.libs/libgomp-a34b3233.so.1"
    system = {f"{SITE}/torch/lib/libtorch_cpu.so": ("libgomp.so.1",), "/usr/lib/x86_64-linux-gnu/libgomp.so.1": ()}
    host = ONE.but(
        files={**torch, **_dist("coacd", "1.0", ("coacd.libs/libgomp-a34b3233.so.1",))},
        binaries={**system, vendored: ()},
    )
    (finding,) = [f for f in _run(host, tmp_path / "two", build, mp).findings if f.id == "runtime-provided-twice"]
    assert "two copies of the OpenMP runtime" in finding.summary
    assert f"{SITE}/coacd.libs/libgomp-a34b3233.so.1 (brought by the distribution coacd)" in finding.summary
    assert "/usr/lib/x86_64-linux-gnu/libgomp.so.1 (brought by the distribution torch (torch/lib/libtorch_cpu.so " \
           "needs libgomp.so.1))" in finding.summary  # fmt: skip
    alone = ONE.but(files=torch, binaries=system)
    assert _ids(_run(alone, tmp_path / "one", build, mp), "runtime-provided-twice") == []


# --- the effective value is judged --------------------------------------------------------------------------------


def test_a_module_option_asked_but_not_in_effect_is_named_and_the_kernels_own_spelling_is_not(
    tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    files = {
        "/etc/modprobe.d/amdgpu.conf": "options amdgpu cwsr_enable=0 noretry=1\n",
        "/proc/cmdline": "ro page_reporting.page_reporting_order=11\n",  # clamped by its module, not the stack's
        "/proc/modules": MODULES,
        "/sys/module/amdgpu/parameters/cwsr_enable": "1\n",
        "/sys/module/amdgpu/parameters/noretry": "1\n",
        "/sys/module/page_reporting/parameters/page_reporting_order": "9\n",
    }
    found = _ids(
        _run(ONE.but(files=files), tmp_path, build, mp), "module-option-not-in-effect", "module-option-ignored"
    )
    assert len(found) == 1 and "/etc/modprobe.d/amdgpu.conf sets amdgpu.cwsr_enable=0, but 1 is in effect" in found[0]
    assert "regenerate the initramfs" in found[0]


@pytest.fixture
def mp(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    return monkeypatch


_LUSTRE_HOME = (
    "24 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n"
    "88 24 0:45 / /users rw,relatime - lustre 10.0.0.1@o2ib:/users rw\n"
    "90 24 0:46 / /scratch\\040space rw,relatime - xfs /dev/sdb1 rw\n"
)


@pytest.mark.parametrize(
    ("mounts", "environ", "shared"),
    [
        (_LUSTRE_HOME, {}, True),  # MIOpen's defaults are on Lustre: it takes /tmp, every user's
        (_LUSTRE_HOME.replace("lustre", "ext4"), {}, False),  # a local home: MIOpen keeps its defaults
        (_LUSTRE_HOME, {"MIOPEN_USER_DB_PATH": "/tmp/mine/db", "MIOPEN_CUSTOM_CACHE_DIR": "/tmp/mine/cache"}, False),
        (_LUSTRE_HOME, {"TMPDIR": "/scratch space/someone"}, False),  # MIOpen's temporary folder is the user's own
    ],
)
def test_miopen_leaves_a_network_home_for_the_temporary_folder_every_user_shares(
    mounts: str, environ: dict[str, str], shared: bool, tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    """The effective folder after MIOpen's own fallback (IsNetworkedFilesystem, at the commit machine_needs.json
    cites): /tmp, sticky and writable by all, where MIOpen's files carry no user's name."""
    host = ONE.but(
        uid=1000,
        groups=(1000, 44, 110),
        node_gid=110,
        environ={"HOME": "/users/someone", **environ},
        files={"/proc/self/mountinfo": mounts, "/users/someone/.bashrc": "", "/scratch space/someone/.keep": ""},
    )
    root, base, library = build_host(host, "7.14.0", tmp_path, build, mp)
    os.chown(root / "scratch space/someone", 1000, 1000)
    found = [f for f in doctor({**base, **host.environ}, root, library).findings if f.id == "write-dir-shared"]
    assert bool(found) == shared, [f.sentence() for f in found]
    if shared:
        assert "is on lustre, so MIOpen takes the temporary folder" in found[0].summary
        assert found[0].fix.startswith("set MIOPEN_USER_DB_PATH=/tmp/miopen-1000/db MIOPEN_CUSTOM_CACHE_DIR=")
        assert found[0].remedy is not None and found[0].remedy.checked, found[0].checked_fix()


_AZL = "6.6.64.2-9.azl3"
_AZL_CONFIG = "CONFIG_HSA_AMD=y\nCONFIG_DMABUF_MOVE_NOTIFY=y\nCONFIG_PCI_P2PDMA=y\nCONFIG_HSA_AMD_P2P=y\n"


@pytest.mark.parametrize(
    ("files", "environ", "fix"),
    [
        ({f"/usr/lib/modules/{_AZL}/config": _AZL_CONFIG}, {"NCCL_DMABUF_ENABLE": "1"},
         f"sudo cp /usr/lib/modules/{_AZL}/config /boot/config-{_AZL}"),
        ({f"/usr/lib/modules/{_AZL}/config": _AZL_CONFIG}, {}, None),  # RCCL's default (0): it does not look
        ({f"/boot/config-{_AZL}": _AZL_CONFIG}, {"NCCL_DMABUF_ENABLE": "1"}, None),  # where RCCL reads it
        ({}, {"NCCL_DMABUF_ENABLE": "1"},
         f"install the kernel's configuration as /boot/config-{_AZL} (the distribution's kernel package ships it)"),
    ],
)  # fmt: skip
def test_rccl_reads_the_kernels_configuration_from_one_path_only(
    files: dict[str, str], environ: dict[str, str], fix: str | None, tmp_path: Path, build: Path, mp: pytest.MonkeyPatch
) -> None:
    """RCCL's dma-buf check (rocmwrap.cc at the pinned commit) opens /boot/config-<release> and nothing else; asked
    for by NCCL_DMABUF_ENABLE, judged at its effective value (the generated table's default, 0, where unset)."""
    host = ONE.but(files={"/proc/sys/kernel/osrelease": f"{_AZL}\n", **files})
    found = [f for f in _run(host, tmp_path, build, mp, **environ).findings if f.id == "kernel-config-unseen"]
    assert [f.fix.split("; or,")[0].split(": ", 1)[-1] for f in found] == ([fix] if fix else [])
    if fix:
        assert found[0].fix.endswith("set RCCL_FORCE_ENABLE_DMABUF=1") and f"/boot/config-{_AZL}" in found[0].summary
