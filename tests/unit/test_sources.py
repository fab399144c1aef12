"""The readers of the machine's other sources (_machine/kernel.py, process_limits.py, python_env.py,
write_dirs.py) over synthetic trees written from each format's documentation (proc(5), cgroups(7), cgroup-v2.rst,
user_namespaces(7), modprobe.d(5), kconfig, PEP 627's RECORD), and over damaged ones."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from jax_rocm7_plugin._machine.identity import Identity
from jax_rocm7_plugin._machine.kernel import read_kernel
from jax_rocm7_plugin._machine.process_limits import parse_limits, read_process_limits
from jax_rocm7_plugin._machine.python_env import read_python_env
from jax_rocm7_plugin._machine.temp_dir import may_create_in
from jax_rocm7_plugin._machine.write_dirs import read_write_dirs

# proc(5)'s /proc/[pid]/limits as fs/proc/base.c (proc_pid_limits) prints it: "%-25s %-20s %-20s %-10s".
_ROWS = [
    ("Limit", "Soft Limit", "Hard Limit", "Units"),
    ("Max cpu time", "unlimited", "unlimited", "seconds"),
    ("Max stack size", "8388608", "unlimited", "bytes"),
    ("Max processes", "4096", "4096", "processes"),
    ("Max open files", "1024", "1048576", "files"),
    ("Max locked memory", "65536", "65536", "bytes"),
    ("Max nice priority", "0", "0", ""),
]
LIMITS = "".join(f"{n:<25} {s:<20} {h:<20} {u:<10}\n" for n, s, h, u in _ROWS)


def _write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def test_every_limit_is_read_with_its_soft_and_hard_value() -> None:
    limits = parse_limits(LIMITS)
    assert limits is not None
    assert limits["Max open files"].soft == 1024 and limits["Max open files"].hard == 1048576
    assert limits["Max cpu time"].soft is None and limits["Max locked memory"].unit == "bytes"
    assert limits["Max nice priority"].unit == "" and len(limits) == 6
    assert parse_limits("garbage\n") is None and parse_limits("") is None


def test_cgroup_v2_limits_and_a_rootless_user_namespace(tmp_path: Path) -> None:
    root = _write(tmp_path, {
        "/proc/self/limits": LIMITS,
        "/proc/self/cgroup": "0::/user.slice/job-7\n",
        "/sys/fs/cgroup/user.slice/job-7/memory.max": "17179869184\n",
        "/sys/fs/cgroup/user.slice/job-7/pids.max": "max\n",
        "/proc/self/uid_map": "         0       1000          1\n         1     100000      65536\n",
    })  # fmt: skip
    facts = read_process_limits(root)
    assert facts.cgroup is not None and facts.cgroup.version == 2
    assert facts.cgroup.memory_max == 16 * 1024**3 and facts.cgroup.pids_max is None
    assert facts.user_namespace is True and facts.outside_uid == 1000
    assert facts.soft("Max open files") == 1024


def test_cgroup_v1_limits_and_the_initial_namespace(tmp_path: Path) -> None:
    root = _write(tmp_path, {
        "/proc/self/cgroup": "12:pids:/docker/abc\n11:memory:/docker/abc\n1:name=systemd:/docker/abc\n",
        "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n",  # v1's "no limit"
        "/sys/fs/cgroup/pids/docker/abc/pids.max": "512\n",
        "/proc/self/uid_map": "         0          0 4294967295\n",
    })  # fmt: skip
    facts = read_process_limits(root)
    assert facts.cgroup is not None and facts.cgroup.version == 1
    assert facts.cgroup.memory_max is None and facts.cgroup.pids_max == 512
    assert facts.user_namespace is False and facts.limits is None


def test_the_kernel_its_configuration_modules_and_parameters(tmp_path: Path) -> None:
    config = 'CONFIG_HSA_AMD=y\n# CONFIG_HSA_AMD_P2P is not set\nCONFIG_LOCALVERSION="-generic"\n'
    root = _write(tmp_path, {
        "/proc/sys/kernel/osrelease": "6.8.0-57-generic\n",
        "/proc/config.gz": gzip.compress(config.encode()),
        "/proc/cmdline": "BOOT_IMAGE=/vmlinuz ro amdgpu.gttsize=65536 iscsi_initiator=secret ttm.pages_limit=1\n",
        "/proc/modules": "amdgpu 19542016 0 - Live 0x0000000000000000\nttm 110592 1 amdgpu, Live 0x0\n",
        "/etc/modprobe.d/amdgpu.conf": "# tuned for Strix Halo\noptions amdgpu gttsize=131072 cwsr_enable=0\n",
        "/lib/modprobe.d/amdgpu.conf": "options amdgpu gttsize=1\n",  # hidden by /etc's file of that name
        "/sys/module/amdgpu/parameters/gttsize": "-1\n",
        "/sys/module/ttm/parameters/pages_limit": "1\n",
    })  # fmt: skip
    kernel = read_kernel(root)
    assert kernel.release == "6.8.0-57-generic" and kernel.config_source == "/proc/config.gz"
    assert kernel.option("CONFIG_HSA_AMD") == "y" and kernel.option("CONFIG_HSA_AMD_P2P") == "n"
    assert kernel.option("CONFIG_LOCALVERSION") == "-generic"
    assert [(o.module, o.parameter, o.value, o.source) for o in kernel.options] == [
        ("amdgpu", "gttsize", "65536", "/proc/cmdline"),
        ("ttm", "pages_limit", "1", "/proc/cmdline"),
        ("amdgpu", "gttsize", "131072", "/etc/modprobe.d/amdgpu.conf"),
        ("amdgpu", "cwsr_enable", "0", "/etc/modprobe.d/amdgpu.conf"),
    ]  # the command line's credentials are no module's parameter: never kept
    assert kernel.loaded == frozenset({"amdgpu", "ttm"})
    assert kernel.in_effect["amdgpu"] == {"gttsize": "-1"} and kernel.in_effect["ttm"] == {"pages_limit": "1"}


def test_the_configuration_falls_back_to_boot_and_a_damaged_tree_is_unknown(tmp_path: Path) -> None:
    root = _write(tmp_path, {
        "/proc/sys/kernel/osrelease": "6.14.0-1018-oem\n",
        "/proc/config.gz": b"\x1f\x8b not gzip",
        "/boot/config-6.14.0-1018-oem": "CONFIG_HSA_AMD=m\n",
    })  # fmt: skip
    assert read_kernel(root).config_source == "/boot/config-6.14.0-1018-oem"
    os.mkfifo(tmp_path / "proc" / "cmdline")
    (tmp_path / "proc" / "modules").mkdir()
    kernel = read_kernel(root)
    assert kernel.loaded is None and kernel.options == ()


def test_who_provides_each_module_and_what_native_code_each_carries(tmp_path: Path) -> None:
    site = tmp_path / "site"

    def dist(name: str, files: list[str]) -> None:
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\nName: not a header\n")
        (info / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files) + f"{name}-1.0.dist-info/RECORD,,\n")

    dist("opencv-python", ["cv2/__init__.py", "opencv_python.libs/libavcodec.so.59"])
    dist("opencv-python-headless", ["cv2/__init__.py", "cv2/cv2.abi3.so"])
    dist("plugin-a", ["jax_plugins/a/__init__.py"])  # a namespace package shared: no conflict
    dist("plugin-b", ["jax_plugins/b/__init__.py", "single.py", "fast.cpython-311-x86_64-linux-gnu.so"])
    env = read_python_env([str(site), str(tmp_path / "missing")])
    providers = env.providers()
    assert [d.name for d in providers["cv2"]] == ["opencv-python", "opencv-python-headless"]
    assert "jax_plugins" not in providers and providers["single"][0].name == "plugin-b"
    assert providers["fast"][0].name == "plugin-b"
    (opencv,) = [d for d in env.distributions if d.name == "opencv-python"]
    assert opencv.native == ("opencv_python.libs/libavcodec.so.59",)


def test_the_folders_the_stack_writes_defaults_included(tmp_path: Path) -> None:
    (tmp_path / "home" / "user").mkdir(parents=True)
    (tmp_path / "home" / "user" / ".cache").write_text("a file where a folder goes\n")
    (tmp_path / "scratch").mkdir(mode=0o755)
    environ = {"HOME": "/home/user", "MIOPEN_USER_DB_PATH": "/scratch/db", "JAX_COMPILATION_CACHE_DIR": "relative"}
    dirs = {d.purpose: d for d in read_write_dirs(tmp_path, environ).dirs}
    cache = dirs["MIOpen's kernel cache"]
    assert cache.named_by == "default (MIOPEN_CUSTOM_CACHE_DIR unset)" and cache.path == "/home/user/.cache/miopen"
    assert cache.base is None and not cache.exists  # a file is in the way
    database = dirs["MIOpen's tuning database"]
    assert database.named_by == "MIOPEN_USER_DB_PATH" and database.base == "/scratch" and database.mode == 0o755
    assert not may_create_in(database.mode, 0, 0, Identity(1000, (1000,), "test"))
    assert database.free_bytes is not None and database.read_only is False
    assert dirs["jax's compilation cache"].base is None  # not an absolute path: nothing to judge


@pytest.mark.parametrize("damage", ["fifo", "directory", "garbage", "huge"])
def test_a_damaged_limits_or_cgroup_file_is_unknown(tmp_path: Path, damage: str) -> None:
    for name in ("limits", "cgroup", "uid_map"):
        path = tmp_path / "proc" / "self" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if damage == "fifo":
            os.mkfifo(path)
        elif damage == "directory":
            path.mkdir()
        elif damage == "garbage":
            path.write_bytes(b"\xff\x00Limit\x00" * 50)
        else:
            path.write_bytes(b"9" * (2 * 1024 * 1024))
    facts = read_process_limits(tmp_path)
    assert facts.cgroup is None and facts.user_namespace in (None, True)
    assert facts.limits in (None, {})
