#!/usr/bin/env bash
# The test command (README): a pinned venv in .venv, lint, then the whole suite.
# Tests marked `rocm` run only where an AMD GPU is usable; `slow` ones build wheels.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --disable-pip-version-check -q -r requirements/test.txt

.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Exit 5 (no tests collected) would mean the suite is broken: let it fail the run.
.venv/bin/python -m pytest "$@"
