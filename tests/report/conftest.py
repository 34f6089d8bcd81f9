"""One headless Chromium per test session for the browser tests: Debian's /usr/bin/chromium
driven by Playwright (never a browser Playwright downloads), with a fresh profile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """A BrowserContext (one per xdist worker). Fails, never skips, without Chromium: `./dev
    test` installs Debian's package (apt-get install chromium) when it is missing."""
    assert CHROMIUM.exists(), (
        f"{CHROMIUM} is missing: apt-get install -y chromium (./dev test does)"
    )
    playwright = sync_playwright().start()
    try:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()
    finally:
        playwright.stop()
