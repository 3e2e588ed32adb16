"""The whole-body layer's cascade steps as one ``Kernel`` (``CASCADE_STEPS``): ``steps`` steps ``q <- integrate(q,
dq)`` of a layer from ``q`` ``(B, nq)``, returning the last configuration and the last step's ``dq``, level statuses,
active inequalities and active bounds and, when asked, the evaluation there (every task's residual, every
constraint's violation).

Its reference is the torch composition (``kinematics.wholebody.cascade.cascade_step`` and ``tree.integrate``, step
after step), which runs on every device and dtype and under autograd to a contact's anchor or the prepared polygon;
on the CPU, where the layer has a plan (``step_plan.build``), one compiled call computes all the steps
(``kinematics.native.wholebody``). The kernel's schema names the layer by a key (``key``): a layer is not a tensor.

``compiled_step_with_gradient`` is one step recording a graph to the tasks' targets, the contacts' anchors, the
prepared polygon and ``q``, compiled both ways: the step, and its backward (``native.wholebody_step_backward``: each
level's adjoint solve on its final active set, the hand-over between levels and the tasks' errors, in reverse),
which gives the torch composition's gradient; a contact's anchor's and the polygon's come from the QP's matrices'
gradients (the contact's equality, the polygon's inequalities). For ``q``, that backward also takes
each level's QP's matrices' gradients to the rows and the kinematics the step read (the frames' poses and Jacobians,
the centre of mass and its Jacobian) and from those to ``q`` (the kinematics' second order: each joint turns its
subtree about its axis), with the integration's derivative w.r.t. ``q``.
"""

from __future__ import annotations

import weakref

import torch

from kinematics import native
from kinematics.batch_last import first_order, transforms_active
from kinematics.native.kernel import Kernel
from kinematics.wholebody import step_plan

_LAYERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # key -> layer, while the layer lives
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # layer -> (its cfg, tree, limits buffer, plan)


def key(layer) -> int:
    """The key that names ``layer`` in ``CASCADE_STEPS``' calls (registered here for as long as it lives)."""
    _LAYERS[id(layer)] = layer
    return id(layer)


def plan_of(layer) -> native.StepPlan | None:
    """The layer's plan, built again when its settings or its tree's buffers changed (``layer.to(...)``, a new
    ``cfg`` from a checkpoint)."""
    cfg, tree = layer.cfg, layer.tree
    lower = tree.configuration_lower  # replaced by .to(...): its identity says the tree's buffers stayed
    cached = _PLANS.get(layer)
    if cached is None or cached[0] is not cfg or cached[1] is not tree or cached[2] is not lower:
        cached = (cfg, tree, lower, step_plan.build(layer))
        _PLANS[layer] = cached
    return cached[3]


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


def compiled_step_with_gradient(layer, q: torch.Tensor, inputs: list[torch.Tensor]):
    """``CASCADE_STEPS``' outputs for one step (no evaluation) where autograd records a graph to ``q`` or some of the
    inputs (the tasks' targets, the contacts' anchors, the prepared polygon's normals and offsets), on the compiled
    path both ways; or ``None`` where that does not apply (no graph, no plan, a transform active, the kernel not
    there)."""
    if not torch.is_grad_enabled() or transforms_active():
        return None
    if not (q.requires_grad or any(t.requires_grad for t in inputs)):
        return None
    plan = plan_of(layer)
    if plan is None:
        return None
    with torch.no_grad():
        binding = native.bind_targets(plan, q, inputs, recording=False)
        computed = binding and native.wholebody_step(plan, q.detach(), inputs, 1, False, save=True, binding=binding)
    if computed is None:
        return None
    every = (q, *inputs)
    slots = [i for i, t in enumerate(every) if t.requires_grad]  # what the graph records
    q_next, dq = _CompiledStep.apply((layer, plan, binding, q, inputs, slots), computed, *(every[i] for i in slots))
    return q_next, dq, *computed[2:5]


class _CompiledStep(torch.autograd.Function):
    """``apply((layer, plan, binding, q, inputs, slots), computed, *leaves) -> (q_next, dq)``: the compiled step's
    outputs ``computed`` (with what its backward reads), differentiable w.r.t. ``leaves``, the tensors among ``(q,
    *inputs)`` at ``slots`` (those that record a graph: ``q`` and the tasks' targets; only these are the Function's
    inputs, which keeps autograd's bookkeeping to them); the backward reads the targets through the step's
    ``binding`` (``native.bind_targets``)."""

    @staticmethod
    def forward(ctx, step, computed, *leaves):
        layer, plan, binding, q, inputs, slots = step
        ctx.step = (layer, plan, binding, slots)
        ctx.set_materialize_grads(False)  # no gradient on dq (or q_next): None, which the C backward reads as zero
        ctx.save_for_backward(q, computed[1], computed[2], computed[-1], *inputs)  # dq, the statuses, the saved
        return computed[0], computed[1]

    @staticmethod
    @first_order
    def backward(ctx, grad_q_next, grad_dq):
        q, dq, status, saved, *inputs = ctx.saved_tensors
        layer, plan, binding, slots = ctx.step
        asked = [False] * (1 + len(inputs))  # per (q, *inputs): whether this backward wants its gradient
        for slot, need in zip(slots, ctx.needs_input_grad[2:], strict=True):
            asked[slot] = need
        want_q, wanted = asked[0], asked[1:]
        if grad_q_next is None:
            grad_q_next = torch.zeros_like(q)
        found = native.wholebody_step_backward(
            plan, q, inputs, (dq, status, saved), grad_q_next, grad_dq, wanted, configuration=want_q, binding=binding
        )
        if found is None:  # the library went away since the forward (native.disabled()): the reference's gradient
            with torch.enable_grad():
                q_leaf = q.detach().requires_grad_(want_q)
                leaves = [t.detach().requires_grad_(want) for t, want in zip(inputs, wanted, strict=True)]
                out = layer.reference_steps(q_leaf, leaves, 1)
                outputs, grads = (out[0], out[1]), (grad_q_next, grad_dq)
                if grad_dq is None:
                    outputs, grads = outputs[:1], grads[:1]
                given = iter(torch.autograd.grad(outputs, [t for t in (q_leaf, *leaves) if t.requires_grad], grads,
                                                 allow_unused=True))  # fmt: skip
                grad_q = next(given) if want_q else None  # q_leaf's comes first
                found = [next(given) if want else None for want in wanted], grad_q
        grads, grad_q = found
        everything = (grad_q, *grads)
        return None, None, *(everything[slot] for slot in slots)
