"""`build.py check WHEEL...`: tags, RECORD, policy, exports, RUNPATH, pins; one line per problem."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "check"
HELP = "check wheels: tags, RECORD, policy, exports, RUNPATH, pins"


def configure_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    check = commands.add_parser(NAME, help=HELP, description=__doc__)
    check.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    return None


def execute(args: argparse.Namespace) -> int:
    missing = [str(w) for w in args.wheels if not w.is_file()]
    if missing:
        print(f"build.py: error: no such wheel: {', '.join(missing)}", file=sys.stderr)
        return 2
    return check_wheels(args.wheels)


def check_wheels(wheels: list[Path]) -> int:
    """One line per problem (`WHEEL: problem`), or `WHEEL: ok`; exit 1 when any wheel has a problem."""
    from jax_rocm7_build.wheel_check import check_wheel

    bad = 0
    for wheel in wheels:
        problems = check_wheel(wheel)
        for problem in problems:
            print(f"{wheel.name}: {problem}")
        if problems:
            bad += 1
        else:
            print(f"{wheel.name}: ok")
    return 1 if bad else 0
