"""The Bazel path of `build.py wheels`: find the toolchain, compose the commands, find the outputs.

Pure functions over the environment and the repository's files, so the commands a
ROCm build host would run are tested here, where no Bazel 7 or ROCm 7 exists.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from jax_rocm7_build._checkout import REPO
from jax_rocm7_plugin._names import LIBRARY_FILE, ROCM_MAJOR

if TYPE_CHECKING:
    from jax_rocm7_plugin._policy.releases import Release

PJRT_TARGET = f"//pjrt:{LIBRARY_FILE}"
EXTENSIONS_TARGET = "//jaxlib_rocm:extension_modules"
# What the published 0.10.x library covers, as explicit processors: MI100, MI200, MI300, MI350,
# RX 6800-6900, RX 7900/7800/7600, Strix Halo, RX 9060/9070. Override with --amdgpu-targets.
DEFAULT_AMDGPU_TARGETS = (
    "gfx908",
    "gfx90a",
    "gfx942",
    "gfx950",
    "gfx1030",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1151",
    "gfx1200",
    "gfx1201",
)
_TARGET = re.compile(r"gfx[0-9]{1,2}[0-9a-f]{2}|gfx[0-9]+(-[0-9]+)*-generic")
_PYTHON = re.compile(r"3\.\d{1,2}")


class Toolchain(NamedTuple):
    bazel: str  # bazelisk (preferred: it honours .bazelversion) or bazel
    rocm_path: Path
    rocm_version: str


class BazelOptions(NamedTuple):
    amdgpu_targets: tuple[str, ...] = DEFAULT_AMDGPU_TARGETS
    python_version: str = f"{sys.version_info.major}.{sys.version_info.minor}"
    xla_source: Path | None = None
    jax_source: Path | None = None
    extensions: bool = True  # also build jaxlib's ROCm extension modules
    rocm_clang: bool = False  # host code with ROCm's clang (.bazelrc config rocm_clang)


def read_rocm_version(rocm_path: Path) -> str | None:
    """The release in `<ROCm>/.info/version` ("7.0.2-56" -> "7.0.2")."""
    from jax_rocm7_plugin._machine.rocm_install import read_version_file

    text = read_version_file(rocm_path)
    match = re.match(r"\d+\.\d+(\.\d+)?", text) if text else None
    return match.group(0) if match else None


def find_toolchain(environ: Mapping[str, str], which: Callable[[str], str | None] = shutil.which) -> Toolchain | str:
    """The Bazel launcher and a ROCm 7 install, or one sentence saying what is missing."""
    bazel = which("bazelisk") or which("bazel")
    rocm_path = Path(environ.get("ROCM_PATH") or "/opt/rocm")
    version = read_rocm_version(rocm_path)
    missing = []
    if bazel is None:
        missing.append("bazelisk (or bazel 7) on PATH")
    if version is None:
        missing.append(f"ROCm {ROCM_MAJOR} at {rocm_path} (no .info/version; set ROCM_PATH)")
    elif int(version.split(".")[0]) != ROCM_MAJOR:
        missing.append(f"ROCm {ROCM_MAJOR} at {rocm_path} (found ROCm {version})")
    if missing:
        return "the Bazel build needs " + " and ".join(missing)
    assert bazel is not None and version is not None
    return Toolchain(bazel, rocm_path, version)


def parse_targets(text: str) -> tuple[str, ...]:
    """`gfx942,gfx1100` -> ("gfx942", "gfx1100"); ValueError names a bad entry."""
    targets = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    bad = [t for t in targets if not _TARGET.fullmatch(t)]
    if bad or not targets:
        raise ValueError(f"not AMDGPU targets: {', '.join(bad) or '(empty)'} (expected e.g. gfx942,gfx1100)")
    return targets


def check_python_version(version: str) -> str:
    if not _PYTHON.fullmatch(version):
        raise ValueError(f"--python-version must be like 3.11, got {version!r}")
    return version


def configs(options: BazelOptions) -> list[str]:
    return ["rocm", *(["rocm_clang"] if options.rocm_clang else [])]


def targets(options: BazelOptions) -> list[str]:
    return [PJRT_TARGET, *([EXTENSIONS_TARGET] if options.extensions else [])]


def common_flags(toolchain: Toolchain, options: BazelOptions) -> list[str]:
    flags = [f"--config={name}" for name in configs(options)]
    flags += [
        f"--repo_env=ROCM_PATH={toolchain.rocm_path}",
        f"--action_env=TF_ROCM_AMDGPU_TARGETS={','.join(options.amdgpu_targets)}",
        f"--repo_env=HERMETIC_PYTHON_VERSION={options.python_version}",
    ]
    for module, source in (("xla", options.xla_source), ("jax", options.jax_source)):
        if source is not None:
            flags.append(f"--override_module={module}={source}")
    return flags


def build_command(toolchain: Toolchain, options: BazelOptions) -> list[str]:
    return [toolchain.bazel, "build", *common_flags(toolchain, options), *targets(options)]


def outputs_command(toolchain: Toolchain, options: BazelOptions) -> list[str]:
    """Asks Bazel where the built files are (same flags, so the same configuration)."""
    return [toolchain.bazel, "cquery", *common_flags(toolchain, options), "--output=files", *targets(options)]


def split_outputs(lines: Sequence[str], repo: Path = REPO) -> tuple[Path | None, list[Path]]:
    """(the PJRT library, the extension modules) among cquery's output paths."""
    library = None
    extensions = []
    for line in lines:
        path = Path(line.strip())
        if not line.strip() or path.suffix != ".so":
            continue
        path = path if path.is_absolute() else repo / path
        if path.name == LIBRARY_FILE:
            library = path
        else:
            extensions.append(path)
    return library, extensions


def module_pins(module_file: Path = REPO / "MODULE.bazel") -> dict[str, str]:
    """The top-level string constants of MODULE.bazel (JAX_COMMIT, XLA_COMMIT, ...)."""
    tree = ast.parse(module_file.read_text(encoding="utf-8"), filename=str(module_file))
    pins: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            pins[node.targets[0].id] = node.value.value
    return pins


def jax_module_pins(text: str) -> dict[str, str | None]:
    """XLA and rules_ml_toolchain as a JAX MODULE.bazel pins them (its archive_override calls)."""
    pins: dict[str, str | None] = {
        "commit": None,
        "integrity": None,
        "rules_ml_toolchain_commit": None,
        "rules_ml_toolchain_integrity": None,
    }
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "archive_override"):
            continue
        keywords = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
        module, prefix = keywords.get("module_name"), str(keywords.get("strip_prefix", ""))
        commit = prefix.rsplit("-", 1)[-1] if re.fullmatch(r"[\w-]+-[0-9a-f]{40}", prefix) else None
        if module == "xla":
            pins["commit"], pins["integrity"] = commit, keywords.get("integrity")
        elif module == "rules_ml_toolchain":
            pins["rules_ml_toolchain_commit"] = commit
            pins["rules_ml_toolchain_integrity"] = keywords.get("integrity")
    return pins


# The constants of MODULE.bazel that pin sources, and where a release row keeps each.
PIN_NAMES = {
    "JAX_COMMIT": "jax_commit",
    "XLA_COMMIT": "commit",
    "XLA_INTEGRITY": "integrity",
    "RULES_ML_TOOLCHAIN_COMMIT": "rules_ml_toolchain_commit",
    "RULES_ML_TOOLCHAIN_INTEGRITY": "rules_ml_toolchain_integrity",
}
# Where JAX's MODULE.bazel at a commit is read from without a checkout (a mirror may replace it).
JAX_MODULE_URL = os.environ.get(
    "JAX_ROCM_JAX_MODULE_URL", "https://raw.githubusercontent.com/jax-ml/jax/{commit}/MODULE.bazel"
)


def release_pins(row: Release, jax_module: str | None) -> dict[str, str]:
    """MODULE.bazel's pins for a release: the row's, checked against JAX's own MODULE.bazel when it is
    given (`jax_module`, its text at the row's JAX commit), JAX's where the row records none.

    ValueError names a disagreement, or the pins still unknown and how to supply them.
    """
    recorded = {"jax_commit": row.jax_commit, **row.xla._asdict()}
    pins = {name: recorded[field] for name, field in PIN_NAMES.items()}
    if jax_module is not None:
        theirs = jax_module_pins(jax_module)
        for name, field in PIN_NAMES.items():
            if field == "jax_commit" or theirs.get(field) is None:
                continue
            if pins[name] is None:
                pins[name] = theirs[field]
            elif pins[name] != theirs[field]:
                raise ValueError(
                    f"releases.json pins {name}={pins[name]} for {row.release}, but JAX's MODULE.bazel at "
                    f"{row.jax_commit[:8]} pins {theirs[field]}"
                )
    unknown = [name for name, value in pins.items() if not value]
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)} for {row.release} are not in releases.json and JAX's MODULE.bazel at "
            f"{row.jax_commit[:8]} could not be read: pass --jax-source DIR (a jax-ml/jax checkout holding that "
            f"commit), or record them with `build.py release-row {row.release} --jax-source DIR`"
        )
    return {name: str(value) for name, value in pins.items()}


def read_jax_module(commit: str, jax_source: Path | None) -> str | None:
    """JAX's MODULE.bazel at `commit`: from a checkout (git show), else from GitHub; None when unreachable."""
    import subprocess
    import urllib.request

    if jax_source is not None:
        done = subprocess.run(
            ["git", "-C", str(jax_source), "show", f"{commit}:MODULE.bazel"], capture_output=True, text=True
        )
        # Only that commit's file counts: a checkout elsewhere pins other sources.
        return done.stdout if done.returncode == 0 else None
    try:
        with urllib.request.urlopen(JAX_MODULE_URL.format(commit=commit), timeout=30) as response:
            return str(response.read().decode())
    except OSError:
        return None


def render_module(template: str, pins: Mapping[str, str], version: str) -> str:
    """MODULE.bazel with its pin constants and module version replaced (every other line kept)."""
    lines = []
    for line in template.splitlines(keepends=True):
        match = re.match(r'^([A-Z_]+) = "[^"]*"$', line.rstrip("\n"))
        if match and match.group(1) in pins:
            line = f'{match.group(1)} = "{pins[match.group(1)]}"\n'
        elif re.match(r'^    version = "[^"]*",$', line.rstrip("\n")):
            line = f'    version = "{version}",\n'
        lines.append(line)
    return "".join(lines)


# Files of the repository a Bazel build reads; MODULE.bazel is rendered per release.
WORKSPACE_FILES = ("WORKSPACE", ".bazelrc", ".bazelversion", "pjrt", "jaxlib_rocm")


def stage_workspace(directory: Path, pins: Mapping[str, str], version: str, repo: Path = REPO) -> Path:
    """A Bazel workspace for one release: links to the repository's Bazel files, MODULE.bazel rendered."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in WORKSPACE_FILES:
        link = directory / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(repo / name)
    module = render_module((repo / "MODULE.bazel").read_text(encoding="utf-8"), pins, version)
    (directory / "MODULE.bazel").write_text(module, encoding="utf-8")
    return directory


def shell_line(command: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(part) for part in command)


def provenance(toolchain: Toolchain, options: BazelOptions, pins: Mapping[str, str]) -> dict[str, object]:
    return {
        "kind": "bazel",
        "jax_commit": str(options.jax_source) if options.jax_source else pins.get("JAX_COMMIT"),
        "xla_commit": str(options.xla_source) if options.xla_source else pins.get("XLA_COMMIT"),
        "rocm_path": str(toolchain.rocm_path),
        "rocm_version": toolchain.rocm_version,
        "amdgpu_targets_requested": list(options.amdgpu_targets),
        "command": shell_line(build_command(toolchain, options)),
        "host": os.uname().nodename,
    }
