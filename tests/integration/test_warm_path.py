"""The warm path (_warm.py): on a machine whose last start registered the backend, the next `import jax;
jax.devices()` registers from the plan that start wrote, importing a named set of our modules only; and a plan
whose library, ROCm, machine or variables changed is never used.

Real jax 0.10.2 of the test venv, this checkout's plugin, the stand-in PJRT library (OpenXLA's CPU plugin)
registered under 'rocm' on a synthetic 8 x gfx942 machine (tests/support/sysroots.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.environment import REPO, plugin_environment
from tests.support.sysroots import Gpu, add_rocm, make_sysroot

# What the warm path may import of ours: the entry module, the plan reader and the foundation it uses. Anything
# heavier (the pipeline, the known issues, the findings catalogue, the settings) is a cache miss's.
WARM_IMPORTS = {
    "jax_plugins.rocm7",
    "jax_rocm7_plugin._loader",
    "jax_rocm7_plugin._loader.warm",
    "jax_rocm7_plugin._environment",
    "jax_rocm7_plugin._record",
    "jax_rocm7_plugin._names",
    "jax_rocm7_plugin._safe_io",
}
_START = """
import json, logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
import jax
before = set(sys.modules)
devices = jax.devices("rocm") if "rocm" in sys.argv[1:] else jax.devices()
ours = sorted(m for m in set(sys.modules) - before if m.startswith(("jax_rocm7_plugin", "jax_plugins")))
print(json.dumps({"ours": ours, "devices": len(devices)}))
"""


class Machine:
    def __init__(self, tmp_path: Path, library: Path, build: Path) -> None:
        self.root = make_sysroot(tmp_path / "machine", [Gpu(drm_render_minor=128 + i) for i in range(8)])
        self.home = add_rocm(self.root, build, "7.2.3")
        self.library = tmp_path / "lib" / library.name
        self.library.parent.mkdir()
        shutil.copy(library, self.library)
        self.cache = tmp_path / "cache"
        self.tmp_path = tmp_path

    def start(self, *, rocm: bool = True, **variables: str) -> tuple[dict[str, object], str]:
        environ = plugin_environment(self.root, self.library, self.cache, **variables)
        done = subprocess.run(
            [sys.executable, "-c", _START, *(["rocm"] if rocm else [])],
            env=environ,
            capture_output=True,
            text=True,
            timeout=180,
            cwd=self.tmp_path,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr

    def plans(self) -> list[Path]:
        return sorted((self.cache / "jax-rocm7-plugin" / "plans").glob("*.json"))


@pytest.fixture
def machine(tmp_path: Path, standin_library: Path, build: Path) -> Machine:
    return Machine(tmp_path, standin_library, build)


def warm(outcome: dict[str, object]) -> bool:
    return "jax_rocm7_plugin._pipeline" not in outcome["ours"]  # type: ignore[operator]


def test_the_second_start_registers_from_the_plan_importing_only_the_named_set(machine: Machine) -> None:
    cold, _ = machine.start()
    assert cold["devices"] and not warm(cold) and len(machine.plans()) == 1
    again, log = machine.start()
    assert again["devices"] == cold["devices"]
    assert set(again["ours"]) <= WARM_IMPORTS, sorted(set(again["ours"]) - WARM_IMPORTS)  # type: ignore[arg-type]
    assert "(the plan of the last start)" in log


def test_what_the_first_start_said_is_said_again(machine: Machine) -> None:
    """A warning of the checks (CUDA_VISIBLE_DEVICES reordering the GPUs) and the workarounds set come back."""
    variables = {"CUDA_VISIBLE_DEVICES": "1,0"}
    _, first = machine.start(**variables)
    again, second = machine.start(**variables)
    assert warm(again)

    def said(log: str) -> list[str]:
        return [line for line in log.splitlines() if "ROCm backend:" in line and "plan" not in line]

    assert said(first) and said(second) == said(first)
    assert any("cuda-visible-devices-set" in line and " WARNING " in line for line in said(second))


def test_a_lone_process_of_the_next_slurm_job_uses_the_plan(machine: Machine) -> None:
    """`srun -n 1 python train.py` twice: the second job's ids differ, its one process takes the plan; a job across
    another number of hosts (known issues of jobs across hosts match by it) does not."""
    first = {"SLURM_JOB_ID": "1001", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_JOB_NUM_NODES": "1"}
    cold, _ = machine.start(**first)
    assert not warm(cold)
    again, log = machine.start(**{**first, "SLURM_JOB_ID": "1002", "SLURM_STEP_ID": "3"})
    assert warm(again) and "(the plan of the last start)" in log
    wider, _ = machine.start(**{**first, "SLURM_JOB_ID": "1003", "SLURM_JOB_NUM_NODES": "4"})
    assert not warm(wider)


@pytest.mark.parametrize(
    "change",
    ["library replaced in place", "ROCm upgraded", "GPU gone", "render node no longer ours", "variable set"],
)
def test_a_plan_whose_world_changed_is_never_used(machine: Machine, change: str) -> None:
    machine.start()
    variables: dict[str, str] = {}
    if change == "library replaced in place":
        data = machine.library.read_bytes()
        machine.library.write_bytes(data)  # same bytes, new write: the identity the load verdict keys on changes
        os.utime(machine.library, ns=(1, 1))
    elif change == "ROCm upgraded":
        newer = machine.root / "opt" / "rocm-7.2.4"
        shutil.copytree(machine.home, newer, symlinks=True)
        (newer / ".info" / "version").write_text("7.2.4-12\n")
        (machine.root / "opt" / "rocm").unlink()
        (machine.root / "opt" / "rocm").symlink_to("rocm-7.2.4")
    elif change == "GPU gone":
        shutil.rmtree(machine.root / "sys/class/kfd/kfd/topology/nodes/8")
    elif change == "render node no longer ours":
        os.chmod(machine.root / "dev/dri/renderD135", 0o000)
    else:
        variables["HIP_VISIBLE_DEVICES"] = "0"
    again, log = machine.start(**variables)
    assert not warm(again), again
    assert "(the plan of the last start)" not in log


def test_an_edited_source_tree_means_the_full_path_and_a_built_package_is_planned_by_its_stamp(
    machine: Machine, tmp_path: Path
) -> None:
    """In a source tree the plans are filed under the newest change of the package's files, so an edit in place
    (the folder unchanged) means the checks again. A wheel's build stamps a digest of its files into version.py
    (build/jax_rocm7_build/assemble.py): then that digest alone decides, and no file is looked at."""
    overlay = tmp_path / "overlay"
    copy = overlay / "jax_rocm7_plugin"
    shutil.copytree(REPO / "jax_rocm7_plugin", copy, ignore=shutil.ignore_patterns("__pycache__"))
    first_on_path = {"PYTHONPATH": os.pathsep.join([str(overlay), str(REPO)])}
    machine.start(**first_on_path)
    assert warm(machine.start(**first_on_path)[0])
    decides = copy / "_machine" / "devices.py"
    decides.write_text(decides.read_text() + "# edited in place\n")
    assert not warm(machine.start(**first_on_path)[0])
    assert warm(machine.start(**first_on_path)[0])

    version = copy / "version.py"
    source = version.read_text()
    assert "\nSOURCE_DIGEST = None\n" in source
    version.write_text(source.replace("SOURCE_DIGEST = None", f'SOURCE_DIGEST = "{"ab" * 32}"'))
    assert not warm(machine.start(**first_on_path)[0])  # another build: its own plan
    assert warm(machine.start(**first_on_path)[0])
    decides.write_text(decides.read_text() + "# an installed build is not edited: its stamp alone decides\n")
    assert warm(machine.start(**first_on_path)[0])
    version.write_text(source.replace("SOURCE_DIGEST = None", f'SOURCE_DIGEST = "{"cd" * 32}"'))
    assert not warm(machine.start(**first_on_path)[0])


@pytest.mark.parametrize("off", ["0", "false", "Off"])
def test_no_plan_with_the_warm_path_turned_off(machine: Machine, off: str) -> None:
    machine.start(JAX_ROCM_WARM=off)  # any of the usual words (_environment.FALSE_WORDS)
    assert machine.plans() == []
    again, _ = machine.start(JAX_ROCM_WARM=off)
    assert not warm(again)


def test_a_machine_without_a_usable_gpu_gets_no_plan(machine: Machine) -> None:
    (machine.root / "dev" / "kfd").unlink()
    machine.start(rocm=False)
    assert machine.plans() == []


def test_a_machine_without_the_driver_says_its_refusal_again_without_the_checks(
    tmp_path: Path, standin_library: Path
) -> None:
    """No AMD GPU driver at all (the machine without a GPU): the second start says the first one's line from its
    plan, importing no check; the driver loaded since, the checks run again; with rocm asked for, jax's error
    carries the same sentence, warm or cold."""
    root = make_sysroot(tmp_path / "machine", [], topology=False, amdgpu_module=False, kfd=False, render_nodes=False)

    def start(**variables: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object] | None]:
        environ = plugin_environment(root, standin_library, tmp_path / "cache", **variables)
        done = subprocess.run(
            [sys.executable, "-c", _START], env=environ, capture_output=True, text=True, timeout=180, cwd=tmp_path
        )
        lines = done.stdout.strip().splitlines()
        return done, (json.loads(lines[-1]) if done.returncode == 0 and lines else None)

    def refusal(log: str) -> list[str]:
        return [line for line in log.splitlines() if "ROCm backend unavailable" in line]

    first, cold = start()
    again, warm_start = start()
    assert cold is not None and warm_start is not None, (first.stderr, again.stderr)
    assert not warm(cold) and warm(warm_start)
    assert set(warm_start["ours"]) <= WARM_IMPORTS, sorted(set(warm_start["ours"]) - WARM_IMPORTS)  # type: ignore[arg-type]
    said = refusal(first.stderr)
    assert len(said) == 1 and said[0].endswith("[amdgpu-driver-missing]") and refusal(again.stderr) == said
    # Asked for rocm: jax's error, the first time and from the plan.
    errors = [start(JAX_PLATFORMS="rocm")[0] for _ in range(2)]
    assert all(e.returncode != 0 and "no AMD GPU driver" in e.stderr and refusal(e.stderr) == [] for e in errors)
    # The driver loaded since: the checks run again, and say what they find now.
    (root / "sys" / "module" / "amdgpu").mkdir(parents=True)
    now, checked = start()
    assert checked is not None and not warm(checked)
    assert all("[amdgpu-driver-missing]" not in line for line in refusal(now.stderr))


# Without a GPU device node, jaxlib's imports of our extension modules (each a stub calling load_native) refuse
# at once, importing no check: the few stats of _extensions.no_gpu_device_node.
EXTENSION_IMPORTS = {
    "jax_rocm7_plugin",
    "jax_rocm7_plugin.version",
    "jax_rocm7_plugin._loader",
    "jax_rocm7_plugin._loader.extensions",
    "jax_rocm7_plugin._environment",
    "jax_rocm7_plugin._names",
    "jax_rocm7_plugin._record",
}
_EXTENSION = """
import json, sys
from jax_rocm7_plugin._loader.extensions import load_native
refused = []
for name in ("_linalg", "_solver", "_prng"):
    try:
        load_native(f"jax_rocm7_plugin.{name}")
    except ImportError as error:
        refused.append(str(error))
print(json.dumps({"refused": refused, "ours": sorted(m for m in sys.modules if m.startswith("jax_rocm7_plugin"))}))
"""


def test_without_a_gpu_the_extension_modules_refuse_importing_no_check(tmp_path: Path, standin_library: Path) -> None:
    root = make_sysroot(tmp_path / "machine", [], topology=False, amdgpu_module=False, kfd=False)
    environ = plugin_environment(root, standin_library, tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", _EXTENSION], env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert len(outcome["refused"]) == 3 and all("no usable AMD GPU" in r for r in outcome["refused"])
    assert set(outcome["ours"]) <= EXTENSION_IMPORTS, sorted(set(outcome["ours"]) - EXTENSION_IMPORTS)
