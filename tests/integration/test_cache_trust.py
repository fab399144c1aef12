"""The caches the plugin reads back and acts on are trusted only when they are this user's alone (_safe_io): a
start-up plan or a load verdict that another user could have written is never used, nothing is written there,
and the backend still comes up from the cold path.

Real jax 0.10.2 of the test venv, this checkout's plugin, the stand-in PJRT library on a synthetic 8 x gfx942
machine (tests/integration/test_warm_path.py's). Tests run as root: "another user" is uid 1000 by chown, and
"writable by others" the mode bits, which the checks read as numbers whoever runs them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_warm_path import Machine, warm
from tests.support.environment import plugin_environment
from tests.support.native import compile_shared
from tests.support.sysroots import make_sysroot

OTHER_USER = 1000


@pytest.fixture
def machine(tmp_path: Path, standin_library: Path, build: Path) -> Machine:
    return Machine(tmp_path, standin_library, build)


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    "untrusted",
    [
        "plans folder writable by all",
        "plan file writable by all",
        "plan owned by another user",
        "cache folder above the plugin's writable by all",
        "plugin's cache root owned by another user",
    ],
)
def test_a_plan_another_user_could_have_written_is_never_used(machine: Machine, untrusted: str) -> None:
    cold, _ = machine.start()
    (plan,) = machine.plans()
    plans, root = plan.parent, plan.parent.parent
    if untrusted == "plans folder writable by all":
        plans.chmod(0o777)
    elif untrusted == "plan file writable by all":
        plan.chmod(0o666)
    elif untrusted == "plan owned by another user":
        os.chown(plan, OTHER_USER, OTHER_USER)
    elif untrusted == "cache folder above the plugin's writable by all":
        machine.cache.chmod(0o777)  # XDG_CACHE_HOME on a shared project folder
    else:
        os.chown(root, OTHER_USER, OTHER_USER)
    before = _snapshot(plans)
    again, log = machine.start()
    assert not warm(again), again  # the cold path ran
    assert again["devices"] == cold["devices"]  # and the backend came up from it
    assert "cache not used" in log and "(the plan of the last start)" not in log
    assert _snapshot(plans) == before  # nothing written there


def test_a_plan_under_a_root_owned_sticky_folder_is_used(machine: Machine) -> None:
    """/tmp's kind of folder (root's, world-writable, sticky) may stand above the cache: the plan is used."""
    machine.start()
    machine.cache.chmod(0o1777)
    again, log = machine.start()
    assert warm(again) and "cache not used" not in log


def test_what_the_plugin_writes_is_private(machine: Machine) -> None:
    machine.start()
    (plan,) = machine.plans()
    verdicts = sorted((machine.cache / "jax-rocm7-plugin" / "load-verdicts").glob("*.json"))
    assert verdicts
    for path in [plan, *verdicts]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for folder in (plan.parent, plan.parent.parent, verdicts[0].parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert not list(plan.parent.glob(".*.tmp"))  # written whole, then renamed


_DIES = """
#include <stdlib.h>
__attribute__((constructor)) static void boom(void) { abort(); }
void* GetPjrtApi(void) { return 0; }
"""
_IMPORT = "import jax; print(len(jax.devices()))"


def _plant_clean_verdict(library: Path, environ: dict[str, str], standin_library: Path) -> Path:
    """A load verdict saying `library` loads cleanly, filed where the loader looks it up (its key)."""
    from jax_rocm7_plugin._binary import load_test
    from jax_rocm7_plugin._settings import read_settings

    settings = read_settings(environ)
    clean = load_test.probe(standin_library, "pjrt", settings, use_cache=False)  # a real clean load's verdict
    assert clean.loaded and settings.cache_dir is not None
    key = load_test._identity(library, "pjrt", settings.load_identity)
    assert key is not None
    settings.cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    planted = settings.cache_dir / f"{key}.json"
    record = {k: v for k, v in clean._asdict().items() if k != "cached"}
    planted.write_text(json.dumps(record))
    planted.chmod(0o600)
    return planted


def test_a_verdict_planted_for_a_library_that_crashes_never_lets_it_load_in_process(
    tmp_path: Path, standin_library: Path
) -> None:
    root = make_sysroot(tmp_path / "machine")
    library = compile_shared(tmp_path / "lib", "dies", _DIES)
    environ = plugin_environment(root, library, tmp_path / "cache", JAX_ROCM_WARM="0")
    planted = _plant_clean_verdict(library, environ, standin_library)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _IMPORT], env=environ, capture_output=True, text=True, timeout=180, cwd=tmp_path
        )

    # Made by this user alone, the verdict is believed: the library is loaded in-process and the process dies.
    # (The control: what the check below prevents.)
    trusted = run()
    assert trusted.returncode < 0, trusted.stderr[-1500:]
    # Planted by another user, or writable by others: never believed; the child-process load test runs instead,
    # finds the crash, and `import jax` goes on on the CPU.
    for change in (lambda: planted.chmod(0o666), lambda: os.chown(planted, OTHER_USER, OTHER_USER)):
        planted.chmod(0o600)
        os.chown(planted, os.geteuid(), os.getegid())
        change()
        outcome = run()
        assert outcome.returncode == 0, outcome.stderr[-1500:]
        assert "pjrt-library-crashed" in outcome.stderr, outcome.stderr[-1500:]
