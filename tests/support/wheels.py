"""Wheels for release tests: built through build.py from small compiled libraries, and edited copies."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.support.environment import REPO


def build(output_dir: Path, library: Path | None, *extra: str, env: dict[str, str] | None = None) -> list[Path]:
    """build.py wheels; returns the wheel paths it printed (check runs unless --skip-check is passed)."""
    command = [sys.executable, str(REPO / "build" / "build.py"), "wheels", "--output-dir", str(output_dir)]
    if library is not None:
        command += ["--pjrt-library", str(library)]
    done = subprocess.run([*command, *extra], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return [Path(line) for line in done.stdout.splitlines() if line.startswith("/") and line.endswith(".whl")]


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def edit(
    wheel: Path,
    output: Path,
    *,
    replace: dict[str, bytes | None] | None = None,
    transform: dict[str, Callable[[bytes], bytes]] | None = None,
    keep_record: bool = False,
) -> Path:
    """A copy of `wheel` at `output` with members replaced (None deletes), RECORD rewritten unless keep_record."""
    replace = dict(replace or {})
    transform = transform or {}
    with zipfile.ZipFile(wheel) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    for name, data in replace.items():
        if data is None:
            members.pop(name, None)
        else:
            members[name] = data
    for name, change in transform.items():
        members[name] = change(members[name])
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    if not keep_record:
        lines: Sequence[str] = [record_line(n, d) for n, d in members.items() if n != record] + [f"{record},,"]
        members[record] = ("\n".join(lines) + "\n").encode()
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in members.items():
            target.writestr(name, data)
    return output
