"""Chromium for the tests that drive JupyterLab or JupyterHub (Playwright, the system's
chromium): a module-scoped ``browser`` fixture, and browser contexts that reach the
loopback servers only and record every other address a page tries."""
from __future__ import annotations

import shutil
import urllib.parse
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package (make sysdeps)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def loopback_context(browser, blocked: list[str], default_timeout_ms: int | None = None):
    """A 1400 x 900 context whose requests to anything but loopback are aborted and
    appended to ``blocked``."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})

    def route(r):
        if urllib.parse.urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    if default_timeout_ms is not None:
        context.set_default_timeout(default_timeout_ms)
    return context
