"""Reading machine files without hanging: what read_file refuses, and the deadline around a probe."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from jax_rocm7_plugin import _safe_io as safe_io
from jax_rocm7_plugin._machine import devices as machine


def test_regular_files_are_read_with_a_bound(tmp_path: Path) -> None:
    path = tmp_path / "properties"
    path.write_bytes(b"x" * 100)
    assert safe_io.read_file(path, 10) == b"x" * 11  # limit + 1: the caller can tell "too large"
    assert safe_io.read_file(path, 1000) == b"x" * 100
    with pytest.raises(ValueError, match="larger than 10 bytes"):
        safe_io.read_text(path, 10)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "properties"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(safe_io.NotARegularFile, match="is a FIFO, not a regular file"):
        safe_io.read_file(fifo, 100)
    assert time.monotonic() - started < 5


def test_sockets_directories_and_devices_are_refused(tmp_path: Path) -> None:
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        with socket.socket(socket.AF_UNIX) as server:
            server.bind("sock")
    finally:
        os.chdir(here)
    with pytest.raises(OSError, match="No such device or address"):  # open() itself refuses a socket
        safe_io.read_file(tmp_path / "sock", 100)
    for path, kind in ((tmp_path, "a directory"), (Path("/dev/null"), "a device")):
        with pytest.raises(safe_io.NotARegularFile, match=kind):
            safe_io.read_file(path, 100)


def test_a_probe_that_does_not_answer_names_the_file_it_was_reading(tmp_path: Path) -> None:
    """A blocking read of a FIFO stands in for a wedged driver's sysfs file (which read_file cannot refuse)."""
    fifo = tmp_path / "properties"
    os.mkfifo(fifo)

    def hung_probe() -> None:
        safe_io._reading[threading.get_ident()] = str(fifo)
        with open(fifo, "rb") as handle:  # blocks: no writer
            handle.read()

    started = time.monotonic()
    with pytest.raises(safe_io.Deadline) as late:
        safe_io.with_deadline(hung_probe, 0.3)
    assert late.value.path == str(fifo) and time.monotonic() - started < 5
    with open(fifo, "wb"):  # let the abandoned daemon thread finish
        pass


def test_the_machine_probe_under_its_deadline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def never(root: Path, groups_added: tuple[int, ...] = ()) -> None:
        safe_io._reading[threading.get_ident()] = "/sys/class/kfd/kfd/topology/nodes/1/properties"
        time.sleep(3)

    monkeypatch.setattr(machine, "probe_machine", never)
    monkeypatch.setattr(safe_io, "DEADLINE_SECONDS", 0.2)
    finding = machine.probe_within_deadline(tmp_path)
    assert not isinstance(finding, machine.MachineState)
    assert finding.id == "machine-probe-timeout" and finding.blocks_rocm
    assert finding.summary == (
        "/sys/class/kfd/kfd/topology/nodes/1/properties did not answer within 0.2 s: the GPU driver may be hung"
    )


def test_errors_of_the_probe_reach_the_caller() -> None:
    def broken() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        safe_io.with_deadline(broken, 1)


def test_device_nodes_that_are_not_devices_are_named(tmp_path: Path) -> None:
    from tests.support.sysroots import make_sysroot

    root = make_sysroot(tmp_path / "root")
    (root / "dev" / "kfd").unlink()
    os.mkfifo(root / "dev" / "kfd")
    (finding,) = machine.machine_findings(machine.probe_machine(root))
    assert finding.id == "kfd-device-missing" and finding.evidence == (f"{root}/dev/kfd is a FIFO, not a device node",)


def test_a_runfiles_manifest_that_is_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    from jax_rocm7_plugin._machine.pjrt_library import _runfiles_library

    fifo = tmp_path / "MANIFEST"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert _runfiles_library(None, str(fifo)) is None
    assert time.monotonic() - started < 5
