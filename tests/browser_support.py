"""What the real-browser tests share: serving ``python -m app`` in a subprocess, Debian's Chromium, reading the
page (inputs, table rows), projecting scene points to pixels and finding the gizmo's arrow, dragging and typing as
a user does."""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from viewer_support import free_port

from app.grasp_yaw.workspace import CAMERA
from app.shell.stage import GIZMO_SCALE

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


APP_LOGS: dict[str, Path] = {}  # a served page's URL -> the log its app writes (shown when a wait fails)


INITIAL_TARGET = (0.5, 0.15, 0.12)  # app.grasp_yaw.scene.INITIAL_TARGET


NEW_TARGET = (0.42, -0.28, 0.08)  # metres; radial yaw -33.7 deg


# The methods whose ghosts are shown by default (app.grasp_yaw.methods), by their labels in the answers table.
DEFAULT_GHOSTS = (
    "radial rule",
    "heading",
    "learned predictor",
    "angular grid",
    "online optimization",
    "teacher (numerical",
)


def serve_app(request: pytest.FixtureRequest, tmp_path: Path, *args: str) -> str:
    """``python -m app --light ARGS`` on a free port; the URL it prints, once its page answers; stopped at teardown.

    ``--light``: this Chromium draws WebGL in software, where the full lighting costs 9.4 s a frame at 1280x800 on
    2 cores (plain lighting: 17 ms), and until a frame ends the page takes no message, key or mouse event.
    """
    log_path = tmp_path / "app.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--light", "--port", str(free_port()), *args],
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
                        APP_LOGS[match[1]] = log_path
                        return match[1]
            except OSError:
                pass
        time.sleep(0.2)
    pytest.fail(f"python -m app did not serve its page within {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()}")


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


def pick(page, label: str, option: str) -> None:
    """Choose ``option`` in the dropdown labelled ``label``, as a user does: open it, click the option."""
    page.locator(f"xpath={input_xpath(label)}").click(timeout=UI_TIMEOUT_MS)
    page.get_by_role("option", name=option, exact=True).click(timeout=UI_TIMEOUT_MS)


def method_row(page, label: str) -> list[str]:
    """The cells of the answers-table row whose method cell contains ``label``."""
    return page.evaluate(
        """label => {
            for (const row of document.querySelectorAll("tr")) {
                const cells = [...row.querySelectorAll("td")].map(c => c.innerText.trim());
                if (cells.length && cells[0].includes(label)) return cells;
            }
            return [];
        }""",
        label,
    )


def wait_for_yaws(page, target: tuple[float, float, float], before: dict[str, str], timeout_s: float = 30.0) -> None:
    """Wait until the radial rule's row shows atan2(y, x) of ``target`` (deg, 0.1) and the learned row a new yaw."""
    expected = math.degrees(math.atan2(target[1], target[0]))
    deadline = time.monotonic() + timeout_s
    while True:
        radial, learned = method_row(page, "radial rule"), method_row(page, "learned predictor")
        try:
            ok = abs(float(radial[1]) - expected) <= 0.051 and learned[1] != before["learned"]
            float(learned[1])
        except (IndexError, ValueError):
            ok = False
        if ok:
            return
        if time.monotonic() > deadline:
            said = read_inputs(page, ["target x (m)", "target y (m)", "target z (m)"])
            pytest.fail(
                f"radial row {radial}, learned row {learned}; expected radial yaw {expected:.1f}; the boxes say {said}"
                f"\n{what_the_app_said(page)}"
            )
        page.wait_for_timeout(100)


def what_the_app_said(page) -> str:
    """The page's warnings and errors and the end of its app's log: what a failed wait shows."""
    body = page.evaluate("document.body.innerText")
    warnings = [line for line in body.splitlines() if "⚠" in line or "rror" in line or "ailed" in line]
    log = next((path for url, path in APP_LOGS.items() if page.url.startswith(url.rstrip("/"))), None)
    tail = "" if log is None else log.read_text()[-3000:]
    return "the page warns: " + ("; ".join(warnings) or "nothing") + f"\nthe app's log ends:\n{tail}"


FRANKA_CAMERA = (CAMERA.position, CAMERA.look_at, CAMERA.fov_deg)  # a scene's initial camera: eye, look-at, fov


def project(point: np.ndarray, width: float, height: float, camera=FRANKA_CAMERA) -> np.ndarray:
    """Pixel ``(x, y)`` of a world point seen from a scene's initial ``camera`` (z up) on a canvas."""
    position, look_at, fov_deg = camera
    eye, look = np.array(position), np.array(look_at)
    forward = (look - eye) / np.linalg.norm(look - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    d = np.asarray(point, dtype=float) - eye
    tan = math.tan(math.radians(fov_deg) / 2)
    ndc = np.array([(d @ right) / ((d @ forward) * tan * width / height), (d @ up) / ((d @ forward) * tan)])
    return np.array([(ndc[0] + 1) / 2 * width, (1 - ndc[1]) / 2 * height])


def find_x_arrow(
    page, target: tuple[float, float, float], camera=FRANKA_CAMERA, radius_px: float = 12
) -> tuple[np.ndarray, np.ndarray]:
    """Where the gizmo's x arrow is on screen: the pixel of the arrow's colour (drei's ``#ff2060``) nearest to 60 %
    of its projected length (within ``radius_px``), and the arrow's screen direction. Fails if the arrow is not
    drawn there."""
    box = page.locator("canvas").first.bounding_box()
    origin = project(np.array(target), box["width"], box["height"], camera)
    tip = project(np.array(target) + [GIZMO_SCALE, 0.0, 0.0], box["width"], box["height"], camera)
    direction = (tip - origin) / np.linalg.norm(tip - origin)
    guess = origin + 0.6 * (tip - origin)
    pixels = matplotlib.image.imread(io.BytesIO(page.screenshot()))[..., :3]
    colour = np.array([0xFF, 0x20, 0x60]) / 255
    ys, xs = np.nonzero(np.linalg.norm(pixels - colour, axis=-1) < 0.2)
    found = np.stack([xs, ys], -1).astype(float) - [box["x"], box["y"]]
    near = found[np.linalg.norm(found - guess, axis=-1) < radius_px]
    if len(near) == 0:
        pytest.fail(
            f"no pixel of the gizmo's x arrow within {radius_px} px of {guess.round()} (origin {origin.round()})"
        )
    grab = near[np.argmin(np.linalg.norm(near - guess, axis=-1))]
    return grab + [box["x"], box["y"]], direction


def wait_for_rows(page, labels: tuple[str, ...], timeout_s: float = 30.0) -> None:
    """Wait until each labelled method's row shows a yaw (a number: answered, not pending)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = {label: method_row(page, label) for label in labels}
        try:
            for cells in rows.values():
                float(cells[1].strip("*"))
                assert "pending" not in cells[2]
            return
        except (IndexError, ValueError, AssertionError):
            if time.monotonic() > deadline:
                pytest.fail(f"rows not answered: {rows}")
            page.wait_for_timeout(200)


IDLE_WATCH_S = 20.0


def table_height_stays_while_idle(page) -> None:
    """For ``IDLE_WATCH_S`` with the trainer running and nothing touched, every change of the answers table (its
    snapshots mark rows pending and land) leaves the table's height as it was; at least one row went pending."""
    page.evaluate(
        """() => {
            const table = [...document.querySelectorAll("table")].find(t => t.innerText.includes("radial rule"));
            window.tableWatch = {heights: [table.offsetHeight], pending: 0};
            new MutationObserver(() => {
                const now = [...document.querySelectorAll("table")].find(t => t.innerText.includes("radial rule"));
                window.tableWatch.heights.push(now.offsetHeight);
                if (now.innerHTML.includes("opacity")) window.tableWatch.pending += 1;
            }).observe(table.closest("div").parentElement, {subtree: true, childList: true, characterData: true});
        }"""
    )
    page.wait_for_timeout(1000 * IDLE_WATCH_S)
    watch = page.evaluate("window.tableWatch")
    heights = sorted(set(watch["heights"]))
    print(
        f"answers table over {IDLE_WATCH_S:.0f} s idle: {len(watch['heights'])} changes, {watch['pending']} "
        f"with a pending row, heights {heights} px"
    )
    assert watch["pending"] > 0, "no snapshot marked a row pending while watched"
    assert len(heights) == 1, f"the table's height changed while idle: {heights} px"


@contextlib.contextmanager
def canvas_hidden(page):
    """Hide the scene's canvas meanwhile: headless Chromium draws it in software at seconds a frame, and until a frame
    ends the page takes no key (with a GPU, keys are handled within a frame)."""
    page.evaluate("document.querySelectorAll('canvas').forEach(c => c.style.visibility = 'hidden')")
    try:
        yield
    finally:
        page.evaluate("document.querySelectorAll('canvas').forEach(c => c.style.visibility = '')")


# A typist's gap between keys, and between the last key and Enter. viser 1.1.1's page sends every GUI message of the
# panel through one sender that sends at most one message per 50 ms and keeps only the latest meanwhile: a box's last
# update followed within 50 ms by Enter's submit is never sent (docs/viewer.md, Limitations).
KEY_GAP_MS = 150


def type_key_by_key(page, label: str, text: str) -> list[str]:
    """Clear the box labelled ``label`` and type ``text`` one key at a time as a user does (``KEY_GAP_MS`` apart, and
    as long after the last key); returns what the box said after each key. On loaded cores the keys reach the server
    seconds apart: the case where a pause took half-typed numbers (and a box rewritten on it turned ``-0.25`` into
    ``0.1525``); a box is now taken at Enter."""
    box = page.locator(f"xpath={input_xpath(label)}")
    box.evaluate("e => { e.focus(); e.select(); }")
    page.keyboard.press("Backspace")
    said = []
    for key in text:
        page.wait_for_timeout(KEY_GAP_MS)
        page.keyboard.press(key)
        said.append(box.input_value())
    page.wait_for_timeout(KEY_GAP_MS)
    return said


def screenshot_path(tmp_path: Path) -> Path:
    return Path(os.environ.get("VIEWER_SCREENSHOT") or tmp_path / "viewer.png")


def drag_gizmo_along_x(page, target: tuple[float, float, float], pixels: float = 60.0) -> tuple[float, float, float]:
    """Drag the target gizmo's x arrow with the mouse (down, 6 moves, up) and wait until the target inputs show a
    larger x and the radial rule's row follows them; returns the inputs' target. (Headless Chromium renders this scene
    in software at a few seconds per frame, and each mouse event waits for one: hence few moves.)"""
    labels = ["target x (m)", "target y (m)", "target z (m)"]
    page.evaluate("document.querySelectorAll('.mantine-Notification-root').forEach(n => n.remove())")
    page.wait_for_timeout(1000)  # the scene's first frames
    grab, direction = find_x_arrow(page, target)
    # Where the time goes: the page's frame times while the drag is handled (each event waits for a frame).
    page.evaluate(
        """() => {
            window.frameTimes = [];
            const tick = t => { window.frameTimes.push(t); requestAnimationFrame(tick); };
            requestAnimationFrame(tick);
        }"""
    )
    page.mouse.move(*grab)
    page.mouse.down()
    for step in range(1, 7):
        page.mouse.move(*(grab + pixels * step / 6 * direction))
    page.mouse.up()
    released = time.monotonic()
    deadline = released + 30
    while True:
        x, y, z = (float(v) for v in read_inputs(page, labels))
        radial = method_row(page, "radial rule")
        try:
            follows = abs(float(radial[1]) - math.degrees(math.atan2(y, x))) <= 0.051
        except (IndexError, ValueError):
            follows = False
        if x > target[0] + 0.05 and follows:
            frames = np.diff(page.evaluate("window.frameTimes"))
            print(
                f"dragged the gizmo's x arrow from pixel {grab.round()}: target x {target[0]} -> {x} m; the answers "
                f"for it in the table {time.monotonic() - released:.1f} s after the mouse was released; the page "
                f"drew {frames.size} frames meanwhile, median {np.median(frames):.0f} ms, longest {frames.max():.0f} ms"
            )
            return x, y, z
        if time.monotonic() > deadline:
            pytest.fail(f"after the drag: target inputs ({x}, {y}, {z}), radial row {radial}")
        page.wait_for_timeout(100)
