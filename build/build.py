#!/usr/bin/env python3
"""One CLI for building the jax-rocm7 wheel pair: a thin layer over build/jax_rocm7_build/.

    python build/build.py wheels [--pjrt-library PATH|released|bazel] [--output-dir DIR]
                                 [--release X.Y.Z] [--python-version 3.12|all]
                                 [--extension-modules DIR|released|none]
                                 [--post N] [--only pjrt|plugin] [--dry-run]
                                 [--amdgpu-targets gfx942,...]
                                 [--xla-source DIR] [--jax-source DIR] [--rocm-clang]
    python build/build.py release-row X.Y.Z [--jax-source DIR] [--write]
    python build/build.py check WHEEL...
    python build/build.py variables --snapshots DIR [--output FILE] [--check]
    python build/build.py packages --snapshots DIR [--output FILE] [--check]

Each verb is a module `jax_rocm7_build/main_<verb>.py` (configure_parser, validate, execute;
heavy imports happen in execute). Python puts this script's folder first on sys.path, which
is how `jax_rocm7_build` is found without an install; build/ itself is no package, so
`python -m build` at the repository root is PyPA's build.
"""

from __future__ import annotations

import argparse
import sys

from jax_rocm7_build._checkout import use_checkout


def main(argv: list[str] | None = None) -> int:
    # From here on `jax_rocm7_plugin` is this checkout's tree (what the wheels package), never an installed one.
    use_checkout()
    from jax_rocm7_build import main_check, main_packages, main_release_row, main_variables, main_wheels
    from jax_rocm7_build.progress import BuildError

    verbs = {verb.NAME: verb for verb in (main_wheels, main_release_row, main_check, main_variables, main_packages)}

    parser = argparse.ArgumentParser(prog="build/build.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for verb in verbs.values():
        verb.configure_parser(commands)
    args = parser.parse_args(argv)
    verb = verbs[args.command]
    verb.validate(args, parser)
    try:
        return verb.execute(args)
    except BuildError as error:
        print(f"build.py: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
