"""Small real shared objects compiled with the system C compiler, for loader edge cases."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def compile_shared(directory: Path, name: str, source: str, *, libs: list[str] = ()) -> Path:  # type: ignore[assignment]
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    directory.mkdir(parents=True, exist_ok=True)
    c_file = directory / f"{name}.c"
    c_file.write_text(source)
    output = directory / f"lib{name}.so"
    command = [compiler, "-shared", "-fPIC", "-o", str(output), str(c_file), f"-L{directory}"]
    command += [f"-l{lib}" for lib in libs]
    subprocess.run(command, check=True, capture_output=True)
    return output


def library_needing_missing_dependency(directory: Path) -> Path:
    """libneeds.so with NEEDED libgone.so, which is deleted after linking."""
    gone = compile_shared(directory, "gone", "int gone(void) { return 1; }\n")
    needs = compile_shared(directory, "needs", "int gone(void);\nint use(void) { return gone(); }\n", libs=["gone"])
    gone.unlink()
    return needs


def fake_pjrt_library(directory: Path, major: int, minor: int, *, api_size: int = 984) -> Path:
    """A library whose GetPjrtApi returns a PJRT_Api head with the given version."""
    source = f"""
#include <stddef.h>
struct version {{ size_t struct_size; void* ext; int major; int minor; }};
struct api {{ size_t struct_size; void* ext; struct version v; }};
static struct api the_api = {{ {api_size}, 0, {{ 24, 0, {major}, {minor} }} }};
const struct api* GetPjrtApi(void) {{ return &the_api; }}
"""
    return compile_shared(directory, f"pjrt_{major}_{minor}_{api_size}", source)
