"""`python -m jax_rocm7_plugin doctor [--json] [--sysroot DIR] [--library PATH] [--deep]`.

Exit status: 0 when jax will get the ROCm backend, 1 when not, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jax_rocm7_plugin")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="say why this machine does or does not get RocmDevice")
    doctor.add_argument("--json", action="store_true", help="one JSON object on stdout")
    doctor.add_argument("--sysroot", type=Path, help="read machine files under DIR (default: $JAX_ROCM_SYSROOT or /)")
    doctor.add_argument("--library", type=Path, help="examine this PJRT library instead of the installed one")
    doctor.add_argument(
        "--deep", action="store_true", help="also start the HIP runtime in a child process and ask it for devices"
    )
    args = parser.parse_args(argv)

    from jax_rocm7_plugin._doctor.diagnose import diagnose, internal_error
    from jax_rocm7_plugin._doctor.render import render_text
    from jax_rocm7_plugin._doctor.report import render_json
    from jax_rocm7_plugin._settings import PJRT_LIBRARY, read_settings

    if args.sysroot is not None and not args.sysroot.is_dir():
        parser.error(f"--sysroot {args.sysroot}: not a directory")
    environ = dict(os.environ)
    if args.library is not None:  # --library replaces the variable (made absolute, as the variable must be)
        environ[PJRT_LIBRARY] = str(args.library.absolute())
    # --sysroot replaces JAX_ROCM_SYSROOT, so that variable's value (good or bad) no longer matters.
    settings = read_settings(environ, sysroot=args.sysroot)
    try:
        report = diagnose(settings, deep=args.deep)
    except Exception as error:  # noqa: BLE001 - a probe we did not foresee failing: still one finding, no traceback
        report = internal_error(error, settings)
    text = render_json(report) if args.json else render_text(report)
    # Values from the environment may hold bytes that are not UTF-8: shown escaped, never a traceback.
    sys.stdout.write(text.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
    return 0 if report.ok else 1


def doctor_script() -> int:
    """The `jax-rocm-doctor` console script: `doctor` without the subcommand word."""
    return main(["doctor", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
