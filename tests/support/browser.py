"""A real browser for the pages' tests (test support, never shipped): Debian's Chromium, headless, driven by
Playwright's Python client (its own browser downloads cannot reach this machine; the executable is pointed at).

`open_page` loads a page from file:// and says what a reader would meet: console errors, any request that is not
the file itself, the verdict's text, the marked elements, horizontal overflow at a width; and keeps a screenshot
under tests/output/screenshots (the test output CI keeps)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

CHROMIUM = os.environ.get("JAX_ROCM_TEST_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[1] / "output" / "screenshots"
# As root Chromium needs --no-sandbox; the rest keep it off this machine's closed network (DESIGN.md).
ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]  # fmt: skip


class Seen(NamedTuple):
    console_errors: list[str]
    requests: list[str]  # every URL asked for but the page itself
    verdict: str
    marked: list[dict[str, str]]  # each marked element's data-* attributes
    overflow: int  # scrollWidth - clientWidth at the width asked (0: nothing overflows)
    screenshot: Path
    boxes: dict[str, dict[str, float]]  # "<host>/<gpu>" of each marked GPU cell: where it is on the first screen
    tiles: list[dict[str, str]]  # the cluster grid's tiles (data-host, data-hosts: how many hosts it holds)


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM} (ci/run_tests.sh installs Debian's chromium as root)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "Playwright's Python client is not installed (requirements/test.txt)"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    why = browser_missing()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests cannot run under CI=true: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(
    browser: Any, path: Path, name: str, *, width: int = 1280, height: int = 900, script: bool = True
) -> Seen:
    """Load `path` from file:// at `width` x `height` (JavaScript on unless `script` is False); `name`: its
    screenshot's file name."""
    page = browser.new_page(viewport={"width": width, "height": height}, java_script_enabled=script)
    errors: list[str] = []
    requests: list[str] = []
    url = path.resolve().as_uri()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url) if r.url != url else None)
    try:
        page.goto(url, wait_until="load")
        verdict = page.inner_text("#verdict")
        marked = page.eval_on_selector_all(
            '[data-marked="true"]',
            "els => els.map(e => Object.fromEntries(Object.entries(e.dataset)))",
        )
        boxes = page.eval_on_selector_all(
            '[data-marked="true"][data-gpu][data-host]',
            "els => Object.fromEntries(els.map(e => { const r = e.getBoundingClientRect();"
            " return [e.dataset.host + '/' + e.dataset.gpu, {x: r.x, y: r.y, width: r.width, height: r.height}]; }))",
        )
        tiles = page.eval_on_selector_all("[data-hosts]", "els => els.map(e => Object.assign({}, e.dataset))")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(shot), full_page=False)
    finally:
        page.close()
    return Seen(errors, requests, verdict, marked, int(overflow), shot, boxes, tiles)


def print_a4(browser: Any, path: Path) -> bytes:
    """The page printed to PDF on A4, as the browser's print does (the page's own print style)."""
    page = browser.new_page()
    try:
        page.goto(path.resolve().as_uri(), wait_until="load")
        page.emulate_media(media="print")
        return bytes(page.pdf(format="A4"))
    finally:
        page.close()
