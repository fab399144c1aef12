"""Where the suite's time goes, per test file: a pytest log run with `--durations=0` in, worker-seconds out.

    bash ci/run_tests.sh --durations=0 > suite.log      # or: pytest -n 3 --dist loadgroup --durations=0
    python benchmarks/suite_durations.py suite.log [--top 30]

Prints the total (call, setup, teardown) and each file's worker-seconds and test count, largest first: what a
cut would save, divided by the number of workers, is what the wall clock gains.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)")


def per_file(text: str) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """(seconds per file, tests per file, seconds per phase) from pytest's durations lines."""
    seconds: Counter[str] = Counter()
    tests: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    for line in text.splitlines():
        match = LINE.match(line)
        if match is None:
            continue
        value, phase, node = float(match.group(1)), match.group(2), match.group(3)
        name = node.split("::")[0]
        seconds[name] += value
        phases[phase] += value
        if phase == "call":
            tests[name] += 1
    return seconds, tests, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--top", type=int, default=30)
    arguments = parser.parse_args()
    seconds, tests, phases = per_file(arguments.log.read_text(errors="replace"))
    if not seconds:
        raise SystemExit(f"{arguments.log}: no durations lines (run pytest with --durations=0)")
    total = sum(phases.values())
    print(f"worker-seconds: {total:.0f} (" + ", ".join(f"{k} {v:.0f}" for k, v in phases.most_common()) + ")")
    for name, value in seconds.most_common(arguments.top):
        print(f"{value:8.1f} s {tests[name]:5d} tests  {value / total:5.1%}  {name}")


if __name__ == "__main__":
    main()
