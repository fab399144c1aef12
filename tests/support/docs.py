"""The example blocks of the project's Markdown pages, as the tests that tie them to what commands print read them."""

from __future__ import annotations

from pathlib import Path


def example_block(page: Path, first_line_starts: str) -> list[str]:
    """The example block (indented code) of `page` whose first line starts with `first_line_starts`, unindented."""
    lines = page.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"    {first_line_starts}"))
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line[4:])
    return block
