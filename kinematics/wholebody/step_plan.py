"""What the compiled cascade step reads of a layer: its tasks and constraints as the records of
``csrc/wholebody_step.c``, its settings and the tree's buffers (``kinematics.native.wholebody.StepPlan``).

``build`` asks each task and constraint for its compiled form through its ``compiled_form(plan)`` method, which adds
its record through one of ``PlanBuilder``'s block methods and returns True, or returns False where the kernel does
not compute it: every shipped task (``FrameTask``, ``RelativeFrameTask``, ``ComTask``, ``PostureTask``) and
constraint (``Contact``, ``ComInSupportPolygon`` with anchors, its polygon prepared once per solve,
``ConfigurationLimit``, ``StepLimit``) has one, each for exactly its class (a subclass may compute other rows); the
base classes' answer is False. A layer with a task or constraint that has no compiled form runs its torch
composition, and says so once per class (``NoCompiledFormWarning``). With
more than ``MAX_LEVELS`` levels or ``MAX_BOUND_BLOCKS`` limit constraints, a tree off the CPU or of another dtype
than float32 and float64, or a block that declines (an input the torch composition refuses with its own error), there
is no plan either, silently: the torch composition runs (and raises where it must).

The kernel's targets come in ``kernel_inputs``' order: each of ``layer.target_names``' targets, then each prepared
constraint's tensors (a ``HullEdges``: its normals, offsets and edge flags).
"""

from __future__ import annotations

import ctypes
import math
import warnings
from collections.abc import Mapping, Sequence

import torch

from kinematics.log_thresholds import NEAR_PI_COS, SMALL_SIN_SQ
from kinematics.native import loader
from kinematics.native.wholebody import StepPlan
from kinematics.qp.kernels import prox
from kinematics.qp.problem import DEFAULTS

MAX_LEVELS = 64  # the kernel's bound on the levels of one layer
MAX_BOUND_BLOCKS = 8  # and on its ConfigurationLimit and StepLimit constraints (WB_MAX_BOUND_BLOCKS)

# csrc/wholebody_step.c's block types, header and settings layout
FRAME_TASK, COM_TASK, POSTURE_TASK, CONTACT, SUPPORT_POLYGON, CONFIGURATION_LIMIT, STEP_LIMIT, RELATIVE_FRAME_TASK = (
    range(8)
)
HEADER = 18
POLISH_STEPS = 2  # solve_qp's default, which the cascade keeps


class NoCompiledFormWarning(UserWarning):
    """A task or constraint without a compiled form: its layer's steps run the torch composition."""


_WARNED: set[type] = set()


class PlanBuilder:
    """The plan under construction: the blocks' records and parameters, the frames they read, the targets' specs.
    A task's or constraint's ``compiled_form`` calls one block method; ``decline`` ends the plan without a warning."""

    def __init__(self, layer, dtype: torch.dtype, settings: list[float]) -> None:
        self.nv, self.dtype = layer.tree.nv, dtype
        self.settings = settings
        self.records: list[list[int]] = []
        self.frames: dict[str, int] = {}
        self.target_index = {name: i for i, name in enumerate(layer.target_names)}
        self.specs = [(tuple(_owner(layer, name).target_shape), dtype) for name in layer.target_names]
        self.uses_com = False
        self.equalities = self.inequalities = self.bound_blocks = 0
        self.level = -1  # the level whose tasks are being added (-1: the constraints)
        self.declined = False

    def _frame(self, name: str) -> int:
        return self.frames.setdefault(name, len(self.frames))

    def _record(
        self, kind: int, frame: int, target: int, rows: int, params: Sequence[float], first=0, count=0, root=-1
    ):
        self.records.append([kind, self.level, frame, target, rows, len(self.settings), first, count, root])
        self.settings.extend(float(p) for p in params)

    def _task(self, kind: int, frame: int, name: str, gain: float, costs: Sequence[float], first: int, root=-1):
        kept = sum(1 for c in costs if c > 0)
        self._record(kind, frame, self.target_index[name], kept, [gain, *costs], first, len(costs), root)

    # ---- the blocks the kernel computes
    def frame_task(self, name: str, frame: str, gain: float, costs: Sequence[float], first_row: int) -> None:
        """A frame's pose error rows ``first_row .. first_row + len(costs)`` of (position, rotation)."""
        self._task(FRAME_TASK, self._frame(frame), name, gain, costs, first_row)

    def relative_frame_task(self, name: str, frame: str, root: str, gain: float, costs: Sequence[float]) -> None:
        """``frame``'s pose error in ``root``'s axes, six rows of (position, rotation)."""
        self._task(RELATIVE_FRAME_TASK, self._frame(frame), name, gain, costs, 0, self._frame(root))

    def com_task(self, name: str, gain: float, costs: Sequence[float]) -> None:
        self.uses_com = True
        self._task(COM_TASK, -1, name, gain, costs, 0)

    def posture_task(self, name: str, gain: float, costs: Sequence[float]) -> None:
        self._task(POSTURE_TASK, -1, name, gain, costs, 0)

    def contact(self, name: str, frame: str) -> None:
        """A frame held at its target pose: 6 equality rows."""
        self._record(CONTACT, self._frame(frame), self.target_index[name], 6, [])
        self.equalities += 6

    def support_polygon(self, edges: int, margin: float) -> None:
        """The centre of mass ``margin`` inside a polygon of ``edges`` edges prepared once per solve."""
        self.uses_com = True
        self._record(SUPPORT_POLYGON, -1, len(self.specs), edges, [margin])
        self.specs += [((edges, 2), self.dtype), ((edges,), self.dtype), ((edges,), torch.bool)]
        self.inequalities += edges

    def configuration_limit(self, gain: float) -> None:
        self._record(CONFIGURATION_LIMIT, -1, -1, 0, [gain])
        self.bound_blocks += 1

    def step_limit(self, max_step: Sequence[float]) -> None:
        """``|dq_i| <= max_step[i]`` (``nv`` values)."""
        self._record(STEP_LIMIT, -1, -1, 0, list(max_step))
        self.bound_blocks += 1

    def decline(self) -> None:
        """No plan, no warning: an input the torch composition refuses (with the error that says so)."""
        self.declined = True


def _without_compiled_form(part) -> None:
    if type(part) not in _WARNED:
        _WARNED.add(type(part))
        warnings.warn(
            f"{type(part).__name__} {part.name!r} has no compiled form: the whole-body layer that holds it runs "
            "its steps as torch operations, several times slower (a task or constraint gives its compiled form "
            "through compiled_form(plan), see kinematics.wholebody.step_plan)",
            NoCompiledFormWarning,
            stacklevel=4,
        )


def kernel_inputs(layer, targets: Mapping[str, torch.Tensor], prepared: Mapping[str, object]) -> list[torch.Tensor]:
    """The kernel's targets: ``targets`` by ``layer.target_names``, then each prepared constraint's tensors."""
    inputs = [targets[name] for name in layer.target_names]
    for constraint in layer.constraints:
        if constraint.prepared_size:
            inputs.extend(prepared[constraint.name])
    return inputs


def split_inputs(layer, inputs: list[torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, tuple]]:
    """``kernel_inputs``' inverse: the targets by name and the prepared tuples by constraint name."""
    names = layer.target_names
    targets, prepared, at = dict(zip(names, inputs[: len(names)], strict=True)), {}, len(names)
    for constraint in layer.constraints:
        if constraint.prepared_size:
            prepared[constraint.name] = tuple(inputs[at : at + constraint.prepared_size])
            at += constraint.prepared_size
    return targets, prepared


def build(layer) -> StepPlan | None:
    """The plan of ``layer`` as it is now, or ``None`` where the kernel does not compute it (module docstring)."""
    tree, cfg = layer.tree, layer.cfg
    dtype = tree.joint_lower.dtype
    if dtype not in (torch.float32, torch.float64) or not tree.joint_lower.is_cpu or len(layer.levels) > MAX_LEVELS:
        return None
    tolerances = DEFAULTS[torch.float64]
    settings = [cfg.damping, tolerances["elastic"], tolerances["tolerance"], tolerances["infeasibility_tolerance"],
                prox(torch.float64), SMALL_SIN_SQ, NEAR_PI_COS, 0.0]  # fmt: skip
    plan = PlanBuilder(layer, dtype, settings)
    level_rows = []
    for level, tasks in enumerate(layer.levels):
        plan.level, first = level, len(plan.records)
        for task in tasks:
            if not task.compiled_form(plan):
                _without_compiled_form(task)
                return None
        level_rows.append(sum(record[4] for record in plan.records[first:]))
    plan.level = -1
    for constraint in layer.constraints:
        if not constraint.compiled_form(plan):
            _without_compiled_form(constraint)
            return None
    if plan.declined or plan.bound_blocks > MAX_BOUND_BLOCKS:
        return None
    if plan.uses_com and tree.total_mass <= 0.0:
        return None  # the torch composition raises MissingInertialError
    held, frame_entries = tree.compiled_arrays(list(plan.frames))
    header = [0] * HEADER
    residual_width = sum(task.size for task in layer.tasks.values())
    header[:17] = [
        held[0].shape[0], tree.nq, tree.nv, tree.base_nv, int(tree.floating_base), len(layer.levels),
        len(plan.records), len(plan.frames), plan.equalities, plan.inequalities, cfg.qp_iterations,
        cfg.qp_active_set_steps, cfg.qp_refinements, POLISH_STEPS, int(plan.uses_com), residual_width,
        len(layer.constraints),
    ]  # fmt: skip
    records = [v for r in plan.records for v in r]
    arrays = (ctypes.c_void_p * len(held))(*(t.data_ptr() for t in held))
    specs = [(shape, dtype, _row_strides(shape), math.prod(shape)) for shape, dtype in plan.specs]
    return StepPlan(
        plan=torch.tensor(header + frame_entries + level_rows + records, dtype=torch.int64, device=loader.CPU),
        settings=torch.tensor(plan.settings, dtype=torch.float64, device=loader.CPU),
        arrays=arrays,
        held=held,
        target_specs=tuple(specs),
        target_sizes=torch.tensor([spec[3] for spec in specs] or [0], dtype=torch.int64, device=loader.CPU),
        nq=tree.nq,
        nv=tree.nv,
        n_levels=len(layer.levels),
        n_inequalities=plan.inequalities,
        residual_width=residual_width,
        n_constraints=len(layer.constraints),
        most_equalities=plan.equalities + sum(level_rows),
    )


def _row_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape``."""
    strides, size = [], 1
    for extent in reversed(shape):
        strides.append(size)
        size *= extent
    return tuple(reversed(strides))


def _owner(layer, name: str):
    return layer.tasks.get(name) or next(c for c in layer.constraints if c.name == name)
