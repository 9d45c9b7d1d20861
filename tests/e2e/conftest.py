"""Browser fixtures: the system Chromium driven by Playwright (never a downloaded browser), and a
screenshot in test-artifacts/ for every browser test that fails."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """The system Chromium; fails (never skips) with the install hint when it is missing."""
    found = os.environ.get("STACKFLOW_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(found).exists():
        pytest.fail("Chromium is not installed: run `bash scripts/setup.sh --dev` (apt: chromium)")
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one module. Playwright's sync API runs an asyncio loop in this thread while it is
    open, and Prefect's sync calls then return coroutines (they think they are in async code): so the
    browser never outlives its module, and browser tests run last (tests/conftest.py)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def save_screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page (1400x1000); on failure its last screen goes to test-artifacts/<test>.png."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(20_000)
    page = context.new_page()
    try:
        yield page
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            try:
                shot = save_screenshot(page, f"FAILED-{request.node.name}")
                print(f"screenshot of the failure: {shot}")
            except Exception as exc:  # the page may be gone; the failure itself matters more
                print(f"no screenshot: {exc}")
        context.close()
