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

    from jax_rocm7_plugin import doctor as doctor_module
    from jax_rocm7_plugin.sysroot import sysroot

    if args.sysroot is not None and not args.sysroot.is_dir():
        parser.error(f"--sysroot {args.sysroot}: not a directory")
    root = args.sysroot if args.sysroot is not None else sysroot(os.environ)  # a bad variable is a finding
    try:
        # --sysroot replaces the variable, so its value (good or bad) no longer matters.
        environ = {k: v for k, v in os.environ.items() if k != "JAX_ROCM_SYSROOT" or args.sysroot is None}
        report = doctor_module.diagnose(environ, root, args.library, deep=args.deep)
    except Exception as error:  # noqa: BLE001 - a probe we did not foresee failing: still one finding, no traceback
        report = doctor_module.internal_error(error, root)
    text = doctor_module.render_json(report) if args.json else doctor_module.render_text(report)
    # Values from the environment may hold bytes that are not UTF-8: shown escaped, never a traceback.
    sys.stdout.write(text.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
    return 0 if report.ok else 1


def doctor_script() -> int:
    """The `jax-rocm-doctor` console script: `doctor` without the subcommand word."""
    return main(["doctor", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
