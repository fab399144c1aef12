#!/usr/bin/env bash
# The main job (README): build the wheel pair from the released library for the newest release the
# newest CPython found here runs (0.12.0 on 3.12/3.13; 0.10.2 on 3.11), install it with that jax into
# .venv-try, and show what the loader concludes about this machine.
#
# Choose another: PYTHON=/path/to/python3.11 bash build/try_it.sh   (its newest release: 0.10.2)
#                 RELEASE=0.11.2 bash build/try_it.sh                (a release of releases.json)
#                 PJRT_LIBRARY=/path/to/lib.so bash build/try_it.sh  (package that library instead)
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {  # newest CPython 3.13/3.12/3.11 on PATH or under pyenv that runs
  local version candidate root=${PYENV_ROOT:-$HOME/.pyenv}
  for version in 3.13 3.12 3.11; do
    for candidate in $(ls -d "$root"/versions/"$version".*/bin/python"$version" 2>/dev/null | sort -V -r) \
      "$(command -v "python$version" || true)"; do
      if [ -n "$candidate" ] && env -u PYENV_VERSION "$candidate" -c 'import sys' 2>/dev/null; then
        echo "$candidate"
        return
      fi
    done
  done
  command -v python3
}

PYTHON=${PYTHON:-$(find_python)}
PY_VERSION=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV=${VENV:-.venv-try}
"$PYTHON" -m venv --clear "$VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r requirements/build.txt

echo "== building the wheel pair for CPython $PY_VERSION (library: ${PJRT_LIBRARY:-released}) =="
OUT=$(mktemp -d)
"$VENV/bin/python" build/build.py wheels --pjrt-library "${PJRT_LIBRARY:-released}" --output-dir "$OUT" \
  --python-version "$PY_VERSION" ${RELEASE:+--release "$RELEASE"}
mkdir -p dist && cp "$OUT"/*.whl dist/
PLUGIN=$(ls "$OUT"/jax_rocm7_plugin-*.whl)
RELEASE=$(basename "$PLUGIN" | cut -d- -f2 | cut -d. -f1-3)

echo "== installing jax $RELEASE with the pair =="
"$VENV/bin/python" -m pip install --disable-pip-version-check -q "jax==$RELEASE" "jaxlib==$RELEASE" "$OUT"/*.whl

echo "== what the doctor says about this machine =="
"$VENV/bin/jax-rocm-doctor" || true
echo "== what jax $RELEASE on CPython $PY_VERSION sees =="
"$VENV/bin/python" -c "import jax; print(jax.devices())"
