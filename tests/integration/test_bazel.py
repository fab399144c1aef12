"""The native build, checked without Bazel 7 or ROCm 7: Starlark, labels, configs, pins, commands."""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from jax_rocm7_build import bazel as bazel_build

from jax_rocm7_plugin._names import EXTENSION_MODULES
from tests.support.environment import REPO, require
from tests.support.native import compile_shared, fake_hip_runtime, pjrt_library_with_code_for
from tests.support.starlark import (
    PJRT_RUNPATH,
    STARLARK_FILES,
    bazelrc_configs,
    evaluate_build,
    jax_module,
    label_parts,
)
from tests.support.sysroots import bundle_for

BUILDIFIER = Path(os.environ.get("BUILDIFIER", REPO / ".tools" / "buildifier"))


TOOLCHAIN = bazel_build.Toolchain("/usr/local/bin/bazelisk", Path("/opt/rocm-7.0.2"), "7.0.2")


@pytest.mark.parametrize("path", STARLARK_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_starlark_parses(path: Path) -> None:
    ast.parse(path.read_text(), filename=str(path))


def test_buildifier_lint() -> None:
    require(BUILDIFIER.is_file(), f"buildifier at {BUILDIFIER} (ci/run_tests.sh fetches it from npm)")
    done = subprocess.run(
        [str(BUILDIFIER), "-mode=check", "-lint=warn", *map(str, STARLARK_FILES)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_bazel_version_is_bazel_7() -> None:
    assert re.fullmatch(r"7\.\d+\.\d+", (REPO / ".bazelversion").read_text().strip())


@pytest.mark.parametrize(
    "options",
    [bazel_build.BazelOptions(), bazel_build.BazelOptions(extensions=False, rocm_clang=True)],
)
def test_every_label_built_is_defined(options: bazel_build.BazelOptions) -> None:
    for label in bazel_build.targets(options):
        package, name = label_parts(label)
        assert name in evaluate_build(REPO / package / "BUILD"), label


def test_extension_modules_match_the_loader() -> None:
    targets = evaluate_build(REPO / "jaxlib_rocm" / "BUILD")
    assert [t for t in targets if targets[t]["rule"] == "alias"] == list(EXTENSION_MODULES)
    assert all(targets[m]["actual"] == f"@jax//jaxlib/rocm:{m}" for m in EXTENSION_MODULES)
    assert targets["extension_modules"]["srcs"] == [f":{m}" for m in EXTENSION_MODULES]


def test_pjrt_library_exports_only_get_pjrt_api() -> None:
    library = evaluate_build(REPO / "pjrt" / "BUILD")["xla_rocm_plugin.so"]
    script = (REPO / "pjrt" / "xla_rocm_plugin.lds").read_text()
    assert re.search(r"global:\s*GetPjrtApi;\s*local:\s*\*;", script)
    assert "-Wl,--version-script,$(location :xla_rocm_plugin.lds)" in library["linkopts"]
    runpath = next(o for o in library["linkopts"] if o.startswith("-Wl,-rpath,"))
    assert "$$ORIGIN/../_rocm_sdk_core/lib" in runpath and "/opt/rocm/lib" in runpath


def test_every_config_exists() -> None:
    configs = bazelrc_configs(REPO / ".bazelrc")
    used = set()
    for options in (bazel_build.BazelOptions(), bazel_build.BazelOptions(rocm_clang=True)):
        used |= {
            f[len("--config=") :] for f in bazel_build.build_command(TOOLCHAIN, options) if f.startswith("--config=")
        }
    for lines in configs.values():
        used |= set(re.findall(r"--config=([\w-]+)", " ".join(lines)))
    assert used and used <= set(configs), used - set(configs)
    assert {"rocm", "ci_single_gpu", "ci_multi_gpu", "asan"} <= set(configs)
    assert any("TF_ROCM_AMDGPU_TARGETS" in line for line in configs["rocm"])


def test_pins_are_full_hashes_and_match_jaxlib() -> None:
    import jaxlib.version

    pins = bazel_build.module_pins()
    for name in ("JAX_COMMIT", "XLA_COMMIT", "RULES_ML_TOOLCHAIN_COMMIT"):
        assert re.fullmatch(r"[0-9a-f]{40}", pins[name]), name
    for name in ("XLA_INTEGRITY", "RULES_ML_TOOLCHAIN_INTEGRITY"):
        algorithm, _, digest = pins[name].partition("-")
        assert algorithm == "sha256" and len(base64.b64decode(digest, validate=True)) == 32, name
    assert pins["JAX_COMMIT"] == jaxlib.version._git_hash  # the commit jaxlib 0.10.2 was built from


def test_overrides_use_the_pins() -> None:
    tree = ast.parse((REPO / "MODULE.bazel").read_text())
    calls = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            keywords = {k.arg: k.value for k in node.keywords}
            module = keywords.get("module_name")
            if isinstance(module, ast.Constant):
                calls[(node.func.id, module.value)] = keywords
    git = calls[("git_override", "jax")]
    assert isinstance(git["commit"], ast.Name) and git["commit"].id == "JAX_COMMIT"
    xla = calls[("archive_override", "xla")]
    assert isinstance(xla["integrity"], ast.Name) and xla["integrity"].id == "XLA_INTEGRITY"
    assert "XLA_COMMIT" in ast.unparse(xla["urls"]) and "XLA_COMMIT" in ast.unparse(xla["strip_prefix"])


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            bazel_build.BazelOptions(python_version="3.11"),
            "/usr/local/bin/bazelisk build --config=rocm --repo_env=ROCM_PATH=/opt/rocm-7.0.2 "
            "--action_env=TF_ROCM_AMDGPU_TARGETS=gfx908,gfx90a,gfx942,gfx950,gfx1030,gfx1100,gfx1101,gfx1102,"
            "gfx1151,gfx1200,gfx1201 --repo_env=HERMETIC_PYTHON_VERSION=3.11 "
            "//pjrt:xla_rocm_plugin.so //jaxlib_rocm:extension_modules",
        ),
        (
            bazel_build.BazelOptions(
                amdgpu_targets=("gfx942",), python_version="3.12", extensions=False, rocm_clang=True
            ),
            "/usr/local/bin/bazelisk build --config=rocm --config=rocm_clang --repo_env=ROCM_PATH=/opt/rocm-7.0.2 "
            "--action_env=TF_ROCM_AMDGPU_TARGETS=gfx942 --repo_env=HERMETIC_PYTHON_VERSION=3.12 "
            "//pjrt:xla_rocm_plugin.so",
        ),
        (
            bazel_build.BazelOptions(
                amdgpu_targets=("gfx1100", "gfx11-generic"),
                python_version="3.11",
                xla_source=Path("/src/xla"),
                jax_source=Path("/src/jax"),
            ),
            "/usr/local/bin/bazelisk build --config=rocm --repo_env=ROCM_PATH=/opt/rocm-7.0.2 "
            "--action_env=TF_ROCM_AMDGPU_TARGETS=gfx1100,gfx11-generic --repo_env=HERMETIC_PYTHON_VERSION=3.11 "
            "--override_module=xla=/src/xla --override_module=jax=/src/jax "
            "//pjrt:xla_rocm_plugin.so //jaxlib_rocm:extension_modules",
        ),
    ],
)
def test_build_commands(options: bazel_build.BazelOptions, expected: str) -> None:
    assert bazel_build.shell_line(bazel_build.build_command(TOOLCHAIN, options)) == expected


@pytest.mark.parametrize("text", ["gfx942,", "", "sm_90", "gfx942;rm -rf /", "GFX942"])
def test_bad_target_lists(text: str) -> None:
    if text == "gfx942,":
        assert bazel_build.parse_targets(text) == ("gfx942",)
    else:
        with pytest.raises(ValueError, match="not AMDGPU targets"):
            bazel_build.parse_targets(text)


def fake_build_host(tmp_path: Path, outputs: list[Path]) -> dict[str, str]:
    """bazelisk that 'builds' by succeeding and answers cquery with `outputs`; a ROCm 7 tree."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = "\n".join(map(str, outputs))
    (bin_dir / "bazelisk").write_text(
        f'#!/bin/sh\necho "$@" >> {tmp_path}/bazel-calls\nif [ "$1" = cquery ]; then printf "%s\\n" "{listing}"; fi\n'
    )
    (bin_dir / "bazelisk").chmod(0o755)
    rocm = tmp_path / "rocm-7.0.2"
    (rocm / ".info").mkdir(parents=True)
    (rocm / ".info" / "version").write_text("7.0.2-56\n")
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ROCM_PATH": str(rocm),
        "JAX_ROCM_BUILD_CACHE": str(tmp_path / "build-cache"),  # the per-release Bazel workspace goes here
    }


def build_py(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "build" / "build.py"), "wheels", *args], capture_output=True, text=True, env=env
    )


def test_dry_run_prints_the_build_and_runs_nothing(tmp_path: Path) -> None:
    env = fake_build_host(tmp_path, [])
    done = build_py("--dry-run", "--amdgpu-targets", "gfx942", "--python-version", "3.11", env=env)
    assert done.returncode == 0, done.stderr
    commands = [line[2:] for line in done.stdout.splitlines() if line.startswith("$ ")]
    assert commands[0].endswith(
        f"bazelisk build --config=rocm --repo_env=ROCM_PATH={tmp_path}/rocm-7.0.2 "
        "--action_env=TF_ROCM_AMDGPU_TARGETS=gfx942 --repo_env=HERMETIC_PYTHON_VERSION=3.11 "
        "//pjrt:xla_rocm_plugin.so //jaxlib_rocm:extension_modules"
    )
    assert " cquery " in commands[1] and "--output=files" in commands[1]
    assert "setup_pjrt.py" in commands[2] and "setup_plugin.py" in commands[3]
    assert not (tmp_path / "bazel-calls").exists()


def test_missing_toolchain_is_one_clear_sentence(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin", "ROCM_PATH": str(tmp_path)}
    done = build_py("--pjrt-library", "bazel", "--dry-run", env=env)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "bazelisk" in line and "ROCm 7" in line and "--pjrt-library PATH" in line


def info_commit() -> str:
    return bazel_build.module_pins()["JAX_COMMIT"]


def test_bazel_outputs_become_the_wheel_pair(tmp_path: Path) -> None:
    """The Bazel path end to end with a stand-in bazelisk: its outputs land in the right wheels."""
    outputs = tmp_path / "bazel-bin"
    hip = fake_hip_runtime(tmp_path / "hip", devices=1)
    library = pjrt_library_with_code_for(  # shaped like pjrt/BUILD's output, so build.py's check passes
        outputs / "build", bundle_for(["gfx942"]), hip_dir=hip.parent, runpath=PJRT_RUNPATH
    )
    shutil.copy(library, outputs / "xla_rocm_plugin.so")
    solver = compile_shared(outputs, "solver", "int PyInit__solver(void) { return 0; }\n", output_name="_solver.so")
    env = fake_build_host(tmp_path, [outputs / "xla_rocm_plugin.so", solver])
    done = build_py("--output-dir", str(tmp_path / "dist"), "--amdgpu-targets", "gfx942", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (tmp_path / "bazel-calls").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["build", "cquery"]
    wheels = sorted((tmp_path / "dist").glob("*.whl"))
    pjrt, plugin = wheels
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert plugin.name == f"jax_rocm7_plugin-0.10.2-{tag}-{tag}-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(plugin) as archive:
        assert {"jax_rocm7_plugin/_native/_solver.so", "jax_rocm7_plugin/_solver.py"} <= set(archive.namelist())
        modules = json.loads(archive.read("jax_rocm7_plugin/_native/build_info.json"))["modules"]
        assert modules["_solver"]["kind"] == "bazel" and modules["_solver"]["jax_commit"] == info_commit()
    with zipfile.ZipFile(pjrt) as archive:
        info = json.loads(archive.read("jax_rocm7_pjrt/build_info.json"))
    assert info["source"]["kind"] == "bazel"
    assert info["source"]["jax_commit"] == bazel_build.module_pins()["JAX_COMMIT"]
    assert info["source"]["amdgpu_targets_requested"] == ["gfx942"]


def test_ci_scripts_dry_run(tmp_path: Path) -> None:
    env = {**fake_build_host(tmp_path, []), "PYTHON": sys.executable, "JAX_ROCM_GPU_COUNT": "4"}
    tests = subprocess.run(
        ["bash", "ci/run_pytest_rocm.sh", "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert tests.returncode == 0, tests.stderr
    first, second = tests.stdout.splitlines()
    assert (
        "JAX_ENABLE_ROCM_XDIST=4" in first and "-n 4" in first and "-p jax_rocm7_plugin.pytest_gpu_isolation" in first
    )
    assert "not multiaccelerator" in first and "-m rocm and multiaccelerator" in second and "-n" not in second.split()
    artifacts = subprocess.run(
        ["bash", "ci/build_rocm_artifacts.sh", "--dry-run", str(tmp_path / "out")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert artifacts.returncode == 0, artifacts.stderr
    assert "bazelisk build --config=rocm" in artifacts.stdout and f"--dist-dir {tmp_path}/out" in artifacts.stdout


def test_ci_script_without_gpus_says_so(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "JAX_ROCM_SYSROOT": str(tmp_path)}
    done = subprocess.run(
        ["bash", "ci/run_pytest_rocm.sh", "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1 and "no usable AMD GPU" in done.stderr


def test_a_release_with_full_pins_builds_from_them(tmp_path: Path) -> None:
    from jax_rocm7_plugin._policy import releases

    row = releases.get("0.11.0")
    assert row is not None and row.xla.commit is not None
    env = fake_build_host(tmp_path, [])
    done = build_py("--dry-run", "--release", "0.11.0", "--python-version", "3.13", env=env)
    assert done.returncode == 0, done.stderr
    assert f"JAX_COMMIT={row.jax_commit} XLA_COMMIT={row.xla.commit}" in done.stdout
    assert "--repo_env=HERMETIC_PYTHON_VERSION=3.13" in done.stdout
    module = tmp_path / "build-cache" / "bazel-workspaces" / "0.11.0" / "MODULE.bazel"
    assert bazel_build.module_pins(module)["XLA_COMMIT"] == row.xla.commit


def test_a_release_without_an_xla_pin_reads_jax_module_bazel(tmp_path: Path) -> None:
    """Test fixture: a MODULE.bazel shaped like JAX's, served from a file URL in place of GitHub."""
    from jax_rocm7_plugin._policy import releases

    row = releases.get("0.12.0")
    assert row is not None and row.xla.commit is None
    (tmp_path / "jax" / row.jax_commit).mkdir(parents=True)
    (tmp_path / "jax" / row.jax_commit / "MODULE.bazel").write_text(jax_module("4" * 40, "5" * 40))
    url = f"file://{tmp_path}/jax/{{commit}}/MODULE.bazel"
    env = {**fake_build_host(tmp_path, []), "JAX_ROCM_JAX_MODULE_URL": url}
    done = build_py("--dry-run", "--release", "0.12.0", "--python-version", "3.12", env=env)
    assert done.returncode == 0, done.stderr
    assert f"XLA_COMMIT={'4' * 40}" in done.stdout and f"RULES_ML_TOOLCHAIN_COMMIT={'5' * 40}" in done.stdout
    unreachable = {**env, "JAX_ROCM_JAX_MODULE_URL": f"file://{tmp_path}/nowhere/{{commit}}"}
    done = build_py("--dry-run", "--release", "0.12.0", "--python-version", "3.12", env=unreachable)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "XLA_COMMIT" in line and "--jax-source DIR" in line and "8dcb7aec" in line


def test_bazel_modules_for_every_python_at_once_are_refused_before_building(tmp_path: Path) -> None:
    env = fake_build_host(tmp_path, [])
    done = build_py("--python-version", "all", "--release", "0.11.0", "--output-dir", str(tmp_path / "out"), env=env)
    assert done.returncode == 1 and "one CPython per run" in done.stderr
    assert not (tmp_path / "bazel-calls").exists()
