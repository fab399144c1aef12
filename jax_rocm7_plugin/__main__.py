"""`python -m jax_rocm7_plugin doctor [--json] [--sysroot DIR] [--library PATH] [--deep]`, and
`python -m jax_rocm7_plugin cluster [...]` in every process of a job (the cluster preflight).

Exit status: 0 when jax will get the ROCm backend (cluster: every process consistent and ready),
1 when not, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from jax_rocm7_plugin._settings import Settings


# Said the same way in every command (and in the README's table).
SYSROOT_HELP = "read /sys, /dev ... under DIR, another root (default: $JAX_ROCM_SYSROOT or /)"
LIBRARY_HELP = "examine this PJRT library instead of the installed one"
HTML_HELP = "also write the result as one self-contained page (inline SVG; nothing fetched), whatever the verdict"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    doctor = commands.add_parser("doctor", help="say why this machine does or does not get RocmDevice")
    doctor.add_argument("--json", action="store_true", help="one JSON object on stdout")
    doctor.add_argument("--sysroot", type=Path, metavar="DIR", help=SYSROOT_HELP)
    doctor.add_argument("--library", type=Path, metavar="PATH", help=LIBRARY_HELP)
    doctor.add_argument(
        "--deep", action="store_true", help="also start the HIP runtime and run a first jit, each in a child"
    )
    doctor.add_argument("--verbose", action="store_true", help="every evidence line and every extension module")
    doctor.add_argument("--html", type=Path, metavar="FILE", help=HTML_HELP)
    doctor.add_argument("--force", action="store_true", help="replace the --html FILE if it exists")
    doctor.add_argument(
        "--binary",
        type=Path,
        nargs="+",
        metavar="PATH",
        help="instead: say for each HIP binary (files, or folders searched) whether this machine's GPUs can run it",
    )
    _configure_cluster(commands)
    _configure_report(commands)
    arguments = sys.argv[1:] if argv is None else argv
    command: tuple[str, ...] = ()
    if arguments[:1] == ["report"] and "--" in arguments:  # report [options] -- COMMAND ...: the rest is theirs
        cut = arguments.index("--")
        arguments, command = arguments[:cut], tuple(arguments[cut + 1 :])
    cluster_parser = commands.choices["cluster"]
    assert isinstance(cluster_parser, _Parser)
    cluster_parser.json_requested = arguments[:1] == ["cluster"] and "--json" in arguments
    args, extra = parser.parse_known_args(arguments)
    if extra:
        if args.command == "report" and not extra[0].startswith("-"):  # a command given without the separator
            commands.choices["report"].error(
                f"unrecognized arguments: {' '.join(extra)}; to run a command, put it after --: "
                f"report [options] -- {' '.join(extra)}"
            )
        (commands.choices[args.command] if args.command else parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command in ("cluster", "report"):  # long runs with children: Ctrl-C and SIGTERM end them, cleanly
        from jax_rocm7_plugin._interrupt import catch_interrupts

        catch_interrupts()
    doctor_parser = commands.choices["doctor"]
    assert isinstance(doctor_parser, _Parser)
    if args.command == "cluster":
        return _cluster(args, cluster_parser)
    if args.command == "report":
        return _report(args, command, commands.choices["report"])

    from jax_rocm7_plugin._doctor.diagnose import diagnose, internal_error
    from jax_rocm7_plugin._doctor.render import render_text
    from jax_rocm7_plugin._doctor.report import render_json
    from jax_rocm7_plugin._settings import read_settings

    if (problem := bad_paths(args)) is not None:
        doctor_parser.usage_error(problem, path_fix(problem))
    _check_html(args, doctor_parser)
    # --sysroot and --library replace their variables, so those values (good or bad) no longer matter.
    settings = read_settings(os.environ, sysroot=args.sysroot, library=args.library)
    if args.binary:
        if args.html is not None:
            doctor_parser.usage_error("--html draws the doctor's report, not --binary's", "leave --html out")
        return _binaries(args.binary, settings, as_json=args.json, parser=doctor_parser)
    try:
        report = diagnose(settings, deep=args.deep)
    except Exception as error:  # noqa: BLE001 - a probe we did not foresee failing: still one finding, no traceback
        report = internal_error(error, settings)
    text = render_json(report) if args.json else render_text(report, verbose=args.verbose)
    # Values from the environment may hold bytes that are not UTF-8: shown escaped, never a traceback.
    sys.stdout.write(text.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
    if args.html is not None:
        from jax_rocm7_plugin._doctor.render import render_html
        from jax_rocm7_plugin._pages.output import write
        from jax_rocm7_plugin._report.redact import Redactor

        page = Redactor(os.environ).text(render_html(report))
        if (failed := write(args.html, page, force=args.force)) is not None:
            sys.stderr.write(f"python -m {__package__} doctor: the page was not written: {failed}\n")
            return 1
    return 0 if report.ok else 1


def _check_html(args: argparse.Namespace, parser: _Parser) -> None:
    """--html and --trace files that cannot be written are usage errors, said before any work."""
    from jax_rocm7_plugin._pages.output import refusal

    for flag in ("html", "trace"):
        path = getattr(args, flag, None)
        if path is not None and (problem := refusal(path, force=args.force, flag=f"--{flag}")) is not None:
            parser.usage_error(problem, f"give --{flag} a new file in an existing folder, or add --force")


def _binaries(paths: list[Path], settings: Settings, *, as_json: bool, parser: _Parser) -> int:
    from jax_rocm7_plugin._doctor.binaries import check_binaries

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        parser.usage_error(
            f"--binary: no such file or folder: {', '.join(missing)}", "give --binary existing files or folders"
        )
    lines, data, ok = check_binaries(paths, settings)
    if as_json:
        import json

        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        gpus = ", ".join(f"KFD node {g['kfd_node']} {g['target']}" for g in data["gpus"])
        gpus = gpus or (f"none known: {data['machine_problem']}" if "machine_problem" in data else "none")
        sys.stdout.write("".join(f"{line}\n" for line in [f"GPUs HIP will use: {gpus}", *lines]))
    return 0 if ok else 1


class _Parser(argparse.ArgumentParser):
    """Each command's parser: a usage error is one sentence and its fix (exit 2). `cluster --json`'s output may be
    read by a program, so there it is the same JSON report as every other outcome (verdict "usage-error")."""

    json_requested = False  # set on the cluster command's parser when --json was given

    def error(self, message: str) -> NoReturn:
        self.usage_error(message, f"see {self.prog} --help for each option's form")

    def usage_error(self, message: str, fix: str) -> NoReturn:
        if not self.json_requested:
            self.print_usage(sys.stderr)
            self.exit(2, f"{self.prog}: error: {message}\n  fix: {fix}\n")
        from jax_rocm7_plugin._cluster.report import ClusterReport, render_json
        from jax_rocm7_plugin._job import catalog

        report = ClusterReport(None, (), (), (), (catalog.usage_invalid(message, fix),))
        sys.stdout.write(render_json(report) + "\n")
        sys.stdout.flush()
        self.exit(2)


def _configure_cluster(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="run in every process of a job (srun, mpirun, a JobSet): process 0 reports what differs",
        description="Join the job's processes through jax.distributed (the launcher's variables, or the options "
        "below), run the doctor in each, and compare. Exit 0: consistent and every backend would come up; 1: "
        "problems; 2: usage.",
    )
    cluster.add_argument("--coordinator-address", metavar="HOST:PORT", help="process 0's address (else detected)")
    cluster.add_argument("--num-processes", type=_positive_int, metavar="N", help="processes in the job")
    cluster.add_argument("--process-id", type=_non_negative_int, metavar="I", help="this process's id, 0..N-1")
    cluster.add_argument(
        "--local-device-ids", type=_id_list, metavar="0,1,...", help="GPUs (HIP indices) this process will use"
    )
    cluster.add_argument(
        "--timeout", type=_seconds, default=60.0, metavar="S", help="seconds for the whole preflight (default 60)"
    )
    cluster.add_argument("--json", action="store_true", help="process 0 prints one JSON object")
    cluster.add_argument("--verbose", action="store_true", help="every process says what it does on stderr")
    cluster.add_argument("--sysroot", type=Path, metavar="DIR", help=SYSROOT_HELP)
    cluster.add_argument("--library", type=Path, metavar="PATH", help=LIBRARY_HELP)
    deep = cluster.add_argument_group("--deep: the job's collectives, for real, after the comparison")
    deep.add_argument("--deep", action="store_true", help="start the backend in every process and run its collectives")
    deep.add_argument(
        "--sizes",
        type=_sizes,
        metavar="8,64K,16M",
        help="message sizes (default: 8 B x 4^k to 128 MiB, and 256 MiB)",
    )
    deep.add_argument(
        "--platform", choices=("rocm", "cpu"), default="rocm", help="the backend (cpu: gloo over the network)"
    )
    deep.add_argument(
        "--step-timeout", type=_seconds, default=60.0, metavar="S", help="seconds for each step (default 60)"
    )
    deep.add_argument(
        "--trace", type=Path, metavar="FILE", help="process 0 writes the steps as Chrome trace-event JSON (Perfetto)"
    )
    cluster.add_argument("--html", type=Path, metavar="FILE", help=f"process 0: {HTML_HELP}")
    cluster.add_argument("--force", action="store_true", help="replace the --html and --trace files if they exist")


def _configure_report(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser(
        "report",
        help="write one .tar.gz a maintainer can act on (doctor, versions, machine, HLO of -- COMMAND), redacted",
        usage="%(prog)s [--output FILE] [--force] [--timeout S] [--max-mb N] [--sysroot DIR] [--library PATH] "
        "[-- COMMAND ...]",
        description="Bundle the doctor's report, versions, machine files, the variables that steer JAX/XLA/ROCm "
        "and the GPU driver's kernel log; with -- COMMAND, run it once with XLA dumping HLO as text and keep its "
        "outcome and output tails. Secrets are redacted; nothing is uploaded. Exit: the command's status where it "
        "failed (124 at --timeout, 127 not found, 128+N killed by signal N), else 0; 2: usage.",
    )
    report.add_argument(
        "--output", type=Path, metavar="FILE", help="the bundle (default: jax-rocm-report-HOST-TIME.tar.gz)"
    )
    report.add_argument("--force", action="store_true", help="replace FILE if it exists")
    report.add_argument(
        "--timeout", type=_seconds, default=300.0, metavar="S", help="seconds COMMAND may run (default 300)"
    )
    report.add_argument(
        "--max-mb", type=_megabytes, default=64.0, metavar="N", help="MB of XLA dumps kept, newest first (default 64)"
    )
    report.add_argument("--sysroot", type=Path, metavar="DIR", help=SYSROOT_HELP)
    report.add_argument("--library", type=Path, metavar="PATH", help=LIBRARY_HELP)


def _report(args: argparse.Namespace, command: tuple[str, ...], parser: _Parser) -> int:
    from jax_rocm7_plugin._report.bundle import Options, run

    if (problem := bad_paths(args)) is not None:
        parser.usage_error(problem, path_fix(problem))
    options = Options(args.output, args.force, args.timeout, args.max_mb, command, args.sysroot, args.library)
    return run(options, os.environ, sys.stdout, sys.stderr)


def _number_in(low: float, high: float, unit: str) -> Callable[[str], float]:
    """An argparse type: a number of `unit` between `low` and `high`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not between {low:.10g} and {high:.10g} {unit}")
        return value

    return parse


_seconds = _number_in(1.0, 86400.0, "seconds")
_megabytes = _number_in(0.0, 1e6, "megabytes")


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _non_negative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return int(text)


def _id_list(text: str) -> tuple[int, ...]:
    return tuple(_non_negative_int(part) for part in text.split(","))


def bad_paths(args: argparse.Namespace) -> str | None:
    """The usage error of a --sysroot or --library that names nothing usable, the same for every command (exit 2),
    or None."""
    sysroot, library = getattr(args, "sysroot", None), getattr(args, "library", None)
    if sysroot is not None and not sysroot.is_dir():
        return f"--sysroot {sysroot}: {'not a directory' if sysroot.exists() else 'does not exist'}"
    if library is not None and not library.is_file():
        return f"--library {library}: {'not a regular file' if library.exists() else 'does not exist'}"
    return None


def path_fix(problem: str) -> str:
    """The fix of a bad_paths problem."""
    flag = problem.split()[0]
    return f"give {flag} {'a directory' if flag == '--sysroot' else 'a PJRT library file'}, or leave it out"


def _sizes(text: str) -> tuple[int, ...]:
    from jax_rocm7_plugin._cluster.collectives import parse_sizes

    try:
        return parse_sizes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _cluster(args: argparse.Namespace, parser: _Parser) -> int:
    """What the arguments alone can decide is decided here, before jax or the preflight is imported."""
    if (problem := bad_paths(args)) is not None:
        parser.usage_error(problem, path_fix(problem))
    if args.coordinator_address is not None:
        from jax_rocm7_plugin._policy.grammar import parse_address

        if parse_address(args.coordinator_address) is None:
            parser.usage_error(
                f"--coordinator-address {args.coordinator_address!r} is not HOST:PORT with a port from 1 to 65535",
                "give process 0's host and a free port, e.g. --coordinator-address node-0:1234",
            )
    if args.num_processes is not None and args.process_id is not None and args.process_id >= args.num_processes:
        parser.usage_error(
            f"--process-id {args.process_id} is not within 0..{args.num_processes - 1} "
            f"(--num-processes {args.num_processes})",
            "number the processes from 0: give each its own --process-id below --num-processes",
        )
    if args.trace is not None and not args.deep:
        parser.usage_error("--trace needs --deep: the trace is of the deep steps", "add --deep, or leave --trace out")
    if args.process_id in (0, None):  # the process that writes them
        _check_html(args, parser)
    from jax_rocm7_plugin._cluster.preflight import Options, run

    options = Options(
        coordinator=args.coordinator_address,
        num_processes=args.num_processes,
        process_id=args.process_id,
        local_device_ids=args.local_device_ids,
        timeout=args.timeout,
        json=args.json,
        verbose=args.verbose,
        sysroot=args.sysroot,
        library=args.library,
        deep=args.deep,
        sizes=args.sizes or (),
        platform=args.platform,
        step_timeout=args.step_timeout,
        html=args.html,
        trace=args.trace,
        force=args.force,
    )
    return run(options, os.environ, sys.stdout, sys.stderr)


def doctor_script() -> int:
    """The `jax-rocm-doctor` console script: `doctor` without the subcommand word (`--cluster ...`: the preflight)."""
    if sys.argv[1:2] == ["--cluster"]:
        return guarded(["cluster", *sys.argv[2:]])
    return guarded(["doctor", *sys.argv[1:]])


def guarded(argv: list[str] | None = None) -> int:
    """`main`, but a file of ours that cannot be imported (a damaged install) is one line and exit 1, and output
    that cannot be written (a reader that went away, a full disk) is one line, never a traceback."""
    try:
        return _flushed(main(argv))
    except BrokenPipeError:
        # `doctor | head -1`: the reader has what it wanted. Point stdout at /dev/null so that the interpreter's
        # own flush at exit does not raise again, and leave as a process killed by SIGPIPE would (128 + 13).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            raise
        with contextlib.suppress(OSError):
            sys.stderr.write(f"python -m {__package__}: cannot write the output: {error.strerror or error}\n")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as error:
        import traceback

        # Raised while a module body ran (importlib hides its own frames; a module's shows as "<module>"),
        # or a file that is no Python at all: a damaged install. Anything else is a bug, shown as such.
        frames = traceback.extract_tb(error.__traceback__)[1:]
        if not isinstance(error, SyntaxError | ImportError) and not any(f.name == "<module>" for f in frames):
            raise
        from jax_plugins.rocm7 import DAMAGED_INSTALL, damaged_install

        what, fix = damaged_install(error, __name__)
        if "--json" in (argv if argv is not None else sys.argv):
            import json

            finding = {"id": DAMAGED_INSTALL, "severity": "error", "summary": what, "fix": fix, "evidence": []}
            sys.stdout.write(json.dumps({"ok": False, "findings": [finding]}, indent=2) + "\n")
        else:
            sys.stdout.write(f"jax will not get RocmDevice: {what}\n  fix: {fix} [{DAMAGED_INSTALL}]\n")
        return 1


def _flushed(code: int) -> int:
    """Flush stdout here, where a failed write is still ours to report (at exit it would be a traceback)."""
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(guarded())
