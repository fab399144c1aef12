"""Would the libraries the ROCm runtime opens by name at run time be found? (_policy/opened_libraries.json)

A dependency walk sees DT_NEEDED only; ROCr opens librocdxg with dlopen under WSL, so an install that has it in
a folder nothing searches passes every other check and still gets no GPU. Each name is resolved as dlopen would
from its opener (the copy of the opener the walk found): the opener's RPATH (without RUNPATH), LD_LIBRARY_PATH,
its RUNPATH, ld.so.conf's directories, the default ones. Where it is not found, copies in the usual folders
make the fix concrete.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import unrooted
from jax_rocm7_plugin._machine.ld_resolve import resolve_opened
from jax_rocm7_plugin._policy.opened_libraries import OpenedLibrary
from jax_rocm7_plugin._record import NamedTuple

# Where such libraries are installed by hand or by a package, to name a copy the loader does not search.
USUAL_FOLDERS = ("/opt/rocm/lib", "/opt/rocm/lib64", "/usr/lib", "/usr/local/lib", "/usr/lib/x86_64-linux-gnu")


class Opened(NamedTuple):
    library: OpenedLibrary
    names: tuple[str, ...]  # asked for by this release's opener
    opener: Path | None
    found: Path | None
    copies: tuple[Path, ...]  # files of any known name in folders the loader does not search


def resolve(
    library: OpenedLibrary,
    opener: Path | None,
    rocm: tuple[int, int, int] | None,
    root: Path,
    ld_library_path: Sequence[str],
    folders: Sequence[Path],
) -> Opened:
    names = library.names_for(rocm)
    found = next(
        (p for n in names if (p := resolve_opened(n, opener, root, ld_library_path)) is not None),
        None,
    )
    copies: tuple[Path, ...] = ()
    if found is None:
        seen = dict.fromkeys(f / n for f in folders for n in library.names if (f / n).is_file())
        copies = tuple(seen)
    return Opened(library, names, opener, found, copies)


def opened_findings(states: Sequence[Opened], root: Path) -> list[Finding]:
    """runtime-library-missing (an error where the process gets no GPU) for each library not found."""
    found = []
    for state in states:
        if state.found is not None:
            continue
        library = state.library
        asked = " or ".join(state.names)
        opener = f"{library.opener} ({library.opener_role})"
        summary = (
            f"{opener} opens {asked} at run time {library.needed_for}, and dlopen would not find it from there: "
            + ("jax will see no GPU" if library.without == "no-gpu" else "that part of ROCm will not work")
        )
        evidence = [
            f"opener: {state.opener}"
            if state.opener is not None
            else f"opener: {library.opener} not found; resolved as from a library without RPATH or RUNPATH",
            f"looked for {asked} as dlopen does: the opener's RUNPATH, LD_LIBRARY_PATH, ld.so.conf's folders, "
            "the default folders",
            *(f"a copy at {unrooted(c, root)}, in no folder the loader searches" for c in state.copies),
            *library.evidence,
        ]
        usable = [c for c in state.copies if c.name in state.names]
        if usable:
            folder = unrooted(usable[0].parent, root)
            fix = (
                f"make the loader find the copy in {folder}: echo {folder} | sudo tee /etc/ld.so.conf.d/{library.name}"
                f".conf && sudo ldconfig (or export LD_LIBRARY_PATH={folder}:$LD_LIBRARY_PATH)"
            )
        elif state.copies:
            copy = state.copies[0]
            fix = (
                f"this ROCm's {library.opener} asks for {asked}, but the copy is {copy.name}: link it "
                f"(sudo ln -s {copy.name} {unrooted(copy.parent, root)}/{state.names[0]}) and make the folder "
                f"known to the loader (a file in /etc/ld.so.conf.d, then sudo ldconfig), or {library.install}"
            )
        else:
            fix = library.install
        found.append(catalog.runtime_library_missing(summary, fix, tuple(evidence)))
    return found
