"""Writing a page (or a trace) the way `report` writes its bundle: whole or not at all (a file beside the
destination, then one rename), and an existing file kept unless the caller was told --force."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def refusal(destination: Path, *, force: bool, flag: str) -> str | None:
    """Why `destination` cannot be written (a usage error, said before any work), or None."""
    if destination.is_dir():
        return f"{flag} {destination}: is a directory; give a file name"
    if destination.exists() and not force:
        return f"{flag} {destination}: exists; add --force to replace it"
    if not destination.parent.is_dir():
        return f"{flag} {destination}: its folder {destination.parent} does not exist"
    return None


def write(destination: Path, text: str, *, force: bool, mode: int = 0o644) -> str | None:
    """Write `text` to `destination` whole; None, or why it was not written (one line). `mode`: 0o600 for what is
    written in a folder every user shares (the temporary folder) about a job's processes."""
    from jax_rocm7_plugin._safe_io import claim_beside, publish

    try:
        partial = claim_beside(destination)
    except OSError as error:
        return f"cannot write in {destination.parent}: {error.strerror or error}"
    try:
        with open(partial, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
        os.chmod(partial, mode)
        if not publish(partial, destination, force=force):
            return f"{destination} exists (it appeared meanwhile); add --force to replace it"
        return None
    except OSError as error:
        return f"cannot write {destination}: {error.strerror or error}"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(partial)
