#!/usr/bin/env bash
# The test command (README): a pinned venv in .venv, lint, then the whole suite.
# Tests marked `rocm` run only where an AMD GPU is usable; `slow` ones build wheels.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# uv (pinned in requirements/test.txt) installs the pinned requirements: the same wheels pip would take, from
# uv's cache, minutes faster on a fresh clone. pip bootstraps it.
UV_PIN=$(grep -E '^uv==' requirements/test.txt)
.venv/bin/python -m pip install --disable-pip-version-check -q "$UV_PIN"
.venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python -r requirements/test.txt
# The build library, in place: tools and tests import jax_rocm7_build like any package (only it: build/build.py
# must not shadow PyPA's `build`). Its build backend is the setuptools requirements/build.txt pins.
.venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps --no-build-isolation -e ./build

# A real HIP runtime for the doctor's --deep tests: Debian's libamdhip64-5 (HIP 5.2) loads
# without a GPU and answers hipErrorNoDevice. Installed only where we may (root + apt).
if [ ! -e /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q --no-install-recommends libamdhip64-5 >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends libamdhip64-5 >/dev/null; }
fi

# LLVM's assembler (llvm-mc, Debian's LLVM 14) assembles AMDGPU code objects for the `doctor --binary` tests.
if ! command -v llvm-mc >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q --no-install-recommends llvm >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends llvm >/dev/null; }
fi

# rpm (Debian's, sqlite backend) records a package in a machine's rpm database for the doctor's search of ROCm that a
# package database lists (tests/integration/test_rocm_elsewhere.py).
if ! command -v rpmbuild >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q --no-install-recommends rpm >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends rpm >/dev/null; }
fi

# Real launchers for the multi-process tests (tests/e2e/test_launchers.py): Debian's Slurm (slurmctld, slurmd,
# slurm-client, munge; the tests start a one-node cluster of their own) and Open MPI 4 (openmpi-bin: the release
# whose variables jax's Open MPI detection reads). As root only; under CI=true a missing one fails those tests.
if ! { command -v srun && command -v slurmd && command -v munged && command -v mpirun; } >/dev/null 2>&1 \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  LAUNCHERS="slurmctld slurmd slurm-client munge openmpi-bin"
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $LAUNCHERS >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $LAUNCHERS >/dev/null; }
fi

# Hosts with links of their own for the throttled-link test of `cluster --deep` (tests/support/netlab.py): network
# namespaces, a bridge and tc's token bucket, from iproute2. As root only; under CI=true a missing one fails it.
if ! { command -v ip && command -v tc; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q --no-install-recommends iproute2 >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends iproute2 >/dev/null; }
fi

# Debian's Chromium for the pages' browser tests (tests/integration/test_pages.py), driven by Playwright. As root
# only; under CI=true a missing one fails those tests, elsewhere they skip with one line.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q --no-install-recommends chromium >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null; }
fi

# buildifier lints the Bazel files; the npm registry ships its binaries (pinned, checked).
BUILDIFIER_VERSION=8.2.1
BUILDIFIER_SHA256=6ceb7b0ab7cf66fceccc56a027d21d9cc557a7f34af37d2101edb56b92fcfa1a
if ! echo "$BUILDIFIER_SHA256  .tools/buildifier" | sha256sum -c --status 2>/dev/null && command -v npm >/dev/null; then
  mkdir -p .tools/npm
  (cd .tools/npm && npm pack --silent "@bazel/buildifier@$BUILDIFIER_VERSION" >/dev/null 2>&1 \
    && tar -xzf "bazel-buildifier-$BUILDIFIER_VERSION.tgz" package/buildifier-linux_amd64) \
    && cp .tools/npm/package/buildifier-linux_amd64 .tools/buildifier && chmod +x .tools/buildifier
  echo "$BUILDIFIER_SHA256  .tools/buildifier" | sha256sum -c --quiet
fi

.venv/bin/ruff check .
.venv/bin/ruff format --check .
# The declared import direction between the plugin's layers (pyproject.toml [tool.importlinter]).
.venv/bin/lint-imports
# Byte-compiled once here (compileall writes whatever PYTHONDONTWRITEBYTECODE says): where the environment forbids
# writing bytecode, each of the suite's child processes would compile the plugin, the build library and the test
# support from source again (~0.2 s of CPU each).
.venv/bin/python -m compileall -q -j0 jax_rocm7_plugin jax_plugins pjrt build/jax_rocm7_build build/build.py tests \
  >/dev/null
# Exit 5 (no tests collected) would mean the suite is broken: let it fail the run.
# Three workers on this 2-core machine: most multi-process tests spend their time waiting out a deadline, and two
# workers left a third of the CPU idle; four are no faster (590 s against 588 s, benchmarks/README.md) and load
# the timing-bound tests more. Wheels and venvs are made once per
# session for every worker (tests/support/shared.py); the launcher tests share one worker (one Slurm cluster),
# and tests that change a venv keep theirs on one (xdist_group).
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-3}" --dist loadgroup --durations=25 "$@"
