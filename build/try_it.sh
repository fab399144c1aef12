#!/usr/bin/env bash
# The main job (README): build the wheel pair from the released library, install it with
# jax 0.10.2 into .venv-try, and show what the loader concludes about this machine.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv-try}
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r requirements/build.txt

echo "== building the wheel pair (library: ${PJRT_LIBRARY:-released}) =="
OUT=$(mktemp -d)
"$VENV/bin/python" build/build.py wheels --pjrt-library "${PJRT_LIBRARY:-released}" --output-dir "$OUT"
mkdir -p dist && cp "$OUT"/*.whl dist/

echo "== installing jax 0.10.2 with the pair =="
"$VENV/bin/python" -m pip install --disable-pip-version-check -q "jax==0.10.2" "jaxlib==0.10.2" "$OUT"/*.whl
# A rerun builds wheels of the same version: replace what an earlier run installed.
"$VENV/bin/python" -m pip install --disable-pip-version-check -q --force-reinstall --no-deps "$OUT"/*.whl

echo "== what the doctor says about this machine =="
"$VENV/bin/jax-rocm-doctor" || true
echo "== what jax sees =="
"$VENV/bin/python" -c "import jax; print(jax.devices())"
