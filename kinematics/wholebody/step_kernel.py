"""The whole-body layer's cascade steps as one ``Kernel`` (``CASCADE_STEPS``): ``steps`` steps ``q <- integrate(q,
dq)`` of a layer from ``q`` ``(B, nq)``, returning the last configuration and the last step's ``dq``, level statuses,
active inequalities and active bounds and, when asked, the evaluation there (every task's residual, every
constraint's violation).

Its reference is the torch composition (``kinematics.wholebody.cascade.cascade_step`` and ``tree.integrate``, step
after step), which every device, dtype, autograd (the unrolled and the implicit gradients) and ``torch.func`` use;
on the CPU, where the layer has a plan (``step_plan.build``), one compiled call computes all the steps
(``kinematics.native.wholebody``). The kernel's schema names the layer by a key (``key``): a layer is not a tensor.
"""

from __future__ import annotations

import weakref

import torch

from kinematics import native
from kinematics.native.kernel import Kernel
from kinematics.wholebody import step_plan

_LAYERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # key -> layer, while the layer lives
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # layer -> (what the plan was built from, plan)


def key(layer) -> int:
    """The key that names ``layer`` in ``CASCADE_STEPS``' calls (registered here for as long as it lives)."""
    _LAYERS[id(layer)] = layer
    return id(layer)


def plan_of(layer) -> native.StepPlan | None:
    """The layer's plan, built again when its settings or its tree's buffers changed (``layer.to(...)``, a new
    ``cfg`` from a checkpoint)."""
    lower = layer.tree.joint_lower
    built_from = (layer.cfg, id(layer.tree), lower.dtype, lower.device, lower.data_ptr())
    cached = _PLANS.get(layer)
    if cached is None or cached[0] != built_from:
        cached = (built_from, step_plan.build(layer))
        _PLANS[layer] = cached
    return cached[1]


def _reference(layer_key: int, q: torch.Tensor, inputs: list[torch.Tensor], steps: int, evaluate: bool):
    return _LAYERS[layer_key].reference_steps(q, inputs, steps, evaluate)


def _cpu(layer_key: int, q: torch.Tensor, inputs: list[torch.Tensor], steps: int, evaluate: bool):
    plan = plan_of(_LAYERS[layer_key])
    return None if plan is None else native.wholebody_step(plan, q, inputs, steps, evaluate)


# (q_next (B, nq), dq (B, nv), level_status (B, n_levels) int8, active_inequalities (B, m_in) bool, active_bounds
# (B, nv) int8) after ``steps`` steps of the layer ``layer`` (``key``) from q, for its inputs (``step_plan.kernel_inputs``);
# with ``evaluate`` the residuals (B, sum of the task sizes) and violations (B, n_constraints) at q_next, else (B, 0)
CASCADE_STEPS = Kernel(
    "cascade_steps",
    "(int layer, Tensor q, Tensor[] inputs, int steps, bool evaluate) -> "
    "(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    _reference,
)
CASCADE_STEPS.implement("cpu", _cpu)
