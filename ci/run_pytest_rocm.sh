#!/usr/bin/env bash
# On an AMD GPU runner: the single-accelerator tests under pytest-xdist with one GPU per
# worker (jax_rocm7_plugin.pytest_gpu_isolation), then the `multiaccelerator` tests
# serially with every GPU visible.
#
#   bash ci/run_pytest_rocm.sh [--dry-run] [PYTEST ARGS...]   (default test path: tests)
#
# JAX_ROCM_GPU_COUNT overrides the GPU count (default: usable, visible GPUs per the doctor);
# JAX_ROCM_WORKERS_PER_GPU (default 1) runs more workers on each GPU. --dry-run prints the
# commands without running them.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then
  DRY_RUN=1
  shift
fi
PYTHON=${PYTHON:-python3}
if [ $# -eq 0 ]; then
  set -- tests
fi

run() {
  echo "+ $*"
  if [ "$DRY_RUN" = 0 ]; then
    "$@"
  fi
}

gpus=${JAX_ROCM_GPU_COUNT:-}
if [ -z "$gpus" ]; then
  # The doctor exits 1 when ROCm is unusable; its JSON still counts the GPUs.
  report=$("$PYTHON" -m jax_rocm7_plugin doctor --json || true)
  gpus=$(printf '%s' "$report" | "$PYTHON" -c \
    'import json, sys; print(sum(1 for g in json.load(sys.stdin)["gpus"] if g["usable"] and g["visible"]))')
fi
case "$gpus" in
  '' | *[!0-9]*) echo "run_pytest_rocm.sh: JAX_ROCM_GPU_COUNT=$gpus is not a number" >&2; exit 2 ;;
esac
if [ "$gpus" -lt 1 ]; then
  echo "run_pytest_rocm.sh: no usable AMD GPU here; python -m jax_rocm7_plugin doctor says why" >&2
  exit 1
fi
per_gpu=${JAX_ROCM_WORKERS_PER_GPU:-1}
workers=$((gpus * per_gpu))

run env JAX_ENABLE_ROCM_XDIST="$gpus" "$PYTHON" -m pytest -n "$workers" \
  -p jax_rocm7_plugin.pytest_gpu_isolation -m "rocm and not multiaccelerator" "$@"
run "$PYTHON" -m pytest -p no:xdist -m "rocm and multiaccelerator" "$@"
