"""The README a newcomer scans, and the pages beside the code it links to: short, linked, nothing lost.

The README stays at most 300 lines with the two set-up commands in its first 45, a contents list that reaches
every section, and no paragraph of prose longer than 8 lines (in the pages it links to as well). Every relative
link resolves (the file, and the heading an anchor names), and every variable the plugin reads is documented.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jax_rocm7_plugin._environment import declared_variables
from tests.support.environment import REPO

README = REPO / "README.md"
MAX_LINES = 300
SETUP_WITHIN = 45
MAX_PROSE_LINES = 8
SETUP_COMMANDS = ("bash build/try_it.sh", "bash ci/run_tests.sh")
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def linked_pages() -> list[Path]:
    """README.md and every Markdown page of the repository it links to, directly or through another."""
    found, queue = [README], [README]
    while queue:
        page = queue.pop()
        for target in LINK.findall(page.read_text()):
            path = target.split("#", 1)[0]
            if not path or "://" in path or not path.endswith(".md"):
                continue
            linked = (page.parent / path).resolve()
            if linked.is_file() and linked not in found:
                found.append(linked)
                queue.append(linked)
    return found


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(page: Path) -> list[str]:
    lines, inside_code = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            inside_code = not inside_code
        elif not inside_code and re.match(r"#{1,6} ", line):
            lines.append(line.split(" ", 1)[1])
    return lines


def prose_paragraphs(text: str) -> list[list[str]]:
    """Runs of prose lines: tables, indented code, headings and the HTML comments of generated tables are not
    prose, and each list item starts a paragraph of its own."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        is_prose = bool(line.strip()) and not line.startswith(("|", "    ", "#", "<!--", "```"))
        starts_item = bool(re.match(r"(- |\d+\. )", line))
        if not is_prose or starts_item:
            if current:
                paragraphs.append(current)
            current = [line] if is_prose else []
        else:
            current.append(line)
    if current:
        paragraphs.append(current)
    return paragraphs


def test_the_readme_is_short_and_starts_with_the_two_set_up_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, len(lines)
    commands = [line.strip() for line in lines if line.startswith("    bash ")]
    assert commands == list(SETUP_COMMANDS), commands
    for command in SETUP_COMMANDS:
        assert any(line.strip() == command for line in lines[:SETUP_WITHIN]), command
    assert "ci/run_tests.sh" in (REPO / ".ci" / "run").read_text()


def test_the_contents_list_reaches_every_section() -> None:
    text = README.read_text()
    contents = text.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", contents, re.M)
    sections = [anchor(h) for h in headings(README) if not h.startswith("#")]
    top = [anchor(line[3:]) for line in text.splitlines() if line.startswith("## ")]
    assert listed == [a for a in top if a not in ("set-up", "contents")], (listed, top)
    nested = re.findall(r"^ +- \[[^\]]+\]\(#([^)]+)\)", contents, re.M)
    assert set(listed) | set(nested) <= set(sections), set(listed) | set(nested) - set(sections)


@pytest.mark.parametrize("page", linked_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if "://" in target:
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.relative_to(REPO)}: {target} does not exist"
        if fragment:
            assert fragment in [anchor(h) for h in headings(linked)], f"{page.relative_to(REPO)}: {target}"


@pytest.mark.parametrize("page", linked_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_paragraph_of_prose_runs_longer_than_eight_lines(page: Path) -> None:
    long = [p for p in prose_paragraphs(page.read_text()) if len(p) > MAX_PROSE_LINES]
    assert long == [], [p[0] for p in long]


def test_the_readme_links_every_page_beside_the_code() -> None:
    pages = {p.relative_to(REPO) for p in REPO.glob("**/README.md") if ".venv" not in p.parts and "." not in p.parts[0]}
    pages = {p for p in pages if not any(part.startswith((".", "node_modules")) for part in p.parts)}
    assert pages <= {p.relative_to(REPO) for p in linked_pages()}, pages


def test_every_variable_the_plugin_reads_is_documented() -> None:
    """Each variable the plugin declares for its users (_environment.py) is in the README or a page it links."""
    documented = "\n".join(p.read_text() for p in linked_pages())
    own = [v.name for v in declared_variables().values() if v.owner == "plugin" and not v.internal]
    assert len(own) >= 10
    assert [n for n in own if n not in documented] == []


def test_every_documented_variable_is_declared_with_the_default_the_docs_give() -> None:
    """No page names a JAX_ROCM_* variable the plugin does not read, and a table row that gives a default gives
    the declared one."""
    for page in linked_pages():
        text = page.read_text()
        named = set(re.findall(r"\b(JAX_ROCM_[A-Z0-9_]+|JAX_ENABLE_ROCM_XDIST)\b", text))
        assert sorted(n for n in named if n not in declared_variables()) == [], page
        for name, row in re.findall(r"^\| `(JAX_ROCM_[A-Z0-9_]+)[^`]*` \|(.*)$", text, re.MULTILINE):
            default = declared_variables()[name].default
            if "(default" in row:  # "(default 30 ..." or "`error` (default ..."
                assert f"(default {default}" in row or f"`{default}` (default" in row, (name, row)
