"""The report bundle's index.html: the doctor's page, then a link to every file in the bundle (relative: the
bundle unpacked, each opens beside it)."""

from __future__ import annotations

from collections.abc import Mapping

from jax_rocm7_plugin._pages.html import esc


def with_files(doctor_page: str, files: Mapping[str, int]) -> str:
    """The doctor's page with a list of the bundle's files (name -> size in bytes) added at its end."""
    items = "".join(
        f'<li><a href="{esc(name)}">{esc(name)}</a> <span class="meta">({size:,} bytes)</span></li>'
        for name, size in sorted(files.items())
    )
    section = f'<h2>Files in this bundle</h2><ul id="files">{items}</ul>'
    return doctor_page.replace("\n</main>", f"\n{section}\n</main>", 1)
