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

    root = args.sysroot if args.sysroot is not None else sysroot(os.environ)
    if not root.is_dir():
        parser.error(f"--sysroot {root}: not a directory")
    try:
        report = doctor_module.diagnose(os.environ, root, args.library, deep=args.deep)
    except Exception as error:  # noqa: BLE001 - a probe we did not foresee failing: still one finding, no traceback
        report = doctor_module.internal_error(error, root)
    print(doctor_module.render_json(report) if args.json else doctor_module.render_text(report))
    return 0 if report.ok else 1


def doctor_script() -> int:
    """The `jax-rocm-doctor` console script: `doctor` without the subcommand word."""
    return main(["doctor", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
