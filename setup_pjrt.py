"""Builds the jax-rocm7-pjrt wheel from a tree staged by `build/build.py wheels`.

Not meant to be run by hand: build.py stages `jax_rocm7_pjrt/` (locator, the
library, build_info.json) into $JAX_ROCM_STAGING and runs this script there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

# The names of things, from the checkout (this script's folder is first on sys.path).
from jax_rocm7_plugin._names import LIBRARY_FILE, PJRT_DISTRIBUTION, PJRT_PACKAGE

PLATFORM_TAG = "manylinux_2_28_x86_64"


def staging_dir() -> Path:
    staging = os.environ.get("JAX_ROCM_STAGING")
    if not staging or not (Path(staging) / PJRT_PACKAGE / "build_info.json").is_file():
        sys.exit("setup_pjrt.py builds from a staged tree: run `python build/build.py wheels --only pjrt`")
    return Path(staging)


class PjrtWheel(bdist_wheel):
    """Python-agnostic (the library speaks the PJRT C API, not CPython) but platform-bound."""

    def get_tag(self) -> tuple[str, str, str]:
        return "py3", "none", PLATFORM_TAG


STAGING = staging_dir()
# setuptools takes sources, LICENSE and READMEs relative to the working directory.
os.chdir(STAGING)
INFO = json.loads((STAGING / PJRT_PACKAGE / "build_info.json").read_text(encoding="utf-8"))
ROCM_VERSION = INFO.get("rocm_version") or "unknown"

setup(
    name=PJRT_DISTRIBUTION,
    version=INFO["version"],
    description=f"ROCm PJRT C-API plugin library for JAX (ROCm {ROCM_VERSION})",
    long_description=(STAGING / "README.pjrt.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    python_requires=">=3.11",
    packages=[PJRT_PACKAGE],
    package_data={PJRT_PACKAGE: [LIBRARY_FILE, "build_info.json"]},
    include_package_data=False,
    zip_safe=False,
    classifiers=[
        "Development Status :: 4 - Beta",
        "Operating System :: POSIX :: Linux",
        "Environment :: GPU",
    ],
    cmdclass={"bdist_wheel": PjrtWheel},
)
