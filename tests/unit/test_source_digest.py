"""The source digest a wheel's build stamps into its version.py (build/jax_rocm7_build/assemble.py), which the
loader files its start-up plans under (_loader/warm.own_files)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from jax_rocm7_build.assemble import source_digest, stamp_version
from jax_rocm7_build.progress import BuildError

from tests.support.environment import REPO


def staged(tmp_path: Path) -> Path:
    package = tmp_path / "jax_rocm7_plugin"
    (package / "_policy").mkdir(parents=True)
    (package / "version.py").write_text((REPO / "jax_rocm7_plugin" / "version.py").read_text())
    (package / "__init__.py").write_text('"""the package"""\n')
    (package / "_policy" / "known_issues.json").write_text("[]\n")
    return package


def test_the_digest_changes_with_any_file_but_version_py_and_compiled_caches(tmp_path: Path) -> None:
    package = staged(tmp_path)
    digest = source_digest(package)
    assert len(digest) == 64 and source_digest(package) == digest
    (package / "version.py").write_text("__version__ = 'other'\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "version.cpython-311.pyc").write_bytes(b"\0")
    assert source_digest(package) == digest
    (package / "_policy" / "known_issues.json").write_text("[{}]\n")
    assert source_digest(package) != digest
    (package / "_policy" / "known_issues.json").write_text("[]\n")
    (package / "_policy" / "extra.json").write_text("[]\n")
    assert source_digest(package) != digest


def test_the_stamp_is_written_where_the_source_tree_has_none(tmp_path: Path) -> None:
    package = staged(tmp_path)
    stamp_version(package / "version.py", "0.10.2.post1", "0.10.2", "ab" * 32)
    values = {
        node.targets[0].id: ast.literal_eval(node.value)  # type: ignore[attr-defined]
        for node in ast.parse((package / "version.py").read_text()).body
        if isinstance(node, ast.Assign)
    }
    assert values == {"JAX_RELEASE": "0.10.2", "__version__": "0.10.2.post1", "SOURCE_DIGEST": "ab" * 32}


def test_a_version_py_without_the_line_is_a_build_error(tmp_path: Path) -> None:
    version = tmp_path / "version.py"
    version.write_text('JAX_RELEASE = "0.10.2"\n__version__ = JAX_RELEASE\n')
    with pytest.raises(BuildError, match="SOURCE_DIGEST"):
        stamp_version(version, "0.10.2", "0.10.2", "ab" * 32)
