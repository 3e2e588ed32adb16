"""Where things sit in the Franka scene's page, in-process: the answers table keeps its layout while answers are
pending, the ghosts' labels never overlap the regions' labels at the initial camera, and the target gizmo can be
dragged over the whole target box."""

from __future__ import annotations

import re

import numpy as np
import pytest
from browser_support import project

import assets
from app.grasp_yaw.inference import MethodResult
from app.grasp_yaw.methods import BY_KEY, KEYS, METHODS, SEARCH_KEYS
from app.grasp_yaw.panel import gap_line, results_table
from app.grasp_yaw.scene import INITIAL_TARGET
from app.grasp_yaw.workspace import CAMERA, SCENE_LABEL_ANCHOR, SCENE_LABEL_SCALE, workspace_labels
from app.shell.answers_table import PENDING
from app.shell.ghost_labels import LABEL_ANCHOR, LABEL_SCALE, SWATCH_RADIUS_M, label_position, screen_right
from app.shell.stage import GIZMO_SCALE, translation_limits
from learning.grasp_yaw.config import preset

CANVAS = (1280, 800)  # px: the browser test's window
EM_PX = 12.0  # viser's screen label: 12 px per em at font_screen_scale 1 in an 800 px tall canvas
CHAR_EM = 0.55  # the average width of a character of its sans-serif font, in em (measured on a screenshot)
LINE_EM, PADDING_EM = 1.2, 0.2  # a line's height and the label background's padding


def _answer(yaw: float, success: bool, displacement: float, ms: float) -> MethodResult:
    return MethodResult(
        yaw, success, displacement, 0.0 if success else 0.0095, 0.0 if success else 1.7278, np.zeros(7), np.eye(4), ms
    )


def _visible_text(line: str) -> str:
    """A table line as a reader sees its characters: tags dropped, the swatch's fill ignored."""
    return re.sub(r"<[^>]+>", "", line).replace("□", "■")


def test_pending_answers_keep_the_tables_layout() -> None:
    rows = {key: _answer(0.3 + i, i % 3 != 0, 4.0 + i, 40.0 + i) for i, key in enumerate(KEYS)}
    answered = results_table(rows).splitlines()
    for pending in ({"learned"}, {"learned", "teacher_supervised"}, set(KEYS) - set(SEARCH_KEYS), set(KEYS)):
        marked = results_table(rows, pending).splitlines()
        assert len(marked) == len(answered), "pending changed the number of lines"
        for before, after in zip(answered, marked, strict=True):
            assert after.count("|") == before.count("|"), "pending changed a row's cells"
            assert _visible_text(after) == _visible_text(before), "pending changed the text a reader sees"
        assert "pending" not in "".join(marked), "pending is marked, not written into a cell"
        learned = next(line for line in marked if "learned predictor" in line)
        assert "□" in learned and "opacity" in learned, "the pending row is marked (hollow swatch, dimmed)"
    searching = dict(rows) | {key: PENDING for key in SEARCH_KEYS}  # a drag: the searches hidden until they land
    gap = gap_line(rows, set())
    moving = results_table(searching, set(KEYS), gap).split("\n\n")[1]
    assert _visible_text(moving) == _visible_text(gap) and "opacity" in moving, "the gap line keeps its text, dimmed"


def _label_box(position: np.ndarray, text: str, scale: float, anchor: str) -> np.ndarray:
    """``(left, top, right, bottom)`` px of a screen-sized viser label at the initial camera."""
    width, height = CANVAS
    em = EM_PX * scale * height / 800
    lines = text.split("\n")
    w = CHAR_EM * em * max(len(line) for line in lines) + PADDING_EM * em
    h = LINE_EM * em * len(lines) + PADDING_EM * em
    x, y = project(position, width, height)
    vertical, horizontal = anchor.split("-")
    left = {"left": x, "center": x - w / 2, "right": x - w}[horizontal]
    top = {"top": y, "center": y - h / 2, "bottom": y - h}[vertical]
    return np.array([left, top, left + w, top + h])


def _overlap(a: np.ndarray, b: np.ndarray, margin_px: float = 2.0) -> bool:
    return a[0] < b[2] + margin_px and b[0] < a[2] + margin_px and a[1] < b[3] + margin_px and b[1] < a[3] + margin_px


def test_ghost_labels_never_overlap_the_regions_labels_at_the_initial_camera() -> None:
    ws = preset("smoke").workspace
    rng = np.random.default_rng(0)
    targets = np.stack([rng.uniform(*ws.x, 2000), rng.uniform(*ws.y, 2000), rng.uniform(*ws.z, 2000)], -1)
    corners = np.array([[x, y, z] for x in ws.x for y in ws.y for z in ws.z])
    regions = [
        _label_box(np.array(position), text, SCENE_LABEL_SCALE, SCENE_LABEL_ANCHOR)
        for _, text, position in workspace_labels(ws)
    ]
    texts = [f"{m.label} (pending…)" for m in METHODS]  # every ghost drawn, each label at its longest
    right = screen_right(CAMERA)
    for target in [np.array(INITIAL_TARGET), *corners, *targets]:
        for row, text in enumerate(texts):
            ghost = _label_box(label_position(target, row, right), text, LABEL_SCALE, LABEL_ANCHOR)
            for region in regions:
                assert not _overlap(ghost, region), f"{text!r} above {target.round(3)} overlaps a region's label"


def test_ghost_labels_stand_left_of_the_gizmos_z_arrow_and_run_away_from_the_panel() -> None:
    """Every label of a full column ends left of the target's z arrow (as the initial camera sees it), so none
    covers the arrow, and its text runs left, away from the control panel on the page's right; its dot follows it."""
    ws = preset("smoke").workspace
    right = screen_right(CAMERA)
    rng = np.random.default_rng(1)
    targets = np.stack([rng.uniform(*ws.x, 300), rng.uniform(*ws.y, 300), rng.uniform(*ws.z, 300)], -1)
    texts = [f"{m.label} (pending…)" for m in METHODS]
    for target in [np.array(INITIAL_TARGET), *targets]:
        arrow = [project(target + [0.0, 0.0, h], *CANVAS) for h in np.linspace(0.0, GIZMO_SCALE, 5)]
        arrow_left = min(p[0] for p in arrow) - 4.0  # px: the arrow's width
        for row, text in enumerate(texts):
            left, top, label_right, bottom = _label_box(label_position(target, row, right), text, LABEL_SCALE,
                                                        LABEL_ANCHOR)  # fmt: skip
            assert label_right <= arrow_left, f"{text!r} beside {target.round(3)} covers the gizmo's z arrow"
    label_x = project(label_position(np.array(INITIAL_TARGET), 0, right), *CANVAS)[0]
    dot_x = project(label_position(np.array(INITIAL_TARGET), 0, right) + 1.5 * SWATCH_RADIUS_M * right, *CANVAS)[0]
    assert dot_x > label_x, "the dot follows the label's end"


def test_the_gizmo_can_be_dragged_over_the_whole_target_box() -> None:
    box = assets.PANDA_TOP_DOWN_REACH.target_box
    start = np.array(INITIAL_TARGET)
    limits = translation_limits(start, box)
    reachable = [(start[i] + lo, start[i] + hi) for i, (lo, hi) in enumerate(limits)]  # viser: offsets from start
    assert reachable == [pytest.approx(axis) for axis in box]
    assert start[2] + limits[2][0] == pytest.approx(0.0), "down to the table, below the start height"


def test_the_gizmo_s_arrows_reach_beyond_the_ghosts_frames_and_labels_carry_the_method_s_colour(start_viewer) -> None:
    """The first drag grabs the gizmo, not a ghost's gripper frame: the outer half of each arrow lies beyond every
    ghost's frame axes and jaw bar (all centred on the target once answered), and its lines are twice viser's
    default width. Each ghost label has a dot in its method's colour (viser draws label text black)."""
    viewer = start_viewer(train=False)
    gizmo = viewer.gizmo.handle
    for key in KEYS:
        ghost = viewer.ghosts[key]
        jaw_half_m = float(np.abs(ghost._jaw.points).max())
        reach_m = max(ghost._frame.axes_length + ghost._frame.origin_radius, jaw_half_m)
        assert gizmo.scale / 2 > reach_m, f"{key}'s gripper frame covers the gizmo's arrows"
        assert tuple(ghost.swatch.color) == BY_KEY[key].rgb
    assert gizmo.line_width >= 5.0
