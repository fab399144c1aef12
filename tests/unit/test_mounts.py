"""The mount table reader (_machine/mounts.py) on mountinfo lines in proc(5)'s format, written here."""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin._machine.mounts import mount_of, read_mounts

MOUNTINFO = (
    "24 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "88 24 0:45 / /users rw,relatime shared:2 master:1 - lustre 10.0.0.1@o2ib:/users rw,flock\n"
    "90 24 0:46 / /scratch\\040space rw - xfs /dev/sdb1 rw\n"
    "91 88 0:47 / /users/local rw - ext4 /dev/sdc1 rw\n"
    "92 24 0:48 / /users rw - nfs4 server:/users rw\n"
    "a line without its separator\n"
    "93 24 0:49 / relative rw - ext4 /dev/sdd1 rw\n"
)


def test_the_longest_mount_point_holds_a_path_and_the_last_mounted_wins(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(MOUNTINFO)
    mounts = read_mounts(tmp_path)
    assert [m.point for m in mounts] == ["/", "/users", "/scratch space", "/users/local", "/users"]
    assert mount_of(mounts, "/users/someone/.cache").fstype == "nfs4"  # type: ignore[union-attr]
    assert mount_of(mounts, "/users/local/x").fstype == "ext4"  # type: ignore[union-attr]
    assert mount_of(mounts, "/usersx").point == "/"  # type: ignore[union-attr]  # a prefix of a name is no parent
    assert mount_of(mounts, "/scratch space/a").fstype == "xfs"  # type: ignore[union-attr]


def test_no_table_is_no_mounts(tmp_path: Path) -> None:
    assert read_mounts(tmp_path) == () and mount_of((), "/x") is None
