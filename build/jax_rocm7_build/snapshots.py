"""What the generators of the doctor's data share (`build.py variables`, `build.py packages`): the arguments (a
folder of git snapshots, the output file, --check), reading a file at a pinned commit, and writing or checking the
generated table. Build-only."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any


def add_arguments(commands: argparse._SubParsersAction, name: str, help_text: str, doc: str, output: Path) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(name, help=help_text, description=doc)
    parser.add_argument("--snapshots", type=Path, required=True, metavar="DIR")
    parser.add_argument("--output", type=Path, default=output, metavar="FILE")
    parser.add_argument("--check", action="store_true", help="compare with FILE instead of writing it")


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if not args.snapshots.is_dir():
        parser.error(f"--snapshots {args.snapshots}: no such folder")


def git_dir(snapshots: Path, repo: str) -> Path:
    """The bare repository of `repo` ("owner/name") in `snapshots` (`<owner>+<name>/repo`, or that folder itself)."""
    from jax_rocm7_build.progress import BuildError

    folder = snapshots / repo.replace("/", "+")
    for candidate in (folder / "repo", folder):
        if (candidate / "HEAD").is_file():
            return candidate
    raise BuildError(f"no snapshot of {repo} in {snapshots} (expected {folder}/repo, a bare git repository)")


def git(directory: Path, *arguments: str, stdin: bytes | None = None) -> bytes:
    from jax_rocm7_build.progress import BuildError

    done = subprocess.run(["git", f"--git-dir={directory}", *arguments], input=stdin, capture_output=True)
    if done.returncode != 0:
        raise BuildError(
            f"git {' '.join(arguments[:2])} in {directory}: {done.stderr.decode(errors='replace').strip()}"
        )
    return done.stdout


def write_or_check(table: dict[str, Any], output: Path, check: bool, said: str) -> int:
    """Write `table` to `output` (then print `said`), or with `check` say whether it is what `output` holds."""
    text = json.dumps(table, indent=1) + "\n"
    if check:
        same = output.is_file() and output.read_text(encoding="utf-8") == text
        print(f"{output}: {'up to date' if same else 'differs from what the sources give'}")
        return 0 if same else 1
    output.write_text(text, encoding="utf-8")
    print(f"{output}: {said}")
    return 0
