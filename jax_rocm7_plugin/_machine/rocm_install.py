"""Which ROCm runtimes are on this machine, and which version each one is.

Looked for, in this order: $ROCM_PATH, /opt/rocm, /opt/rocm-<version>, the
dynamic loader's directories (distribution packages such as Debian's
libamdhip64-5 put HIP in /usr/lib/x86_64-linux-gnu), and ROCm from pip
(TheRock's `_rocm_sdk_core`). Each install's library directories follow
rocm_policy.json (lib, lib64, and lib/rocm_sysdeps/lib where ROCm >= 7.14 keeps
its private system libraries). The version comes from `<root>/.info/version`
(AMD's packages write it), else from the pip distribution's version, else from
the soname major of the HIP runtime (libamdhip64.so.7 -> 7).
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import host_path, resolved, unrooted
from jax_rocm7_plugin._names import (
    HIP_RUNTIME_PREFIX,
    JAX_EXTRA_REQUIREMENT,
    PIP_ROCM_DISTRIBUTION,
    PIP_ROCM_PACKAGE,
    ROCM_MAJOR,
)
from jax_rocm7_plugin._record import NamedTuple

HIP_RUNTIME_GLOB = f"{HIP_RUNTIME_PREFIX}*"
_SONAME_MAJOR = re.compile(re.escape(HIP_RUNTIME_PREFIX) + r"(\d+)$")
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


class RocmInstall(NamedTuple):
    location: str  # as the user knows it: a machine path, or "pip: <dir>"
    source: str  # ROCM_PATH, /opt/rocm, /opt/rocm-*, loader path, pip
    version: str | None
    hip_runtimes: tuple[Path, ...]  # real paths of libamdhip64.so.N files
    library_dirs: tuple[Path, ...] = ()  # real directories holding its libraries (lib, lib/rocm_sysdeps/lib, ...)

    @property
    def major(self) -> int | None:
        if self.version:
            match = _VERSION.match(self.version)
            if match:
                return int(match.group(1))
        majors = sorted({int(m.group(1)) for m in (_SONAME_MAJOR.match(p.name) for p in self.hip_runtimes) if m})
        majors.reverse()
        return majors[0] if majors else None

    def version_said(self) -> str:
        """The version as far as it is known: the full one, else the major its HIP runtime's soname gives ("5",
        for Debian's libamdhip64.so.5), else "of unknown version"."""
        if self.version:
            return self.version
        return str(self.major) if self.major is not None else "of unknown version"

    def describe(self) -> str:
        names = ", ".join(p.name for p in self.hip_runtimes)
        version = f"version {self.version}" if self.version else f"HIP runtime {names}" if names else "no HIP runtime"
        return f"{self.location} ({self.source}): {version}"


def _hip_runtimes(directory: Path) -> tuple[Path, ...]:
    paths = (Path(p) for p in glob.glob(str(directory / HIP_RUNTIME_GLOB)))
    return tuple(sorted(p for p in paths if _SONAME_MAJOR.match(p.name)))


def read_version_file(root: Path) -> str | None:
    """`<ROCm>/.info/version` as AMD's packages write it ("7.0.2-56"), if it holds a version."""
    from jax_rocm7_plugin._safe_io import read_text

    try:
        text = read_text(root / ".info" / "version", 4096).strip()
    except (OSError, ValueError):
        return None
    match = _VERSION.match(text)
    return text.split()[0] if match else None


def library_dirs_of(root: Path) -> tuple[Path, ...]:
    from jax_rocm7_plugin._policy.rocm_policy import library_dirs

    return tuple(root / d for d in library_dirs() if (root / d).is_dir())


def _rocm_tree(root: Path, location: str, source: str) -> RocmInstall | None:
    if not root.is_dir():
        return None
    directories = library_dirs_of(root)
    runtimes: tuple[Path, ...] = ()
    for directory in directories:
        runtimes += _hip_runtimes(directory)
    version = read_version_file(root)
    if version is None and not runtimes:
        return None
    return RocmInstall(location, source, version, runtimes, directories)


def find_rocm_installs(root: Path, rocm_path: str | None, loader_dirs: list[str]) -> list[RocmInstall]:
    """Every ROCm runtime visible under the sysroot and in this Python environment."""
    installs: list[RocmInstall] = []
    seen: set[str] = set()

    def add(install: RocmInstall | None, key: Path) -> None:
        real = str(resolved(key))
        if install is not None and real not in seen:
            seen.add(real)
            installs.append(install)

    if rocm_path:
        add(_rocm_tree(host_path(root, rocm_path), rocm_path, "ROCM_PATH"), host_path(root, rocm_path))
    add(_rocm_tree(host_path(root, "/opt/rocm"), "/opt/rocm", "/opt/rocm"), host_path(root, "/opt/rocm"))
    for path in sorted(glob.glob(str(host_path(root, "/opt/rocm-*")))):
        add(_rocm_tree(Path(path), unrooted(Path(path), root), "/opt/rocm-*"), Path(path))
    for directory in loader_dirs:
        real = host_path(root, directory)
        runtimes = _hip_runtimes(real)
        if runtimes:
            add(RocmInstall(directory, "loader path", None, runtimes, (real,)), real)
    pip = _pip_rocm()
    if pip is not None:
        add(pip[0], pip[1])
    return installs


def _pip_rocm() -> tuple[RocmInstall, Path] | None:
    from jax_rocm7_plugin._machine.rocm_pip import find_pip_rocm

    found = find_pip_rocm()
    if found is None:
        return None
    from jax_rocm7_plugin._machine.packages import installed_version

    version = installed_version(PIP_ROCM_DISTRIBUTION)
    runtimes = _hip_runtimes(found.root / "lib")
    return RocmInstall(f"pip: {found.root}", "pip", version, runtimes, library_dirs_of(found.root)), found.root


def rocm_findings(installs: list[RocmInstall], rocm_path: str | None) -> list[Finding]:
    """rocm-not-found / rocm-major-mismatch; nothing when a ROCm 7 is among the installs."""
    if not installs:
        return [
            catalog.rocm_not_found(
                (
                    f"ROCM_PATH={rocm_path} holds no ROCm" if rocm_path else "ROCM_PATH is not set",
                    "no /opt/rocm or /opt/rocm-* with a HIP runtime or .info/version",
                    f"no {HIP_RUNTIME_PREFIX}* in the dynamic loader's directories",
                    f"no ROCm from pip (module {PIP_ROCM_PACKAGE})",
                )
            )
        ]
    if any(install.major == ROCM_MAJOR for install in installs):
        return []
    found = ", ".join(f"ROCm {i.version_said()} at {i.location}" for i in installs[:3])
    return [catalog.rocm_major_mismatch(tuple(install.describe() for install in installs), found)]


def install_root(install: RocmInstall, root: Path) -> Path | None:
    """The install's directory on this machine (under the sysroot); None for a bare loader directory."""
    if install.source == "pip":
        return Path(install.location.removeprefix("pip: "))
    if install.source == "loader path":
        return None
    return host_path(root, install.location)


def loaded_install(installs: list[RocmInstall], hip_runtime: Path | None) -> RocmInstall | None:
    """The install whose HIP runtime the library loads: the one holding `hip_runtime` (as the dependency walk
    resolved it), else the first ROCm 7 install in the loader's order of search."""
    if hip_runtime is not None:
        real = resolved(hip_runtime)
        for install in installs:
            if any(resolved(p) == real for p in install.hip_runtimes):
                return install
    return next((i for i in installs if i.major == ROCM_MAJOR), None)


def layout(directory: Path | None) -> str | None:
    """ "therock" where the install keeps device bitcode and LLD under lib/llvm only (TheRock's tarballs, pip),
    "amd" where AMD's packages' amdgcn/ or llvm/ folders are there; None when unknown."""
    if directory is None:
        return None
    if (directory / "amdgcn").is_dir() or (directory / "llvm").is_dir():
        return "amd"
    return "therock" if (directory / "lib" / "llvm").is_dir() else None


def older_rocm_findings(install: RocmInstall | None, release: str, built_for: str | None) -> list[Finding]:
    """rocm-older-than-library: the install the library loads is of its ROCm major but older than the ROCm the
    release's library was built with (releases.json): symbols and fixes it expects may be missing. The fix names
    the newest release of the table built for this ROCm or an older one."""
    from jax_rocm7_plugin._policy import releases
    from jax_rocm7_plugin._policy.known_issues import version_tuple

    have = version_tuple(install.version) if install is not None else None
    want = version_tuple(built_for)
    if install is None or have is None or want is None or have[0] != want[0] or have >= want:
        return []
    fitting = next(
        (row for row in releases.table() if (v := version_tuple(row.rocm_version)) is not None and v <= have), None
    )
    alternative = (
        f", or use jax {fitting.release}, whose library is built for ROCm {fitting.rocm_version}: pip install "
        f'"{JAX_EXTRA_REQUIREMENT}=={fitting.release}"'
        if fitting is not None
        else ""
    )
    return [
        catalog.rocm_older_than_library(
            f"the PJRT library of jax {release} is built for ROCm {built_for}, but the ROCm it loads is older "
            f"({install.version}, {install.location}): functions and fixes it expects may be missing",
            f"install ROCm {built_for} or later{alternative}",
            (install.describe(), f"releases.json: {release} built for ROCm {built_for}"),
        )
    ]
