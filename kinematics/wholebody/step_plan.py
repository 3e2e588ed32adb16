"""What the compiled cascade step reads of a layer: its tasks and constraints as the records of
``csrc/wholebody_step.c``, its settings and the tree's buffers (``kinematics.native.wholebody.StepPlan``).

A plan exists where every task and constraint is one the kernel computes: ``FrameTask``, ``ComTask``,
``PostureTask``, ``Contact``, ``ComInSupportPolygon`` with anchors (its polygon prepared once per solve),
``ConfigurationLimit`` and ``StepLimit``, each of exactly that class (a subclass may compute other rows). Any other
task or constraint, more than ``MAX_LEVELS`` levels or ``MAX_BOUND_BLOCKS`` limit constraints, or a tree off the CPU or of another dtype than float32 and
float64: no plan, and the layer runs its torch composition.

The kernel's targets come in ``kernel_inputs``' order: each of ``layer.target_names``' targets, then each prepared
constraint's tensors (a ``HullEdges``: its normals, offsets and edge flags).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping

import torch

from kinematics.log_thresholds import NEAR_PI_COS, SMALL_SIN_SQ
from kinematics.native.wholebody import StepPlan
from kinematics.qp.kernels import prox
from kinematics.qp.problem import DEFAULTS
from kinematics.wholebody.constraints.contact import Contact
from kinematics.wholebody.constraints.limits import ConfigurationLimit, StepLimit
from kinematics.wholebody.constraints.support_polygon import ComInSupportPolygon
from kinematics.wholebody.tasks.com import ComTask
from kinematics.wholebody.tasks.frame import FrameTask
from kinematics.wholebody.tasks.posture import PostureTask

MAX_LEVELS = 64  # the kernel's bound on the levels of one layer
MAX_BOUND_BLOCKS = 8  # and on its ConfigurationLimit and StepLimit constraints (WB_MAX_BOUND_BLOCKS)

# csrc/wholebody_step.c's block types, header and settings layout
FRAME_TASK, COM_TASK, POSTURE_TASK, CONTACT, SUPPORT_POLYGON, CONFIGURATION_LIMIT, STEP_LIMIT = range(7)
HEADER = 18
POLISH_STEPS = 2  # solve_qp's default, which the cascade keeps


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
    buffers = tree._buffers
    dtype = buffers["lower"].dtype
    if dtype not in (torch.float32, torch.float64) or not buffers["lower"].is_cpu or len(layer.levels) > MAX_LEVELS:
        return None
    tolerances = DEFAULTS[torch.float64]
    settings = [cfg.damping, tolerances["elastic"], tolerances["tolerance"], tolerances["infeasibility_tolerance"],
                prox(torch.float64), SMALL_SIN_SQ, NEAR_PI_COS, 0.0]  # fmt: skip
    frames: dict[str, int] = {}
    records: list[list[int]] = []
    target_index = {name: i for i, name in enumerate(layer.target_names)}
    specs = [(tuple(_owner(layer, name).target_shape), dtype) for name in layer.target_names]
    uses_com = False

    def frame(name: str) -> int:
        return frames.setdefault(name, len(frames))

    def record(kind, level, frame_index, target, rows, params, first=0, count=0) -> None:
        records.append([kind, level, frame_index, target, rows, len(settings), first, count])
        settings.extend(float(p) for p in params)

    level_rows = []
    for level, tasks in enumerate(layer.levels):
        rows = 0
        for task in tasks:
            kind = type(task)
            costs = task.cost().tolist()
            if kind is FrameTask:
                start = task._rows.start
                record(FRAME_TASK, level, frame(task.frame), target_index[task.name], 0, [task.gain, *costs], start,
                       len(costs))  # fmt: skip
            elif kind is ComTask:
                uses_com = True
                record(COM_TASK, level, -1, target_index[task.name], 0, [task.gain, *costs], 0, len(costs))
            elif kind is PostureTask:
                record(POSTURE_TASK, level, -1, target_index[task.name], 0, [task.gain, *costs], 0, len(costs))
            else:
                return None
            kept = sum(1 for c in costs if c > 0)
            records[-1][4] = kept
            rows += kept
        level_rows.append(rows)
    equalities = inequalities = 0
    prepared_at = len(specs)
    for constraint in layer.constraints:
        kind = type(constraint)
        if kind is Contact:
            record(CONTACT, -1, frame(constraint.frame), target_index[constraint.name], 6, [])
            equalities += 6
        elif kind is ComInSupportPolygon and constraint.anchors:
            uses_com = True
            k = constraint.size
            record(SUPPORT_POLYGON, -1, -1, prepared_at, k, [constraint.margin])
            specs += [((k, 2), dtype), ((k,), dtype), ((k,), torch.bool)]
            prepared_at += 3
            inequalities += k
        elif kind is ConfigurationLimit:
            record(CONFIGURATION_LIMIT, -1, -1, -1, 0, [constraint.gain])
        elif kind is StepLimit:
            limit = constraint._max
            if limit.numel() not in (1, tree.nv):
                return None  # the torch composition raises the error that says so
            record(STEP_LIMIT, -1, -1, -1, 0, limit.expand(tree.nv).tolist())
        else:
            return None
    if sum(1 for c in layer.constraints if type(c) in (ConfigurationLimit, StepLimit)) > MAX_BOUND_BLOCKS:
        return None
    if uses_com and tree.total_mass <= 0.0:
        return None  # the torch composition raises MissingInertialError
    held = [
        buffers["_node_origin34"], buffers["node_revolute"], buffers["node_multiplier"], buffers["node_offset"],
        buffers["_node_q_column"], buffers["_node_parent_slot"], buffers["slot_moment"].reshape(-1, 4),
        buffers["subtree_mass"], buffers["_total_mass"], buffers["node_dof"], tree.joint_lower, tree.joint_upper,
    ]  # fmt: skip
    frame_entries = []
    for name in frames:
        index = tree.frame_index(name)
        chain = buffers[f"_frame{index}_slots"]
        frame_entries += [tree._frame_slots[index], chain.numel()]
        held += [buffers["frame_offset"][index], chain, buffers[f"_frame{index}_dofs"],
                 buffers[f"_frame{index}_weights"], buffers[f"_frame{index}_revolute"]]  # fmt: skip
    held = tuple(t.contiguous() for t in held)
    header = [0] * HEADER
    residual_width = sum(task.size for task in layer.tasks.values())
    header[:17] = [
        buffers["_node_origin34"].shape[0], tree.nq, tree.nv, tree.base_nv, int(tree.floating_base), len(layer.levels),
        len(records), len(frames), equalities, inequalities, cfg.qp_iterations, cfg.qp_active_set_steps,
        cfg.qp_refinements, POLISH_STEPS, int(uses_com), residual_width, len(layer.constraints),
    ]  # fmt: skip
    plan = torch.tensor(header + frame_entries + level_rows + [v for r in records for v in r], dtype=torch.int64)
    arrays = (ctypes.c_void_p * len(held))(*(t.data_ptr() for t in held))
    specs = [(shape, dtype, _row_strides(shape), math.prod(shape)) for shape, dtype in specs]
    return StepPlan(
        plan=plan,
        settings=torch.tensor(settings, dtype=torch.float64),
        arrays=arrays,
        held=held,
        target_specs=tuple(specs),
        nq=tree.nq,
        nv=tree.nv,
        n_levels=len(layer.levels),
        n_inequalities=inequalities,
        residual_width=residual_width,
        n_constraints=len(layer.constraints),
        most_equalities=equalities + sum(level_rows),
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
