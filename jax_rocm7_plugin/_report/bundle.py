"""`python -m jax_rocm7_plugin report`: one .tar.gz with what a maintainer needs, redacted, nothing uploaded.

The bundle holds the doctor's report (text and JSON; with --deep where a GPU is usable), versions,
machine files, the allowlisted variables, the GPU driver's kernel log lines and, with `-- COMMAND`,
the user's program run once with XLA dumping its HLO as text (the user's XLA_FLAGS kept), its exit
status or signal, wall time and output tails, and at most --max-mb of dumps (newest first).
Every file passes through the redactor; MANIFEST.json lists each file with size and sha256, what
was redacted (by name) and which dumps were dropped. The archive is written beside its destination
and moved into place at the end, so a partial bundle is never left under the final name, and an
existing file is replaced only with --force.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._names import PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._report.redact import Redactor
from jax_rocm7_plugin._safe_io import claim_beside, publish
from jax_rocm7_plugin.version import __version__ as PLUGIN_VERSION

DUMP_DIR = "xla_dump"
TAIL_BYTES = 64 * 1024
DEFAULT_TIMEOUT = 300.0
DEFAULT_MAX_MB = 64.0


class Options(NamedTuple):
    output: Path | None = None  # default: jax-rocm-report-<host>-<UTC time>.tar.gz here
    force: bool = False
    timeout: float = DEFAULT_TIMEOUT  # for the command
    max_mb: float = DEFAULT_MAX_MB  # of XLA dumps kept
    command: tuple[str, ...] = ()
    sysroot: Path | None = None
    library: Path | None = None


class UsageProblem(Exception):
    """The report cannot be written where asked (exit 2, one sentence)."""


def run(options: Options, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    try:
        destination = _destination(options)
        partial = _claim_partial(destination)
    except UsageProblem as problem:
        err.write(f"report: error: {problem}\n")
        return 2
    published = False
    try:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="jax-rocm-report-") as work:
            files, manifest, redactor = collect(options, dict(environ), Path(work), err)
            top = destination.name.removesuffix(".tar.gz").removesuffix(".tgz")
            _write_archive(partial, top, files, manifest, redactor)
        _publish(partial, destination, force=options.force)
        published = True
    except UsageProblem as problem:
        err.write(f"report: error: {problem}\n")
        return 2
    except KeyboardInterrupt as interrupt:  # the command (if any) and its process group are gone already
        from jax_rocm7_plugin._interrupt import exit_code

        if not published:  # interrupted after the rename: the bundle is whole, and said below
            err.write(f"report: interrupted; nothing was written to {destination}\n")
            return exit_code(interrupt)
    finally:
        partial.unlink(missing_ok=True)
    size = destination.stat().st_size
    err.write(f"report: {len(files) + 1} files in {time.monotonic() - started:.1f} s; nothing was uploaded\n")
    out.write(f"{destination} ({size / 1e6:.2f} MB)\n")
    # The bundle is written either way; the exit status is the command's where it failed (a script or CI step
    # that runs `report -- CMD` sees the failure it is reporting), else 0.
    return int(manifest.get("command", {}).get("exit_status", 0))


def _binary_streams(err: TextIO) -> tuple[BinaryIO, BinaryIO] | None:
    """This process's stdout and stderr as bytes, to pass the command's output through (None where `err` is not
    the real stderr: a caller capturing the report's own lines gets no echo either)."""
    import sys

    if err is not sys.stderr:
        return None
    try:
        return sys.stdout.buffer, sys.stderr.buffer
    except AttributeError:
        return None


def _destination(options: Options) -> Path:
    if options.output is not None:
        destination = options.output.absolute()
    else:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        destination = Path.cwd() / f"jax-rocm-report-{os.uname().nodename}-{stamp}.tar.gz"
    if destination.is_dir():
        raise UsageProblem(f"{destination} is a directory; give a file name (--output FILE.tar.gz)")
    if not destination.name.endswith((".tar.gz", ".tgz")):
        raise UsageProblem(f"{destination.name}: the bundle is a gzip-compressed tar; name it FILE.tar.gz")
    if destination.exists() and not options.force:
        raise UsageProblem(f"{destination} exists; use --force to replace it")
    return destination


def _claim_partial(destination: Path) -> Path:
    """The file the archive is written to, beside the destination (so the last step is a rename)."""
    try:
        return Path(claim_beside(destination))
    except OSError as error:
        raise UsageProblem(f"cannot write in {destination.parent}: {error.strerror or error}") from None


def _publish(partial: Path, destination: Path, *, force: bool) -> None:
    if not publish(partial, destination, force=force):  # never over a file that appeared meanwhile
        raise UsageProblem(f"{destination} appeared while the report was made; use --force to replace it")


def collect(
    options: Options, environ: dict[str, str], work: Path, err: TextIO
) -> tuple[dict[str, bytes], dict[str, Any], Redactor]:
    """Every file of the bundle (name -> redacted bytes), the manifest's data besides the file list, and the
    redactor (the manifest passes through it too: the command line may hold a secret)."""
    from jax_rocm7_plugin._report import gather

    redactor = Redactor(environ)
    files: dict[str, str | bytes] = {}
    root = options.sysroot or Path(_environment.read(_environment.SYSROOT, environ) or "/")
    doctor_text, doctor_json, deep, doctor_page = _doctor(options, environ)
    files["doctor.txt"] = doctor_text
    files["doctor.json"] = doctor_json
    info = gather.versions()
    info["cpu_model"] = gather.cpu_model(root)
    info["devices"] = gather.device_access(root)
    info["container_hints"] = gather.container_hints(root, environ)
    files["versions.json"] = json.dumps(info, indent=2, default=str) + "\n"
    listed = gather.allowlisted(environ)
    files["environment.txt"] = "".join(f"{name}={redactor.variable(name, value)}\n" for name, value in listed)
    files["kernel-log.txt"] = gather.kernel_log(root)
    files["gpu-health.json"] = gather.gpu_health(root)
    for name, text in gather.machine_files(root):
        files[name] = text
    manifest: dict[str, Any] = {
        "tool": f"{PLUGIN_DISTRIBUTION} {PLUGIN_VERSION} report",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "doctor_deep": deep,
        "variables_listed": [name for name, _ in listed],
    }
    if options.command:
        err.write(f"report: running {shlex.join(options.command)} (up to {options.timeout:g} s) with XLA dumps\n")
        err.flush()
        command_files, command_info, dropped = _run_command(options, environ, work, _binary_streams(err))
        err.write(f"report: the command {command_info['said']}\n")
        files.update(command_files)
        manifest["command"] = command_info
        manifest["dumps_dropped"] = dropped
    redacted = {name: redactor.data(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
                for name, data in files.items()}  # fmt: skip
    if redactor.found_in(redacted.values()):  # cannot happen: the redactor replaces every literal it lists
        raise RuntimeError("a secret survived redaction; no bundle was written")
    from jax_rocm7_plugin._pages.index import with_files

    # The index: the doctor's page and a link to every file (opened from the unpacked bundle).
    index = with_files(doctor_page, {name: len(data) for name, data in redacted.items()})
    redacted["index.html"] = redactor.data(index.encode("utf-8", "surrogateescape"))
    manifest["redacted"] = sorted(set(redactor.names))
    return redacted, manifest, redactor


def _doctor(options: Options, environ: dict[str, str]) -> tuple[str, str, bool, str]:
    """The doctor's report as text, JSON and page, with --deep's probes where a GPU is usable, and whether they
    ran."""
    from jax_rocm7_plugin._doctor.diagnose import diagnose, internal_error
    from jax_rocm7_plugin._doctor.render import render_html, render_text
    from jax_rocm7_plugin._doctor.report import render_json
    from jax_rocm7_plugin._settings import read_settings

    settings = read_settings(environ, sysroot=options.sysroot, library=options.library)
    try:
        report = diagnose(settings, deep=None)
    except Exception as error:  # noqa: BLE001 - the bundle still says what failed
        report = internal_error(error, settings)
    text, data = render_text(report, verbose=True) + "\n", render_json(report) + "\n"
    return text, data, report.hip is not None, render_html(report)


def _run_command(
    options: Options, environ: dict[str, str], work: Path, echo: tuple[BinaryIO, BinaryIO] | None
) -> tuple[dict[str, str | bytes], dict[str, Any], list[dict[str, Any]]]:
    from jax_rocm7_plugin._binary.child import run_command

    dumps = work / DUMP_DIR
    dumps.mkdir()
    flags = _environment.read("XLA_FLAGS", environ) or ""
    env = {**environ, "XLA_FLAGS": f"{flags} --xla_dump_to={dumps} --xla_dump_hlo_as_text".strip()}
    output = work / "output"
    output.mkdir()
    done = run_command(
        options.command, env=env, timeout=options.timeout, output_dir=output, tail_bytes=TAIL_BYTES, echo=echo
    )
    info: dict[str, Any] = {
        "argv": list(options.command),
        "outcome": done.outcome,
        "said": done.said,
        "exit_status": done.exit_status,
        "returncode": done.returncode,
        "timed_out_after_seconds": done.timed_out,
        "wall_seconds": round(done.wall_seconds, 3),
        "xla_flags_added": f"--xla_dump_to=<bundle>/{DUMP_DIR} --xla_dump_hlo_as_text",
        "output_tail_bytes": TAIL_BYTES,
    }
    files: dict[str, str | bytes] = {
        "command/stdout-tail.txt": done.stdout_tail,
        "command/stderr-tail.txt": done.stderr_tail,
    }
    kept, dropped = _cap_dumps(dumps, options.max_mb)
    for path in kept:
        files[f"{DUMP_DIR}/{path.relative_to(dumps)}"] = path.read_bytes()
    files["command/outcome.json"] = json.dumps(info, indent=2) + "\n"
    return files, info, dropped


def _cap_dumps(dumps: Path, max_mb: float) -> tuple[list[Path], list[dict[str, Any]]]:
    """The dump files to keep, newest first, within `max_mb`; and those dropped (name, size)."""
    found = [p for p in dumps.rglob("*") if p.is_file() and not p.is_symlink()]
    found.sort(key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True)
    budget = int(max_mb * 1024 * 1024)
    kept: list[Path] = []
    dropped: list[dict[str, Any]] = []
    for path in found:
        size = path.stat().st_size
        if size <= budget:
            kept.append(path)
            budget -= size
        else:
            dropped.append({"file": str(path.relative_to(dumps)), "size": size})
    return sorted(kept), dropped


def _write_archive(
    path: Path, top: str, files: Mapping[str, bytes], manifest: dict[str, Any], redactor: Redactor
) -> None:
    """A gzip'd tar of `files` under `top/`, with MANIFEST.json (every file's size and sha256) first."""
    listing = [
        {"file": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in sorted(files.items())
    ]
    text = json.dumps({**manifest, "files": listing}, indent=2) + "\n"
    members = {"MANIFEST.json": redactor.data(text.encode("utf-8", "surrogateescape")), **files}
    now = int(time.time())
    try:
        with tarfile.open(path, "w:gz") as archive:
            for name, data in members.items():
                member = tarfile.TarInfo(f"{top}/{name}")
                member.size, member.mtime, member.mode = len(data), now, 0o644
                archive.addfile(member, io.BytesIO(data))
    except OSError as error:
        raise UsageProblem(f"cannot write {path.parent}: {error.strerror or error}") from None


def parse_command(argv: Sequence[str]) -> tuple[list[str], tuple[str, ...]]:
    """Split `report [options] -- COMMAND ...` at the first `--`."""
    if "--" in argv:
        cut = list(argv).index("--")
        return list(argv[:cut]), tuple(argv[cut + 1 :])
    return list(argv), ()
