"""End to end in real Chromium: ``python -m app`` serves the Panda and a joint slider drives the TCP readout.

Needs Debian's ``/usr/bin/chromium`` and pip ``playwright`` (never ``playwright install``); skipped without
them, except under ``CI=true`` where a missing browser fails. ``VIEWER_SCREENSHOT=PATH`` says where the
screenshot goes (default: the test's tmp_path); ``UPDATE_SCREENSHOT=1`` also copies it to ``docs/viewer.png``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
import viser.transforms as vtf

import assets
from learning.robot import franka_kinematics

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
STARTUP_TIMEOUT_S = 45.0
UI_TIMEOUT_MS = 30_000
MOVED_JOINT, MOVED_VALUE = "panda_joint3", 0.5  # radians


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def viewer_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Run ``python -m app`` on a free port; the URL it prints, once its page answers; stopped at teardown."""
    log_path = tmp_path / "app.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(_free_port())],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()

    request.addfinalizer(stop)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"python -m app exited with {proc.returncode}:\n{log_path.read_text()}")
        # viser moves to the next port when the asked one is taken, so trust the URL the app prints.
        match = re.search(r"Viewer running at (http://\S+)", log_path.read_text())
        if match:
            try:
                with urllib.request.urlopen(match[1], timeout=2) as response:
                    if response.status == 200:
                        return match[1]
            except OSError:
                pass
        time.sleep(0.2)
    pytest.fail(f"python -m app did not serve its page within {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()}")


@pytest.fixture
def page():
    """A Playwright page in Debian's headless Chromium."""
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 800})
        finally:
            browser.close()


def input_xpath(label: str) -> str:
    """XPath of the visible input in the viser GUI row labelled ``label`` (for a slider: its numeric box).

    viser ties ``<label for=...>`` to the slider track, not to its numeric box, and text inputs carry no id,
    so go from the label to the nearest enclosing row that holds a visible input.
    """
    visible = "input[not(@type='hidden')]"
    return f"//label[normalize-space(.)='{label}']/ancestor::div[.//{visible}][1]//{visible}"


def read_inputs(page, labels: list[str]) -> list[str]:
    """The values of several labelled inputs in one round trip (each costs a frame of software WebGL)."""
    return page.evaluate(
        """xpaths => xpaths.map(x => {
            const node = document.evaluate(x, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null);
            return node.singleNodeValue ? node.singleNodeValue.value : "";
        })""",
        [input_xpath(label) for label in labels],
    )


def expected_readout(q: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """TCP position (m) and wxyz quaternion at ``q`` by this project's FK (float64)."""
    kinematics = franka_kinematics(dtype=torch.float64)
    with torch.no_grad():
        T_root_tcp = kinematics(torch.tensor(q, dtype=torch.float64)).numpy()
    return T_root_tcp[:3, 3], vtf.SO3.from_matrix(T_root_tcp[:3, :3]).wxyz


def wait_for_readout(page, q: list[float], timeout_s: float = 20.0) -> None:
    """Wait until the page's TCP readout shows FK(q): position to 0.2 mm, quaternion to 2e-4 (either sign)."""
    position, wxyz = expected_readout(q)
    deadline = time.monotonic() + timeout_s
    while True:
        texts = read_inputs(page, ["position (m)", "wxyz"])
        try:
            p, w = (np.array([float(v) for v in text.split(",")]) for text in texts)
            quaternion_error = min(np.abs(w - wxyz).max(), np.abs(w + wxyz).max())
            if np.abs(p - position).max() <= 2e-4 and quaternion_error <= 2e-4:
                return
        except ValueError:
            pass  # Not a readout yet (empty field).
        if time.monotonic() > deadline:
            pytest.fail(f"TCP readout shows {texts}, expected position {position} and wxyz {wxyz} for q={q}")
        page.wait_for_timeout(100)


def screenshot_path(tmp_path: Path) -> Path:
    return Path(os.environ.get("VIEWER_SCREENSHOT") or tmp_path / "viewer.png")


def test_joint_slider_drives_tcp_readout(viewer_url: str, page, tmp_path: Path) -> None:
    page.goto(viewer_url)
    page.locator("canvas").first.wait_for(timeout=UI_TIMEOUT_MS)
    page.locator(f"xpath={input_xpath(assets.ARM_JOINTS[-1])}").wait_for(timeout=UI_TIMEOUT_MS)
    ready = list(assets.READY_POSE)
    assert [float(v) for v in read_inputs(page, list(assets.ARM_JOINTS))] == pytest.approx(ready, abs=1e-3)
    wait_for_readout(page, ready)

    joint = assets.ARM_JOINTS.index(MOVED_JOINT)
    moved = ready[:joint] + [MOVED_VALUE] + ready[joint + 1 :]
    assert np.abs(expected_readout(moved)[0] - expected_readout(ready)[0]).max() > 0.01, "the move must show"
    page.locator(f"xpath={input_xpath(MOVED_JOINT)}").fill(str(MOVED_VALUE))
    wait_for_readout(page, moved)

    page.get_by_role("button", name="Ready pose").click()
    wait_for_readout(page, ready)
    assert float(read_inputs(page, [MOVED_JOINT])[0]) == pytest.approx(ready[joint], abs=1e-3)

    # Close viser's "Software WebGL rendering detected" notice, then give the meshes time to draw.
    close_notice = page.locator(".mantine-Notification-root button")
    if close_notice.count():
        close_notice.first.click()
    page.wait_for_timeout(3000)
    path = screenshot_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        (REPO / "docs").mkdir(exist_ok=True)
        shutil.copyfile(path, REPO / "docs" / "viewer.png")
