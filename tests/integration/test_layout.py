"""The layout keeps its promises: private internals, stated import rules, build-only code out of the
runtime, the names of things and the finding ids in one place each, and PyPA's `python -m build`."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jax_rocm7_plugin._findings import FINDING_IDS
from jax_rocm7_plugin._job.catalog import CLUSTER_FINDING_IDS
from tests.support.environment import REPO

PLUGIN = REPO / "jax_rocm7_plugin"
SUB_PACKAGES = (
    "_binary", "_policy", "_machine", "_doctor", "_cluster", "_report", "_job", "_loader", "_pages", "_engine"
)  # fmt: skip
# The top of the package holds the entry points and the foundation; the rest lives in the sub-package owning it.
MAX_TOP_MODULES = 12
# The contract with jax and jaxlib (and the documented tools): what stays public.
PUBLIC_MODULES = {"__init__.py", "__main__.py", "version.py", "pytest_gpu_isolation.py"}


def test_internal_modules_are_private() -> None:
    top = {p.name for p in PLUGIN.iterdir() if p.suffix == ".py"}
    assert {name for name in top if not name.startswith("_")} | {"__init__.py", "__main__.py"} == PUBLIC_MODULES
    packages = {p.name for p in PLUGIN.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(SUB_PACKAGES)


def test_the_top_of_the_package_holds_at_most_twelve_modules() -> None:
    top = sorted(p.name for p in PLUGIN.iterdir() if p.suffix == ".py")
    assert len(top) <= MAX_TOP_MODULES, top


@pytest.mark.parametrize("package", SUB_PACKAGES)
def test_each_sub_package_says_what_lives_there_and_what_it_may_import(package: str) -> None:
    docstring = ast.get_docstring(ast.parse((PLUGIN / package / "__init__.py").read_text()))
    assert docstring is not None and len(docstring.splitlines()) == 2
    assert "import" in docstring.splitlines()[1]


def test_the_import_layers_are_declared_for_every_sub_package() -> None:
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    named = {part.strip() for layer in layers for part in layer.split("|")}
    private = {f"jax_rocm7_plugin.{p.stem}" for p in PLUGIN.glob("_*.py") if p.name != "__init__.py"}
    assert {f"jax_rocm7_plugin.{p}" for p in SUB_PACKAGES} | private | {"jax_rocm7_plugin.version"} <= named


def test_no_source_edits_sys_path() -> None:
    sources = [*PLUGIN.rglob("*.py"), *(REPO / "build").rglob("*.py"), *REPO.glob("setup_*.py")]
    edits = [str(p.relative_to(REPO)) for p in sources if re.search(r"sys\.path\.(insert|append)", p.read_text())]
    assert edits == []


def test_python_m_build_at_the_root_is_pypas_build() -> None:
    """build/ holds no __init__.py, so it cannot shadow PyPA's `build` from the repository root."""
    assert not (REPO / "build" / "__init__.py").exists()
    done = subprocess.run([sys.executable, "-m", "build", "--version"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("build ") and "site-packages" in done.stdout


def test_the_build_library_imports_like_any_package_and_does_nothing_on_import(tmp_path: Path) -> None:
    """From any folder, without PYTHONPATH: jax_rocm7_build imports (the dev venv has it in place), `build`
    is still PyPA's, and importing the library imports no plugin (build.py chooses the checkout itself)."""
    probe = (
        "import sys, json, jax_rocm7_build, build; "
        "print(json.dumps([jax_rocm7_build.__file__, build.__file__, 'jax_rocm7_plugin' in sys.modules]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    library, pypa_build, plugin_imported = json.loads(done.stdout)
    assert Path(library).is_relative_to(REPO / "build") and "site-packages" in pypa_build
    assert not plugin_imported
    usage = subprocess.run(
        [sys.executable, str(REPO / "build" / "build.py"), "check", "--help"], cwd=tmp_path, env=env, text=True,
        capture_output=True,
    )  # fmt: skip
    assert usage.returncode == 0 and "usage: build/build.py check" in usage.stdout, usage.stderr


def _ids_of_table(page: str, heading: str) -> list[str]:
    """The first column of the table under `heading` in a Markdown page of the repository."""
    section = (REPO / page).read_text().split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.M)


def test_the_doctors_page_lists_exactly_the_finding_ids() -> None:
    assert _ids_of_table("jax_rocm7_plugin/_doctor/README.md", "## Finding ids") == list(FINDING_IDS)


def test_the_entry_module_reports_the_catalogs_id_for_a_damaged_install() -> None:
    """The entry module works without our package (it reports when that is broken), so it states the id."""
    from jax_plugins.rocm7 import DAMAGED_INSTALL

    assert DAMAGED_INSTALL in FINDING_IDS


def test_the_cluster_page_lists_exactly_the_cluster_finding_ids() -> None:
    assert _ids_of_table("jax_rocm7_plugin/_cluster/README.md", "## Cluster finding ids") == list(CLUSTER_FINDING_IDS)


# Code that cannot import _names: the entry module (it reports a damaged install of our package),
# the pjrt wheel's locator (another distribution), and build's bootstrap that makes _names importable.
# Each states the names it needs; a test below keeps them equal to _names.
_STATES_ITS_OWN_NAMES = {
    "jax_plugins/rocm7/__init__.py",
    "pjrt/jax_rocm7_pjrt/__init__.py",
    "build/jax_rocm7_build/_checkout.py",
}


def _stated_names() -> dict[str, str]:
    """What _names.py states (the text a repeat would contain), by name; short or generic words left out."""
    from jax_rocm7_plugin import _names

    # Words too short or generic to be a repeat ("rocm", "ROCM", "_native", "rocm7" inside other names).
    generic = {"BACKEND", "XLA_PLATFORM", "ENTRY_POINT_GROUP", "ENTRY_POINT_NAME", "NATIVE_DIR", "NATIVE_BUILD_INFO"}
    stated = {
        name: value
        for name, value in vars(_names).items()
        if name.isupper() and isinstance(value, str) and name not in generic
    }
    stated["project stem"] = f"jax-rocm{_names.ROCM_MAJOR}"  # thread names, temporary directories...
    return stated


def _code_strings(tree: ast.AST) -> list[ast.Constant]:
    """String literals of code (f-string parts included), docstrings left out: prose may name things."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_names_of_things_are_stated_once() -> None:
    """Every name _names.py states (distributions, packages, library file, sonames, entry point, extra, the
    ROCm major) appears in no string literal of the runtime, build/ or setup scripts, plain or as a regex;
    no module binds a name of _names again; nothing assigns the ROCm major as a number."""

    stated = _stated_names()
    patterns = {name: (value, re.escape(value)) for name, value in stated.items()}
    sources = [*PLUGIN.rglob("*.py"), *(REPO / "build").rglob("*.py"), *REPO.glob("setup_*.py")]
    repeats = []
    for path in sources:
        relative = str(path.relative_to(REPO))
        if path.name == "_names.py" or relative in _STATES_ITS_OWN_NAMES:
            continue
        tree = ast.parse(path.read_text(), relative)
        for node in _code_strings(tree):
            for name, spellings in patterns.items():
                if any(spelling in node.value for spelling in spellings):
                    repeats.append(f"{relative}:{node.lineno}: {node.value!r} spells {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if not isinstance(target, ast.Name):
                        continue
                    if target.id in stated or target.id == "ROCM_MAJOR":
                        repeats.append(f"{relative}:{node.lineno}: binds {target.id} again")
                    elif "ROCM_MAJOR" in target.id and isinstance(node.value, ast.Constant):
                        repeats.append(f"{relative}:{node.lineno}: {target.id} = {node.value.value!r}")
    assert repeats == []


def test_code_that_cannot_import_names_states_the_same_ones() -> None:
    import jax_plugins.rocm7 as entry
    from jax_rocm7_plugin import _names

    # The locator's source, loaded by path (an installed jax-rocm7-pjrt may be importable too).
    locator_dir = REPO / "pjrt" / _names.PJRT_PACKAGE
    spec = importlib.util.spec_from_file_location("source_locator", locator_dir / "__init__.py")
    assert spec is not None and spec.loader is not None
    locator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(locator)
    assert locator.LIBRARY_NAME == _names.LIBRARY_FILE
    assert f"{_names.PLUGIN_PACKAGE}._loader.register" == entry.LOADER
    assert entry.__name__ == _names.ENTRY_POINT_MODULE
    from jax_rocm7_build import _checkout

    assert _checkout.PACKAGE == _names.PLUGIN_PACKAGE


def test_the_plugin_wheel_needs_no_build_only_package(standin_wheels) -> None:  # type: ignore[no-untyped-def]
    from jax_rocm7_plugin.version import JAX_RELEASE

    wheel = standin_wheels(JAX_RELEASE, f"{sys.version_info.major}.{sys.version_info.minor}")["plugin"]
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line for line in archive.read(metadata).decode().splitlines() if line.startswith("Requires-Dist")]
        members = archive.namelist()
    assert requires and not any("pyelftools" in line for line in requires)
    assert not any("elf_facts" in m or "jax_rocm7_build" in m for m in members)
