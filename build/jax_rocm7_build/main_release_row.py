"""`build.py release-row X.Y.Z [--jax-source DIR] [--write]`: the release table's row of a published release.

Made from the package index (the published wheels and their sha256) and the published jaxlib
(the JAX commit); --write adds or replaces the row in releases.json, newest first.
"""

from __future__ import annotations

import argparse
import json

from jax_rocm7_build import arguments

NAME = "release-row"
HELP = "print the releases.json row of a published release"


def configure_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    row = commands.add_parser(NAME, help=HELP, description=__doc__)
    row.add_argument("release", metavar="X.Y.Z")
    row.add_argument(
        "--jax-source", type=arguments.directory, metavar="DIR", help="a jax-ml/jax checkout: read XLA's pin"
    )
    row.add_argument("--write", action="store_true", help="add (or replace) the row in releases.json")


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    return None


def execute(args: argparse.Namespace) -> int:
    from jax_rocm7_build._checkout import CACHE_DIR
    from jax_rocm7_build.release_row import release_row
    from jax_rocm7_plugin._policy import releases

    table = json.loads(releases.TABLE.read_text(encoding="utf-8"))
    rows = [r for r in table["releases"] if r["release"] != args.release]
    previous = max(rows, key=lambda r: releases.version_key(r["release"]), default=None)
    row = release_row(args.release, previous, args.jax_source, CACHE_DIR / "released")
    print(json.dumps(row, indent=2))
    if args.write:
        table["releases"] = sorted([*rows, row], key=lambda r: releases.version_key(r["release"]), reverse=True)
        releases.TABLE.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {releases.TABLE}: review the row (ROCm version, PJRT C API major) before committing")
    return 0
