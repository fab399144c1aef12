"""A damaged machine file is a fact about the machine, never the end of the diagnosis.

Every file of a healthy machine's tree (tests/support/fleet.py: the MI300X node with its health files, a fabric and
the ld.so configuration AMD's packages write) is damaged in each way a real machine shows (random or NUL bytes,
invalid UTF-8, a 2 MiB line, a 4 GiB sparse file, a FIFO, a directory, a link to itself, a dangling link, half the
file), one at a time, and the whole doctor runs over it: it ends, within its deadlines, with a report of findings,
never with an exception (`doctor-internal-error` for the user). Hypothesis chooses the (file, damage) pairs from a
fixed seed; the two damages that once ended the doctor are run always.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fleet import HEALTHY, Host, build_host
from tests.support.inprocess import doctor

HOST: Host = HEALTHY[14].but(  # the node with every health file, a fabric, and ld.so's configuration
    files={
        "/sys/class/net/eth0/operstate": "up\n",
        "/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
        "/etc/ld.so.conf": "include /etc/ld.so.conf.d/*.conf\n",
        "/etc/ld.so.conf.d/x86_64-linux-gnu.conf": "/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n",
        # The other sources of configuration (_doctor/sources.py's readers), healthy.
        "/proc/sys/kernel/osrelease": "6.8.0-57-generic\n",
        "/boot/config-6.8.0-57-generic": "CONFIG_HSA_AMD=y\nCONFIG_HSA_AMD_SVM=y\nCONFIG_HSA_AMD_P2P=y\n",
        "/proc/modules": "amdgpu 19542016 0 - Live 0x0\nttm 110592 1 amdgpu, Live 0x0\n",
        "/etc/modprobe.d/amdgpu.conf": "options amdgpu noretry=1\n",
        "/sys/module/amdgpu/parameters/noretry": "1\n",
        "/proc/self/limits": "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max open files            1048576              1048576              files     \n",
        "/proc/self/cgroup": "0::/\n",
        "/sys/fs/cgroup/pids.max": "max\n",
        "/proc/self/uid_map": "         0          0 4294967295\n",
        "/proc/self/mountinfo": "24 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n",
    }
)
SECONDS = 20.0  # far above a diagnosis here (~0.2 s): past it, a reader waited on what it should have refused


def _replace(path: Path, data: bytes) -> None:
    _remove(path)
    path.write_bytes(data)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _sparse(path: Path) -> None:
    _remove(path)
    with path.open("wb") as handle:
        handle.truncate(4 * 1024**3)


def _link_to_itself(path: Path) -> None:
    _remove(path)
    path.symlink_to(path.name)


def _dangling(path: Path) -> None:
    _remove(path)
    path.symlink_to(path.name + ".gone")


def _half(path: Path) -> None:
    data = path.read_bytes() if path.is_file() else b""
    _replace(path, data[: len(data) // 2])


def _directory(path: Path) -> None:
    _remove(path)
    path.mkdir()
    (path / "inside").write_text("1\n")


def _fifo(path: Path) -> None:
    _remove(path)
    os.mkfifo(path)


DAMAGES: dict[str, Callable[[Path], None]] = {
    "random bytes": lambda p: _replace(p, random.Random(p.name).randbytes(512)),
    "NUL bytes": lambda p: _replace(p, b"/opt/rocm\x00/lib\n\x00\x00\x001\n"),
    "invalid UTF-8": lambda p: _replace(p, b"\xff\xfe\xc3(\xa0\xa1 7.0.0\n"),
    "a 2 MiB line": lambda p: _replace(p, b"9" * (2 * 1024 * 1024)),
    "a 4 GiB sparse file": _sparse,
    "a FIFO": _fifo,
    "a directory": _directory,
    "a link to itself": _link_to_itself,
    "a dangling link": _dangling,
    "half the file": _half,
}


def _files(root: Path) -> list[str]:
    """Every file and link of the tree, relative to it, in a stable order (the libraries' ELF files included)."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_symlink() or (p.is_file() and not p.is_dir())
    )


class _Machine:
    def __init__(self, root: Path, environ: dict[str, str], library: Path) -> None:
        self.root, self.environ, self.library = root, environ, library
        self.files = _files(root)

    def diagnosed_with(self, relative: str, damage: str) -> list[str]:
        """The doctor's finding ids with `relative` damaged so; the tree is put back after."""
        path = self.root / relative
        keep = path.parent.parent / f".kept-{path.name}"
        os.rename(path, keep)  # the original, file or link, kept aside whole
        try:
            if keep.is_file() and not keep.is_symlink():
                shutil.copy2(keep, path)  # what `half the file` halves
            DAMAGES[damage](path)
            started = time.monotonic()
            report = doctor(self.environ, self.root, self.library)
            elapsed = time.monotonic() - started
        finally:
            _remove(path)
            os.rename(keep, path)
        assert elapsed < SECONDS, f"{relative} as {damage}: the doctor took {elapsed:.1f} s"
        assert "doctor-internal-error" not in {f.id for f in report.findings}, (relative, damage)
        return [f.id for f in report.findings]


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory, build: Path) -> Iterator[_Machine]:
    patch = pytest.MonkeyPatch()
    try:
        root, environ, library = build_host(HOST, "7.14.0", tmp_path_factory.mktemp("damaged"), build, patch)
        yield _Machine(root, environ, library)
    finally:
        patch.undo()


def test_the_healthy_machine_reads_whole_first(machine: _Machine) -> None:
    """The harness's own control: undamaged, the tree is healthy, and it holds each kind of file the readers read."""
    report = doctor(machine.environ, machine.root, machine.library)
    assert not [f for f in report.findings if f.severity == "error"], [f.sentence() for f in report.findings]
    kinds = {f.split("/")[0] for f in machine.files}
    assert {"sys", "dev", "etc", "opt", "proc"} <= kinds, kinds
    assert any(f.startswith("etc/ld.so.conf.d/") for f in machine.files)


@pytest.mark.parametrize(
    ("relative", "damage"),
    [
        ("etc/ld.so.conf.d/x86_64-linux-gnu.conf", "random bytes"),  # once: ValueError: embedded null byte
        ("etc/ld.so.conf.d/x86_64-linux-gnu.conf", "NUL bytes"),
        ("opt/rocm", "a link to itself"),  # once: RuntimeError: Symlink loop
    ],
)
def test_the_damages_that_once_ended_the_doctor(machine: _Machine, relative: str, damage: str) -> None:
    machine.diagnosed_with(relative, damage)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_file_damaged_in_any_way_leaves_a_report(machine: _Machine, data: st.DataObject) -> None:
    relative = data.draw(st.sampled_from(machine.files), label="file")
    damage = data.draw(st.sampled_from(sorted(DAMAGES)), label="damage")
    machine.diagnosed_with(relative, damage)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_every_damage_of_every_configuration_file(machine: _Machine, damage: str) -> None:
    """The files a user or a package writes (/etc, /proc/self, the ROCm tree's version files) each take every damage:
    the readers of configuration, where the hidden-set failures live."""
    chosen = [
        f
        for f in machine.files
        if f.startswith(("etc/", "proc/", "boot/")) or f.endswith((".info", "version", "pids.max", "noretry"))
    ]
    assert chosen
    for relative in chosen:
        machine.diagnosed_with(relative, damage)
