"""The one step that installs a ROCm library missing from an installed ROCm 7, said for the way that ROCm was
installed: TheRock's native packages (amdrocm-*, the package of this release and GPU that ships it), AMD's packages
(the package database's search for it), TheRock's pip wheels (this release's libraries for this GPU, into this
Python), TheRock's tarball (the same release's tarball, unpacked again). The doctor's alone. The step is a fact (its
way and the values it names); its words are _findings.PACKAGE_STEPS'.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from jax_rocm7_plugin._machine import unrooted
from jax_rocm7_plugin._machine.rocm_install import RocmInstall, install_root, layout
from jax_rocm7_plugin._record import NamedTuple


class PackageStep(NamedTuple):
    way: str  # pip, native (TheRock's amdrocm-* packages), system (AMD's packages), tarball
    values: tuple[tuple[str, str], ...]  # what the step names: the libraries, the commands, packages, URLs


def package_step(missing: Sequence[str], install: RocmInstall, root: Path, gpus: Sequence[str]) -> PackageStep | None:
    """The fix for ROCm libraries `missing` (sonames) from `install` on the machine under `root` whose GPUs in use
    are `gpus` (processors); None: the way it was installed is not known."""
    names = ", ".join(missing)
    version = install.version or ""
    if install.source == "pip":
        from jax_rocm7_plugin._policy.rocm_families import install_command

        commands = [c for c in dict.fromkeys(install_command(g, version) for g in gpus) if c] if version else []
        if not commands:
            return None
        python = f"{sys.executable} -m "
        said = "; ".join(python + c for c in commands)
        return PackageStep("pip", (("version", version), ("names", names), ("commands", said)))
    runtime = next(iter(install.hip_runtimes), None)
    if runtime is None:
        return None
    from jax_rocm7_plugin._machine.rocm_elsewhere import owner

    owned = owner(root, unrooted(runtime, root))
    if owned is not None:
        return _package_step(owned, missing, root, gpus, version)
    home = install_root(install, root)
    if home is not None and layout(home) == "therock" and version:
        from jax_rocm7_plugin._policy.rocm_families import tarball_url

        urls = [u for u in dict.fromkeys(tarball_url(g, version) for g in gpus) if u]
        where = f": {'; '.join(urls)}" if urls else ""
        return PackageStep("tarball", (("names", names), ("location", install.location), ("where", where)))
    return None


def _package_step(
    owned: tuple[str, str], missing: Sequence[str], root: Path, gpus: Sequence[str], version: str
) -> PackageStep:
    from jax_rocm7_plugin._machine.host import os_release_ids
    from jax_rocm7_plugin._policy import system_packages
    from jax_rocm7_plugin._policy.rocm_packages import native_package, stem

    system, package = owned
    family = system_packages.family(os_release_ids(root)) or ("debian" if system == "dpkg" else "rhel")
    install = system_packages.install_verb(family)
    names = ", ".join(missing)
    if package.startswith("amdrocm-"):
        suffix = package.rsplit("-", 1)[-1].lstrip("abcdefghijklmnopqrstuvwxyz") if package[-1].isdigit() else ""
        wanted = [native_package(m, suffix, list(gpus)) for m in missing]
        if all(wanted):
            listed = " ".join(dict.fromkeys(p for group in wanted for p in group or ()))
            return PackageStep(
                "native", (("package", package), ("names", names), ("install", install), ("packages", listed))
            )
    search = system_packages.search_verb(family)
    stems = " ".join(dict.fromkeys(s.lower() for m in missing if (s := stem(m))))
    values = {"version": f" {version}" if version else "", "names": names, "system": system, "package": package}
    return PackageStep("system", (*values.items(), ("search", f"{search} {stems}"), ("install", install)))
