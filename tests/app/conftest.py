"""Fixtures of the viewer's tests: the viewer served by ``python -m app`` (plain, and on a smoke run) and a page in
Debian's headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_support import CHROMIUM, CHROMIUM_ARGS, serve_app
from optional_dependencies import unavailable


@pytest.fixture
def viewer_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Run ``python -m app`` on a free port; the URL it prints, once its page answers; stopped at teardown."""
    return serve_app(request, tmp_path)


@pytest.fixture
def run_viewer_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``python -m app --run RUN`` on a smoke-sized run of two seeds, trained for the test."""
    from learning.grasp_yaw.config import preset
    from learning.grasp_yaw.experiment import train_run

    run = tmp_path / "run"
    train_run(preset("smoke"), run, show_progress=False)
    return serve_app(request, tmp_path, "--run", str(run), "--seed", "0")


@pytest.fixture
def page():
    """A Playwright page in Debian's headless Chromium."""
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 800})
        finally:
            browser.close()
