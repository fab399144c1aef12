"""Builds the jax-rocm7-plugin wheel from a tree staged by `build/build.py wheels`.

build.py stages `jax_rocm7_plugin/` (with its version stamped and any extension
modules Bazel built) and `jax_plugins/rocm7/` into $JAX_ROCM_STAGING.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.bdist_wheel import bdist_wheel

# The names of things, from the checkout (this script's folder is first on sys.path).
from jax_rocm7_plugin._names import (
    DOCTOR_SCRIPT,
    ENTRY_POINT_GROUP,
    ENTRY_POINT_MODULE,
    ENTRY_POINT_NAME,
    NATIVE_DIR,
    PLUGIN_DISTRIBUTION,
    PLUGIN_PACKAGE,
)


def staging_dir() -> Path:
    staging = os.environ.get("JAX_ROCM_STAGING")
    if not staging or not (Path(staging) / "plugin_build.json").is_file():
        sys.exit("setup_plugin.py builds from a staged tree: run `python build/build.py wheels --only plugin`")
    return Path(staging)


STAGING = staging_dir()
# setuptools takes sources, LICENSE and READMEs relative to the working directory.
os.chdir(STAGING)
BUILD = json.loads((STAGING / "plugin_build.json").read_text(encoding="utf-8"))
# The CPython the extension modules were built for (build.py's target, not the Python running this).
PYTHON_TAG = BUILD.get("python_tag")


class PluginWheel(bdist_wheel):
    """py3-none-any without extension modules; cpXY-cpXY-manylinux_2_28 with them."""

    def get_tag(self) -> tuple[str, str, str]:
        if not PYTHON_TAG:
            return "py3", "none", "any"
        return PYTHON_TAG, PYTHON_TAG, "manylinux_2_28_" + sysconfig.get_platform().split("-")[-1]


setup(
    name=PLUGIN_DISTRIBUTION,
    version=BUILD["version"],
    description=f"JAX plugin for AMD GPUs: loader, machine checks, doctor (ROCm {BUILD['rocm_version']})",
    long_description=(STAGING / "README.plugin.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE", *(["NOTICE"] if (STAGING / "NOTICE").is_file() else [])],
    python_requires=BUILD["requires_python"],
    # The package with its private sub-packages (_machine, _binary, ...), and the entry-point module.
    packages=[*find_packages(include=[PLUGIN_PACKAGE, f"{PLUGIN_PACKAGE}.*"]), ENTRY_POINT_MODULE],
    package_data={
        PLUGIN_PACKAGE: ["py.typed", f"{NATIVE_DIR}/*.so", f"{NATIVE_DIR}/*.json"],
        f"{PLUGIN_PACKAGE}._policy": ["*.json"],
    },
    include_package_data=False,
    zip_safe=False,
    install_requires=[
        # The library of this release, any .postN (build.py writes it with versions.pin_for).
        BUILD["pjrt_requirement"],
        # The extension modules are built against one jaxlib (its nanobind types): pinned exactly.
        *([BUILD["jaxlib_pin"]] if BUILD.get("jaxlib_pin") else []),
        "packaging>=23",
        "zstandard>=0.22",
    ],
    extras_require={
        # ROCm 7 from pip (TheRock); the library's RUNPATH finds it next to the package.
        "with-rocm": ["rocm[libraries,devel]>=7,<8"],
    },
    entry_points={
        ENTRY_POINT_GROUP: [f"{ENTRY_POINT_NAME} = {ENTRY_POINT_MODULE}"],
        "console_scripts": [f"{DOCTOR_SCRIPT} = {PLUGIN_PACKAGE}.__main__:doctor_script"],
    },
    classifiers=[
        "Development Status :: 4 - Beta",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        "Environment :: GPU",
    ],
    cmdclass={"bdist_wheel": PluginWheel},
)
