"""Build and check the released wheel pair of every row of the release table, timing each stage.

    python benchmarks/released_builds.py [--rows 0.12.0,0.11.2] [--output-dir DIR]

For each row: `build.py wheels --pjrt-library released` for its first CPython (the published library, newest
.postN, sha256-verified, re-packaged; the plugin with the published extension modules; `check` on both), then
the plugin alone for each other CPython it serves. Prints the seconds of each build and exits 1 if any fails.
The suite builds the newest row (tests/e2e/test_released_rows.py) and checks every row's data against its
published library; this sweep is the rest, run before a release-table change lands.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jax_rocm7_plugin._policy import releases  # noqa: E402


def build(arguments: list[str], output: Path) -> tuple[float, bool, str]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(REPO / "build" / "build.py"), "wheels", "--output-dir", str(output), *arguments],
        capture_output=True,
        text=True,
    )
    return time.monotonic() - started, done.returncode == 0, (done.stdout + done.stderr)[-2000:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", help="comma-separated releases (default: every row)")
    parser.add_argument("--output-dir", type=Path, help="keep the wheels here (default: a temporary folder)")
    args = parser.parse_args()
    rows = releases.table()
    if args.rows:
        wanted = set(args.rows.split(","))
        rows = tuple(r for r in rows if r.release in wanted)
        missing = wanted - {r.release for r in rows}
        if missing:
            parser.error(f"not rows of the release table: {', '.join(sorted(missing))}")
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        base = args.output_dir or Path(scratch)
        print(f"{'row':10} {'CPython':8} {'what':24} {'seconds':>8}  result")
        for row in rows:
            first, *others = row.python
            common = ["--release", row.release]
            seconds, ok, tail = build(
                [*common, "--pjrt-library", "released", "--python-version", first], base / row.release / first
            )
            result = "ok" if ok else "FAILED"
            print(f"{row.release:10} {first:8} {'pair (re-packaged, check)':24} {seconds:8.1f}  {result}")
            failed += not ok
            if not ok:
                print(tail, file=sys.stderr)
            for python in others:
                seconds, ok, tail = build(
                    [*common, "--python-version", python, "--only", "plugin"], base / row.release / python
                )
                print(f"{row.release:10} {python:8} {'plugin (check)':24} {seconds:8.1f}  {'ok' if ok else 'FAILED'}")
                failed += not ok
                if not ok:
                    print(tail, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
