"""Will the ROCm math libraries the PJRT library loads run on the GPUs this process uses? Read from their
kernel files, per GPU, without loading anything.

rocBLAS, hipBLASLt and MIOpen find their per-processor kernel files from the directory their own shared object
was loaded from (`folder` of _policy/math_libraries.json, or the folder a variable names): so the files that
count are those beside the copy the dynamic loader takes, in whichever layout that install has -- AMD's
packages and TheRock's tarball (lib/rocblas/library/TensileLibrary_lazy_gfx942.dat), TheRock's pip wheels
(one wheel per GPU family, each with its own lib/rocblas/library/gfx942/TensileLibrary_lazy_gfx942.dat.zlib).
A GPU with no file for it fails at the first operation that needs the library, whatever code the PJRT library
itself carries for it. A folder that holds no file of the library's kind for any processor is a layout this
module does not know: it says so (info) and claims nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._environment import read
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._policy.math_libraries import MathLibrary
from jax_rocm7_plugin._record import NamedTuple

SUPPORTED_GPUS = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/reference/system-requirements.html"
_MAX_FILES = 20000  # a rocBLAS folder holds a few thousand files
_PIP_FAMILY = re.compile(r"_rocm_sdk_libraries_([A-Za-z0-9_]+)")


class LibraryKernels(NamedTuple):
    library: MathLibrary
    shared_object: Path  # the copy the dynamic loader takes
    folder: Path  # where its kernel files are read
    variable_value: str | None  # the variable that named `folder`, where set
    laid_out: bool  # the folder holds files of the library's kind (else: a layout not known here)
    covered: tuple[tuple[str, str], ...]  # (gfx, the file found for it)
    missing: tuple[str, ...]  # processors used that have no file
    misplaced: tuple[str, ...] = ()  # of those, the ones whose file is in <folder>/<gfx>/, which it does not read


def _names(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.name for _, entry in zip(range(_MAX_FILES), entries, strict=False)]
    except OSError:
        return []


def library_kernels(
    library: MathLibrary, shared_object: Path, gfx: Sequence[str], environ: Mapping[str, str], root: Path
) -> LibraryKernels:
    """Which of the processors `gfx` (the GPUs used, after HSA_OVERRIDE_GFX_VERSION) the library has files for."""
    value = read(library.variable, environ) or None
    folder = host_path(root, value) if value else Path(os.path.normpath(shared_object.parent / library.folder))
    listings = {sub: _names(folder / sub.replace("{gfx}", g)) for g in set(gfx) for sub in library.look_in}
    kind = re.compile(library.any_files)
    laid_out = any(kind.fullmatch(n) for names in listings.values() for n in names)
    if not laid_out:  # per-processor folders: of processors not used, or ones the library does not read
        laid_out = any(
            kind.fullmatch(n) for sub in _names(folder) if (folder / sub).is_dir() for n in _names(folder / sub)
        )
    covered, missing, misplaced = [], [], []
    for g in dict.fromkeys(gfx):
        if not library.used_on(g):
            continue
        pattern = library.file_pattern(g)
        hit = next(
            (
                f"{sub.replace('{gfx}', g)}/{n}".removeprefix("./")
                for sub in library.look_in
                for n in listings.get(sub.replace("{gfx}", g), _names(folder / sub.replace("{gfx}", g)))
                if pattern.fullmatch(n)
            ),
            None,
        )
        if hit is None:
            missing.append(g)
            if "{gfx}" not in library.look_in and any(pattern.fullmatch(n) for n in _names(folder / g)):
                misplaced.append(g)
        else:
            covered.append((g, hit))
    return LibraryKernels(
        library, shared_object, folder, value, laid_out, tuple(covered), tuple(missing), tuple(misplaced)
    )


def kernel_findings(states: Sequence[LibraryKernels], rocm_version: str | None = None) -> list[Finding]:
    """math-library-gpu-unsupported for each library with a GPU it has no kernels for: an error where the
    process aborts, a warning where the operation fails, info where it only runs slower."""
    found = []
    for state in states:
        library = state.library
        where = f"{state.folder}" + (
            f" (from {library.variable}={state.variable_value})" if state.variable_value else ""
        )
        evidence = (
            f"{library.name}: {state.shared_object} (the copy the dynamic loader takes)",
            f"kernel files read in {where}"
            + (f", subfolders {', '.join(library.look_in)}" if library.look_in != (".",) else ""),
            *(f"{g}: {file}" for g, file in state.covered),
            *(f"{g}: no file matching {library.file_pattern(g).pattern}" for g in state.missing),
            f"seen in public reports as: {library.symptom} ({library.sources[0]})",
        )
        if not state.missing:
            continue
        if not state.laid_out and state.folder.is_dir():
            found.append(
                catalog.math_library_gpu_unsupported(
                    "info",
                    f"{library.name}'s kernel folder {state.folder} holds no file of the kind this doctor knows, so "
                    f"whether it carries kernels for {', '.join(state.missing)} is not known",
                    "nothing to do unless its operations fail; then compare with AMD's layout "
                    f"({library.folder}/{library.files.replace('{gfx}', 'gfxNNNN')})",
                    evidence,
                )
            )
            continue
        gpus = ", ".join(state.missing)
        absent = "" if state.folder.is_dir() else f" (the folder {state.folder} does not exist)"
        if state.misplaced:
            absent = (
                f" (the files of {', '.join(state.misplaced)} are in per-processor subfolders of {state.folder}, which "
                f"{library.name} does not read: {library.look_in_source or 'its own search'})"
            )
        them = "it" if len(state.missing) == 1 else "them"
        effect = {
            "abort": f"{library.first_use} on {them} aborts the process",
            "fail": f"{library.used_for} fail on {them}",
            "slower": f"{library.first_use} on {them} compiles its kernels first (slower, but it runs)",
        }[library.without]
        verb = "will not find its kernels for" if state.misplaced else "has no kernels for"
        summary = f"{library.name} {verb} {gpus}{absent}: {effect}"
        severity = {"abort": "error", "fail": "warning", "slower": "info"}[library.without]
        fix = _fix(state, rocm_version)
        found.append(catalog.math_library_gpu_unsupported(severity, summary, fix, evidence))  # type: ignore[arg-type]
    return found


def _family_build(gpus: Sequence[str], rocm_version: str | None) -> str:
    """The build of the same ROCm release that carries these GPUs, as AMD's index serves it (a family's wheels up
    to 7.13, a device wheel per processor from 7.14: _policy/rocm_families.json), not another release."""
    from jax_rocm7_plugin._policy.rocm_families import family_of, install_command

    commands = [(g, install_command(g, rocm_version)) for g in gpus] if rocm_version else []
    if commands and all(command for _, command in commands):
        families = ", ".join(dict.fromkeys(family_of(g, rocm_version or "") or g for g in gpus))
        return f"install the build of the same release, ROCm {rocm_version}, for {families}: " + "; ".join(
            dict.fromkeys(str(command) for _, command in commands)
        )
    return "install the ROCm wheels of this GPU's family, of the same release (TheRock's release notes list them)"


_PROCESSOR = re.compile(r"gfx[0-9a-f]{3,4}(?![0-9a-f])")


def _tarball_build(state: LibraryKernels, rocm_version: str | None) -> str | None:
    """Where the library comes from TheRock's tarball of one GPU family (its processors named by its kernel files:
    the library's folder, or the tarball's .kpack/ files): the same release's tarball of the missing GPUs' family.
    None: not a tarball, or its family or theirs is not known."""
    from jax_rocm7_plugin._machine.rocm_install import layout
    from jax_rocm7_plugin._policy.rocm_families import family_of, one_family, tarball_url

    root = state.shared_object.parent.parent
    if rocm_version is None or layout(root) != "therock":
        return None
    carried = {
        m.group(0) for name in (*_names(state.folder), *_names(root / ".kpack")) for m in _PROCESSOR.finditer(name)
    }
    own = one_family(sorted(carried), rocm_version) if carried else None
    urls = {gfx: tarball_url(gfx, rocm_version) for gfx in state.missing}
    if own is None or not all(urls.values()):
        return None
    wanted = ", ".join(dict.fromkeys(family_of(g, rocm_version) or g for g in state.missing))
    return (
        f"this {state.library.name} comes from TheRock's tarball of ROCm {rocm_version} for {own}, which does not "
        f"carry {', '.join(state.missing)}: unpack the same release's tarball for {wanted} in its place: "
        + "; ".join(dict.fromkeys(str(u) for u in urls.values()))
    )


def _fix(state: LibraryKernels, rocm_version: str | None = None) -> str:
    library, gpus = state.library, ", ".join(state.missing)
    if library.without == "slower":
        return "nothing to do; a ROCm release whose MIOpen ships a kernel database for it starts faster"
    family = _PIP_FAMILY.search(str(state.shared_object))
    if state.misplaced:
        where = ", ".join(f"{state.folder}/{g}/" for g in state.misplaced)
        how = (
            f"{library.name} reads {state.folder} itself only: link the files of {where} into it "
            f"(ln -s {state.folder}/{state.misplaced[0]}/* {state.folder}/) until the install lays them out where "
            "it reads"
        )
    elif family is not None:
        how = f"this {library.name} comes from TheRock's pip wheel for {family.group(1)}, which does not carry {gpus}: "
        how += _family_build(state.missing, rocm_version)
    elif (tarball := _tarball_build(state, rocm_version)) is not None:
        how = tarball
    else:
        how = f"use a ROCm release whose {library.name} supports {gpus} (AMD's supported-GPU list: {SUPPORTED_GPUS})"
    if state.variable_value:
        how = f"point {library.variable} at a folder with {gpus}'s files, or unset it; else {how}"
    if library.fix_flag:
        how += f"; or keep XLA off {library.name}: XLA_FLAGS={library.fix_flag}"
    return how
