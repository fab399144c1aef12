"""What a value must name for the call its reader hands it to (_machine/named_things.py), on trees made here."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._machine.named_things import missing


def test_a_library_path_must_be_a_loadable_object(tmp_path: Path) -> None:
    (tmp_path / "opt/model").mkdir(parents=True)
    (tmp_path / "opt/model/libtext.so").write_text("not an ELF object\n")
    real = Path(sys.executable).resolve()  # an x86-64 ELF executable: an object, though not a shared one
    shutil.copy(real, tmp_path / "opt/model/python")
    assert "not there" in (missing("library", "/opt/model/libffm.so", tmp_path) or "")
    assert "cannot load" in (missing("library", "/opt/model/libtext.so", tmp_path) or "")
    assert missing("library", "relative/libx.so", tmp_path) is None  # read against the working directory


def test_a_library_name_is_searched_where_the_loader_and_rocm_keep_libraries(tmp_path: Path) -> None:
    (tmp_path / "opt/rocm-7.0.0/lib").mkdir(parents=True)
    (tmp_path / "opt/rocm-7.0.0/lib/libroctx64.so").write_text("a ROCm library's name\n")
    assert missing("library", "libroctx64.so", tmp_path) is None
    assert "neither on its search path nor in a ROCm install" in (missing("library", "libnothing.so", tmp_path) or "")


def test_created_files_and_folders_need_folders_on_their_way(tmp_path: Path) -> None:
    (tmp_path / "var/log").mkdir(parents=True)
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv/cache").write_text("a file\n")
    assert missing("file-created", "/var/log/hip.log", tmp_path) is None
    assert "is not there" in (missing("file-created", "/var/nolog/hip.log", tmp_path) or "")
    assert "a folder, not a file" in (missing("file-created", "/var/log", tmp_path) or "")
    assert missing("directory-created", "/var/log/a/b/c", tmp_path) is None
    assert "/srv/cache on its way is a file" in (missing("directory-created", "/srv/cache/x/y", tmp_path) or "")


def test_a_host_is_an_address_a_hosts_entry_or_this_machine(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hosts").write_text("127.0.0.1 localhost\n10.0.0.7 node7 node7.cluster # a node\n")
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/hostname").write_text("me\n")
    for value in ("10.1.2.3", "[fe80::1]", "node7.cluster", "NODE7", "me"):
        assert missing("host", value, tmp_path) is None, value
    assert missing("host", "elsewhere", tmp_path) is None  # a synthetic tree has no resolver to ask


def test_on_the_real_machine_the_resolver_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name: str, port: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert "does not resolve" in (missing("host", "no-such-host.invalid", Path("/")) or "")


def test_a_gid_index_is_one_an_active_port_holds_and_a_fifo_holds_nothing(tmp_path: Path) -> None:
    import os

    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "gids").mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "gids/0").write_text("fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4d\n")
    (port / "gids/3").write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    os.mkfifo(port / "gids/5")  # a FIFO where a GID should be: read once, not waited on
    assert missing("gid-index", "0", tmp_path) is None
    assert missing("gid-index", "-1", tmp_path) is None  # RCCL's own search
    assert "no active RDMA port here holds" in (missing("gid-index", "3", tmp_path) or "")
    assert "no active RDMA port here holds" in (missing("gid-index", "5", tmp_path) or "")
    assert missing("gid-index", "3", tmp_path / "elsewhere") is None  # no RDMA device: RCCL does not use it
