"""End to end in real Chromium: ``python -m app`` serves the viewer; typing a grasp target, or dragging the target
gizmo with the mouse, moves the answers.

Needs Debian's ``/usr/bin/chromium`` and pip ``playwright`` (never ``playwright install``); skipped without
them, except under ``CI=true`` where a missing browser fails. ``VIEWER_SCREENSHOT=PATH`` says where the
screenshot goes (default: the test's tmp_path); ``UPDATE_SCREENSHOT=1`` also copies it to ``docs/viewer.png``.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from browser_support import (
    DEFAULT_GHOSTS,
    INITIAL_TARGET,
    NEW_TARGET,
    REPO,
    UI_TIMEOUT_MS,
    canvas_hidden,
    drag_gizmo_along_x,
    input_xpath,
    method_row,
    pick,
    read_inputs,
    screenshot_path,
    table_height_stays_while_idle,
    type_key_by_key,
    wait_for_rows,
    wait_for_yaws,
)

pytestmark = pytest.mark.browser


def test_grasp_target_drives_ghosts_and_trainer_advances(viewer_url: str, page, tmp_path: Path) -> None:
    started = time.monotonic()
    page.goto(viewer_url)
    page.locator("canvas").first.wait_for(timeout=UI_TIMEOUT_MS)
    for label in ("target x (m)", "target y (m)", "target z (m)", "trainer step"):
        page.locator(f"xpath={input_xpath(label)}").wait_for(timeout=UI_TIMEOUT_MS)
    for text in ("Grasp", "Training", "Metrics", "training loss"):
        page.get_by_text(text, exact=True).first.wait_for(timeout=UI_TIMEOUT_MS)
    print(f"\npanels rendered after {time.monotonic() - started:.1f} s")
    wait_for_yaws(page, INITIAL_TARGET, {"learned": ""})
    print(f"first answers after {time.monotonic() - started:.1f} s")
    step_before = int(read_inputs(page, ["trainer step"])[0])

    dragged = drag_gizmo_along_x(page, INITIAL_TARGET)  # as users move it: the mouse on the gizmo
    assert dragged[1:] == pytest.approx(INITIAL_TARGET[1:], abs=2e-3), "a drag along x moves x only"
    wait_for_rows(page, DEFAULT_GHOSTS)

    table_height_stays_while_idle(page)

    typing = time.monotonic()
    typed = (dragged[0], -0.25, dragged[2])
    with canvas_hidden(page):
        said = type_key_by_key(page, "target y (m)", "-0.25")
        page.locator(f"xpath={input_xpath('target y (m)')}").press("Enter")  # a typed number is a draft until Enter
    typed_in_s = time.monotonic() - typing
    assert said == ["-", "-0", "-0.", "-0.2", "-0.25"], "the box was rewritten while typed in"
    # Measured under load (2 cores, software WebGL): the server had the keys within 4 s and sent the answers within
    # a second, and the browser received them 6 s after the keys, but the page took them in 40-127 s later (the
    # main thread blocked for 21 s at a stretch; frames of 2.6 s). The wait allows for that page.
    wait_for_yaws(page, typed, {"learned": ""}, timeout_s=240.0)
    assert [float(v) for v in read_inputs(page, ["target x (m)", "target y (m)", "target z (m)"])] == pytest.approx(
        typed
    )
    print(
        f"typed y -0.25 key by key in {typed_in_s:.1f} s: the box said {said}; the answers for it "
        f"{time.monotonic() - typing - typed_in_s:.1f} s after the last key"
    )

    before = {"learned": method_row(page, "learned predictor")[1]}
    for axis, value in zip("xyz", NEW_TARGET, strict=True):
        page.locator(f"xpath={input_xpath(f'target {axis} (m)')}").fill(str(value))
    page.get_by_role("button", name="Set target").click(timeout=UI_TIMEOUT_MS)  # the button commits the three
    wait_for_yaws(page, NEW_TARGET, before, timeout_s=90.0)

    assert [float(v) for v in read_inputs(page, ["target x (m)", "target y (m)", "target z (m)"])] == pytest.approx(
        NEW_TARGET
    )

    print(f"new target's answers after {time.monotonic() - started:.1f} s")
    deadline = time.monotonic() + 30
    while int(read_inputs(page, ["trainer step"])[0]) <= step_before:
        if time.monotonic() > deadline:
            pytest.fail(f"the trainer step stayed at {step_before}")
        page.wait_for_timeout(200)

    # Close viser's "Software WebGL rendering detected" notice, then give the meshes and plots time to draw.
    page.evaluate("document.querySelectorAll('.mantine-Notification-root').forEach(n => n.remove())")
    page.wait_for_timeout(4000)
    path = screenshot_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        (REPO / "docs").mkdir(exist_ok=True)
        shutil.copyfile(path, REPO / "docs" / "viewer.png")
    print(f"\nbrowser test body took {time.monotonic() - started:.1f} s; screenshot {path}")


def landscape_source(page) -> str:
    """The ``src`` of the yaw landscape's image (it changes with every render)."""
    return page.evaluate(
        """() => {
            const images = [...document.querySelectorAll("img")];
            return images.length ? images[images.length - 1].src : "";
        }"""
    )


def wait_for_text(page, text: str, timeout_s: float = 30.0) -> None:
    page.get_by_text(text).first.wait_for(timeout=1000 * timeout_s)


def test_a_run_s_cases_and_models_are_browsed_and_the_landscape_follows(run_viewer_url: str, page) -> None:
    """Pick a held-out split, step through its saved cases, switch the model: the target, the answers and the
    yaw landscape's markers follow."""
    started = time.monotonic()
    page.goto(run_viewer_url)
    for text in ("Test cases", "Yaw landscape", "held-out split", "learned = model"):
        page.get_by_text(text, exact=True).first.wait_for(timeout=UI_TIMEOUT_MS)
    wait_for_yaws(page, INITIAL_TARGET, {"learned": ""}, timeout_s=90)
    print(f"\nrun viewer answered after {time.monotonic() - started:.1f} s")

    pick(page, "held-out split", "test_shift")
    wait_for_text(page, "test_shift #0")
    landscape, before = landscape_source(page), {"learned": method_row(page, "learned predictor")[1]}
    page.get_by_role("button", name="Next case").click(timeout=UI_TIMEOUT_MS)
    wait_for_text(page, "test_shift #1")
    x, y, z = (float(v) for v in read_inputs(page, ["target x (m)", "target y (m)", "target z (m)"]))
    wait_for_yaws(page, (x, y, z), before, timeout_s=60)
    deadline = time.monotonic() + 60
    while landscape_source(page) == landscape:
        if time.monotonic() > deadline:
            pytest.fail("the yaw landscape was not redrawn for the next case")
        page.wait_for_timeout(200)
    print(f"case test_shift #1 answered and its landscape drawn after {time.monotonic() - started:.1f} s")

    learned = method_row(page, "learned predictor")[1]
    landscape = landscape_source(page)
    pick(page, "learned = model", "teacher-supervised predictor · seed 1")
    wait_for_text(page, "learned predictor = teacher-supervised predictor · seed 1")
    deadline = time.monotonic() + 60
    while method_row(page, "learned predictor")[1] == learned or landscape_source(page) == landscape:
        if time.monotonic() > deadline:
            pytest.fail(f"the learned row stayed at {learned} or the landscape was not redrawn after the switch")
        page.wait_for_timeout(200)
    print(
        f"model switched: learned yaw {learned} -> {method_row(page, 'learned predictor')[1]} deg, landscape "
        f"redrawn, after {time.monotonic() - started:.1f} s"
    )
