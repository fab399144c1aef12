#!/usr/bin/env bash
# On a ROCm 7 build host: build the wheel pair with Bazel (XLA and JAX at the pinned
# commits; the plugin wheel then carries the extension modules), then check the wheels.
#
#   bash ci/build_rocm_artifacts.sh [--dry-run] [OUTPUT_DIR] [-- BUILD.PY WHEELS ARGS...]
#
# --dry-run prints the Bazel and packaging commands (build.py wheels --dry-run) and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then
  DRY_RUN=1
  shift
fi
OUTPUT_DIR=dist/rocm
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  OUTPUT_DIR=$1
  shift
fi
if [ "${1:-}" = "--" ]; then
  shift
fi
PYTHON=${PYTHON:-python3}

if [ "$DRY_RUN" = 1 ]; then
  exec "$PYTHON" build/build.py wheels --pjrt-library bazel --output-dir "$OUTPUT_DIR" --dry-run "$@"
fi
mkdir -p "$OUTPUT_DIR"
"$PYTHON" build/build.py wheels --pjrt-library bazel --output-dir "$OUTPUT_DIR" "$@" | tee "$OUTPUT_DIR/built.txt"
mapfile -t wheels < <(grep '\.whl$' "$OUTPUT_DIR/built.txt")
"$PYTHON" build/build.py check "${wheels[@]}"
