"""Reading our Starlark files here, where no Bazel 7 runs.

Starlark's syntax is a subset of Python's, so `ast` parses it; our BUILD files use
only plain calls, list comprehensions and `load`, so evaluating them with recording
stand-ins for the rules lists the targets they define.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.support.environment import REPO

STARLARK_FILES = sorted(
    [REPO / "WORKSPACE", REPO / "MODULE.bazel", *REPO.glob("*/BUILD"), *REPO.glob("*/*.bzl")],
)


def evaluate_build(build_file: Path) -> dict[str, dict[str, Any]]:
    """name -> {rule, attributes} of every target the BUILD file defines."""
    targets: dict[str, dict[str, Any]] = {}

    def rule(kind: str) -> Any:
        def record(**attributes: Any) -> None:
            name = attributes["name"]
            assert name not in targets, f"{build_file}: {name} defined twice"
            targets[name] = {"rule": kind, **attributes}

        return record

    def load(label: str, *names: str) -> None:
        assert label.startswith(":") or label.startswith("@"), label
        if label.startswith("@"):
            return  # an external repository's macro: its symbols are recorded as rules below
        loaded: dict[str, Any] = {}
        exec(compile((build_file.parent / label[1:]).read_text(), label, "exec"), loaded)
        for name in names:
            namespace[name] = loaded[name]

    namespace: dict[str, Any] = {
        "load": load,
        "package": lambda **_: None,
        "exports_files": lambda files, **_: targets.update({f: {"rule": "exported file"} for f in files}),
        "licenses": lambda *_: None,
    }
    for kind in ("alias", "filegroup", "cc_binary", "cc_library", "py_library", "genrule"):
        namespace[kind] = rule(kind)
    exec(compile(build_file.read_text(), str(build_file), "exec"), namespace)
    return targets


def bazelrc_configs(bazelrc: Path) -> dict[str, list[str]]:
    """config name -> its option lines (`build:rocm --x` and `test:rocm --y` both count for rocm)."""
    configs: dict[str, list[str]] = {}
    for line in bazelrc.read_text().splitlines():
        match = re.match(r"(\w+):([\w-]+)\s+(.*)", line.strip())
        if match:
            configs.setdefault(match.group(2), []).append(match.group(3))
    return configs


def label_parts(label: str) -> tuple[str, str]:
    """//pjrt:xla_rocm_plugin.so -> ("pjrt", "xla_rocm_plugin.so")."""
    match = re.fullmatch(r"//([\w/]+):([\w.+-]+)", label)
    assert match, label
    return match.group(1), match.group(2)


def build_file_runpath() -> tuple[str, ...]:
    """The RUNPATH pjrt/BUILD links into xla_rocm_plugin.so ($$ is Bazel's escape for $)."""
    linkopts = evaluate_build(REPO / "pjrt" / "BUILD")["xla_rocm_plugin.so"]["linkopts"]
    option = next(o for o in linkopts if o.startswith("-Wl,-rpath,"))
    return tuple(option[len("-Wl,-rpath,") :].replace("$$", "$").split(":"))


PJRT_RUNPATH = build_file_runpath()  # so `check` is tested against what the Bazel build produces


JAX_MODULE = """
module(name = "jax")
archive_override(
    module_name = "rules_ml_toolchain",
    integrity = "sha256-QJY+S8Ji36mkMUb2EBQK8AaLAjrOjzxQ8XBae1DeCDA=",
    strip_prefix = "rules_ml_toolchain-{rules}",
    urls = ["https://github.com/google-ml-infra/rules_ml_toolchain/archive/{rules}.tar.gz"],
)
bazel_dep(name = "xla")
archive_override(
    module_name = "xla",
    integrity = "sha256-CKUiEKBM1o049iAdVic9BKwPi04Nqfcmd8dKSMxjdCI=",
    strip_prefix = "xla-{xla}",
    urls = ["https://github.com/openxla/xla/archive/{xla}.tar.gz"],
)
"""


def jax_module(xla: str = "1" * 40, rules: str = "2" * 40) -> str:
    """Test fixture: a MODULE.bazel shaped like JAX's (its archive_override calls), not JAX's own."""
    return JAX_MODULE.format(xla=xla, rules=rules)
