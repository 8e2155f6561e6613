"""Debian's chromium, headless, driven by Playwright's Python package (never a browser
Playwright downloads), for the web UI tests; and where their screenshots go.

Without the browser the tests are skipped with the reason, except under ``CI=true``, where
they fail: CI installs it (``.ci/run``), so a missing browser there is a broken set-up.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")
DEBIAN_CHROMIUM = Path("/usr/bin/chromium")  # where Debian's package puts it
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def chromium() -> str:
    """The browser's path, or the test is skipped (failed under CI) saying what is missing."""
    found = next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)
    if found is None and DEBIAN_CHROMIUM.exists():
        found = str(DEBIAN_CHROMIUM)
    if found is None:
        message = "chromium is not installed (apt-get install chromium): the web UI is untested"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@contextmanager
def browser() -> Iterator:
    """A headless chromium for a module's tests; each test opens its own context."""
    from playwright.sync_api import sync_playwright

    path = chromium()
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=path, args=ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Screenshots go to ``$REWIND_TEST_ARTIFACTS`` when set (CI keeps them), else to a
    temporary directory of the run."""
    chosen = os.environ.get("REWIND_TEST_ARTIFACTS")
    directory = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory
