"""``WholeBodyStepper``: one layer's step for a fixed batch of robots whose targets change in place from call to
call, what a control loop calls every tick (PlaCo's and mink's shape: a solver holding its tasks, their targets set,
then one step).

``layer.step(q, targets)`` checks every target, prepares the support polygon and binds the targets' addresses at
each call; at batch 1 that is most of its time (``docs/results/benchmark/wholebody-profile.md``). A stepper does
it once: it owns a copy of each target (``set_target`` writes into it), prepares again only when a target that a
constraint's preparation reads changes (a contact's anchor), and each ``step(q)`` checks ``q`` and makes the compiled
call. Its answers are ``layer.step``'s: where the compiled call does not apply (no compiled plan, another device,
a ``q`` it does not take, a graph recorded through ``q``, a transform active) it calls ``layer.step`` with its
targets and prepared polygon, which then differentiates to ``q`` as always.

Its targets record no autograd graph (at batch 1, torch's autograd alone costs more than a stepper's step:
``docs/results/benchmark/wholebody-profile.md``). The last step's derivatives come
from ``vjp`` instead, as Pinocchio's and Crocoddyl's derivatives come from a call: the upstream gradient on
``q_next`` (and ``dq``) in, the gradients of the targets asked for (and of ``q``) out, what ``layer.step``'s autograd
gives for the same step. On the compiled path that is one more compiled call (the step's own backward,
``native.wholebody_step_backward``, reading what the step saved and the targets through the step's binding); a
contact's anchor's gradient also runs the polygon's preparation's backward; elsewhere the step is recorded again
through ``layer.step`` and differentiated by autograd.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch

from kinematics import native
from kinematics.errors import ConfigError, ShapeError
from kinematics.native import loader
from kinematics.wholebody import step_kernel, step_plan
from kinematics.wholebody.cascade import CascadeStep
from kinematics.wholebody.layer import WholeBodyIKLayer


class StepGradients(NamedTuple):
    """``WholeBodyStepper.vjp``'s answer: ``targets``, name -> the gradient ``(rows, *shape)`` of each target asked
    for; ``q``, the gradient ``(rows, nq)`` w.r.t. the step's ``q`` where asked for, else None."""

    targets: dict[str, torch.Tensor]
    q: torch.Tensor | None


class _Recorded(NamedTuple):
    """What the last step's ``vjp`` reads: the step's ``q``, the version counters of it (and of its ``dq`` and
    ``level_status``) then, the layer's settings and tree it stepped with (``built_from``) and, on the compiled path,
    the bound call (its plan and its binding of the targets) and what its backward reads (``forward``: ``dq``,
    ``level_status``, the saved output); without them the step went through ``layer.step``."""

    q: torch.Tensor
    versions: tuple[int, ...]
    built_from: tuple
    bound: native.BoundStep | None = None
    forward: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None


class _Ask(NamedTuple):
    """A ``vjp``'s request as the compiled backward takes it: the targets' ``names``, those a constraint's
    preparation reads (``through_preparation``), the kernel inputs whose gradient it writes (``slots``: index, the
    target's name or None for a prepared tensor, the row shape) and the array of their addresses it reads."""

    names: tuple[str, ...]
    through_preparation: tuple[str, ...]
    slots: tuple[tuple[int, str | None, torch.Size], ...]
    addresses: ctypes.Array


_NOTHING, _SET_SINCE = "none taken", "a target was set since the last step"
_INFERENCE = (
    "the last step ran under torch.inference_mode, whose tensors keep no version counter: step under torch.no_grad"
)


class WholeBodyStepper:
    """``layer``'s step for ``rows`` robots, from ``targets`` (name -> ``(rows, *shape)``, every target the layer
    reads, as ``layer.step`` takes them), copied.

    Example::

        stepper = WholeBodyStepper(layer, targets)
        for tick in range(ticks):
            stepper.set_target("right_hand", T_world_hand_goal)   # (rows, 4, 4), or broadcast to it
            q, step = stepper.step(q)
            hand_grad = stepper.vjp(dloss_dq_next, targets=("right_hand",)).targets["right_hand"]

    A stepper is one control loop's: its targets, its last step and the buffers its calls share are not for several
    threads at once.
    """

    def __init__(self, layer: WholeBodyIKLayer, targets: Mapping[str, torch.Tensor]) -> None:
        self.layer = layer
        tree = layer.tree
        rows = {t.shape[0] for t in targets.values() if isinstance(t, torch.Tensor) and t.ndim > 0}
        if len(rows) != 1:
            raise ShapeError(f"stepper: every target must be (rows, ...) with one row count, got {sorted(rows)} rows")
        self.rows = rows.pop()
        layer._check_step(tree.joint_lower.new_empty(self.rows, tree.nq), targets)
        self._targets = {name: self._own(targets[name]) for name in layer.target_names}
        self._prepare_reads = {name for c in layer.constraints for name in c.prepare_reads}
        self._recorded: _Recorded | str = _NOTHING  # the last step's record, or why there is none
        self._asks: dict[tuple[str, ...] | None, _Ask] = {}  # vjp's requests, by the names asked
        self._prepare()

    def _own(self, target: torch.Tensor) -> torch.Tensor:
        lower = self.layer.tree.joint_lower
        return target.detach().to(dtype=target.dtype if target.dtype == torch.bool else lower.dtype,
                                  device=lower.device).clone(memory_format=torch.contiguous_format)  # fmt: skip

    def _prepare(self) -> None:
        """The polygon prepared from the targets, and the compiled call bound to them (None where it does not
        apply)."""
        layer = self.layer
        self._prepared = layer.prepare(self._targets)
        lower = layer.tree.configuration_lower
        self._built_from = (layer.cfg, layer.tree, lower)  # what ``plan_of`` builds a plan from
        self._plan = step_kernel.plan_of(layer) if lower.is_cpu else None
        self._bound = None
        if self._plan is not None:
            self._inputs = step_plan.kernel_inputs(layer, self._targets, self._prepared)
            self._asks = {}
            bound = native.BoundStep(self._plan, self._inputs, self.rows)
            self._bound = bound if bound.kernel is not None else None
            # what each step's backward reads, written by the step (a step's record holds the buffer it wrote)
            self._saved = loader.empty(self.rows, native.saved_size(self._plan), dtype=torch.float64)

    @property
    def target_names(self) -> tuple[str, ...]:
        return self.layer.target_names

    def target(self, name: str) -> torch.Tensor:
        """A copy of the target ``name`` in force ``(rows, *shape)``."""
        return self._targets[self._known(name)].clone()

    def set_target(self, name: str, value: torch.Tensor) -> None:
        """Write ``value`` (``(rows, *shape)``, or what broadcasts to it) into the target ``name``; a contact's
        anchor that the support polygon reads prepares the polygon again."""
        own = self._targets[self._known(name)]
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value, dtype=own.dtype, device=own.device)  # a list: at the target's precision
        if value.requires_grad:
            raise ConfigError(
                f"stepper: target {name!r} requires grad, and a stepper's targets record no graph: after step, "
                "vjp gives the targets' gradients (or call layer.step or layer.solve under autograd)"
            )
        if value.shape != own.shape:  # broadcast_shapes costs more than the copy: only where the shapes differ
            try:
                shape = torch.broadcast_shapes(value.shape, own.shape)
            except RuntimeError:
                shape = None
            if shape != own.shape:
                raise ShapeError(f"stepper: target {name!r} is {tuple(own.shape)}; got {tuple(value.shape)}")
        own.copy_(value)
        self._recorded = _SET_SINCE  # the last step's backward read the targets it stepped towards
        if name in self._prepare_reads:
            self._prepare()

    def _changed_since(self, built_from: tuple) -> bool:
        """Whether the layer took new settings or moved (dtype, device) since ``built_from`` (``_prepare``'s)."""
        cfg, tree, lower = built_from
        layer = self.layer
        return layer.cfg is not cfg or layer.tree is not tree or tree.configuration_lower is not lower

    def _known(self, name: str) -> str:
        if name not in self._targets:
            raise ConfigError(f"stepper: no target {name!r}; this layer's targets are {list(self._targets)}")
        return name

    def step(self, q: torch.Tensor) -> tuple[torch.Tensor, CascadeStep]:
        """One cascade step from ``q`` ``(rows, nq)`` towards the targets in force: ``(q_next, CascadeStep)``,
        ``layer.step``'s. ``vjp`` then differentiates it."""
        self._recorded = _NOTHING  # until this step is taken
        layer, built_from = self.layer, self._built_from
        if self._changed_since(built_from):  # the plan and the targets' copies follow the layer
            self._targets = {name: self._own(t) for name, t in self._targets.items()}
            self._prepare()
            return self.step(q)
        # inference mode's tensors keep no version counter, so nothing could tell vjp they changed since
        recording = not (torch.is_inference_mode_enabled() or (isinstance(q, torch.Tensor) and q.is_inference()))
        bound = self._bound
        if bound is not None and not (q.requires_grad and torch.is_grad_enabled()):
            saved = self._saved
            out = bound(q, saved=saved)
            if out is not None:
                q_next, dq, status, active_inequalities, active_bounds = out
                self._recorded = _Recorded(q, (q._version, dq._version, status._version), built_from, bound,
                                           (dq, status, saved)) if recording else _INFERENCE  # fmt: skip
                return q_next, CascadeStep(dq, status, active_inequalities, active_bounds)
        q_next, step = layer.step(q, self._targets, prepared=self._prepared)
        self._recorded = _Recorded(q, (q._version,), built_from) if recording else _INFERENCE
        return q_next, step

    def vjp(
        self,
        grad_q_next: torch.Tensor,
        grad_dq: torch.Tensor | None = None,
        *,
        targets: Sequence[str] | None = None,
        q: bool = False,
    ) -> StepGradients:
        """The last ``step``'s vector-Jacobian product: for the upstream gradients on its ``q_next`` ``(rows, nq)``
        and, where given, its ``dq`` ``(rows, nv)``, the gradient of each target in ``targets`` (names; every
        target when omitted) and, with ``q``, of the step's ``q``: what ``layer.step``'s autograd gives for that
        step, also after new settings on the layer where the compiled backward is there (it reads the plan the step
        was taken with). A ``ConfigError`` where there is no step to differentiate: none taken, a target set since,
        a step under ``torch.inference_mode``, its ``q`` or outputs changed in place, or, where the step must be
        taken again through ``layer.step``, the layer given new settings since."""
        recorded = self._recorded
        if type(recorded) is not _Recorded:
            raise ConfigError(f"stepper.vjp: no step to differentiate ({recorded})")
        step_q, forward = recorded.q, recorded.forward
        versions = (step_q._version,) if forward is None else (step_q._version, forward[0]._version,
                                                                 forward[1]._version)  # fmt: skip
        if versions != recorded.versions:
            raise ConfigError("stepper.vjp: the last step's q, dq or level_status was changed in place since the step")
        if targets is not None and type(targets) is not tuple:
            if isinstance(targets, str):
                raise ConfigError(f"stepper.vjp: targets is a sequence of names; got the string {targets!r}")
            targets = tuple(targets)  # once: a generator is read here and only here
        ask = self._asks.get(targets) if targets is None or all(type(n) is str for n in targets) else None
        if ask is None:
            ask = self._ask(targets)
        tree = self.layer.tree
        grad_q_next = self._upstream("grad_q_next", grad_q_next, tree.nq, step_q)
        if grad_dq is not None:
            grad_dq = self._upstream("grad_dq", grad_dq, tree.nv, step_q)
        # the compiled backward reads the plan the step was taken with; the reference takes the step again
        found = None if forward is None else self._compiled_vjp(recorded, grad_q_next, grad_dq, ask, q)
        if found is None:  # stepped through layer.step, or the library went away since the step
            if self._changed_since(recorded.built_from):
                raise ConfigError("stepper.vjp: the layer took new settings or moved since the last step")
            found = self._reference_vjp(step_q.detach(), grad_q_next, grad_dq, ask.names, q)
        return StepGradients(*found)

    def _ask(self, targets: tuple[str, ...] | None) -> _Ask:
        """What a ``vjp`` asking for ``targets`` (names, or None: every target) hands the compiled backward,
        kept for the next ``vjp`` that asks the same."""
        layer = self.layer
        names = self.target_names if targets is None else tuple(self._known(name) for name in targets)
        through_preparation = tuple(name for name in names if name in self._prepare_reads)
        slots = [(slot, name, self._targets[name].shape[1:]) for slot, name in enumerate(layer.target_names)
                 if name in names]  # fmt: skip
        slot = len(layer.target_names)
        for constraint in layer.constraints:  # its prepared tensors, where a target its preparation reads is asked
            if constraint.prepared_size:
                if set(constraint.prepare_reads) & set(through_preparation):
                    prepared = self._prepared[constraint.name]
                    slots += [(slot + i, None, tensor.shape[1:]) for i, tensor in enumerate(prepared)]
                slot += constraint.prepared_size
        ask = _Ask(names, through_preparation, tuple(slots), (ctypes.c_void_p * max(1, slot))())
        self._asks[targets] = ask
        return ask

    def _upstream(self, what: str, grad: torch.Tensor, width: int, step_q: torch.Tensor) -> torch.Tensor:
        """``grad`` checked: ``(rows, width)`` on the step's device; detached, contiguous, of the step's dtype."""
        if not isinstance(grad, torch.Tensor) or grad.shape != (self.rows, width):
            found = tuple(grad.shape) if isinstance(grad, torch.Tensor) else type(grad).__name__
            raise ShapeError(f"stepper.vjp: {what} must be ({self.rows}, {width}), got {found}")
        if grad.device != step_q.device:
            raise ConfigError(f"stepper.vjp: {what} is on {grad.device}; the step was on {step_q.device}")
        if grad.dtype is not step_q.dtype or not grad.is_contiguous():
            grad = grad.to(step_q.dtype).contiguous()
        return grad.detach() if grad.requires_grad else grad

    def _compiled_vjp(self, recorded: _Recorded, grad_q_next, grad_dq, ask: _Ask, want_q: bool):
        """The compiled backward of the recorded step, or None where the library went away since: the tasks'
        targets and the contacts' anchors directly, the prepared polygon's gradients carried to the anchors through
        the preparation's backward."""
        step_q = recorded.q.detach().contiguous()  # a q that requires grad, stepped without a graph, too
        rows, dtype, addresses = self.rows, step_q.dtype, ask.addresses
        grads = []
        for slot, _, shape in ask.slots:
            grad = loader.empty(rows, *shape, dtype=dtype)
            addresses[slot] = grad.data_ptr()
            grads.append(grad)
        grad_q = loader.empty(rows, self.layer.tree.nq, dtype=dtype) if want_q else None
        done = recorded.bound.backward(step_q, recorded.forward, grad_q_next, grad_dq, addresses, grad_q)
        for slot, _, _ in ask.slots:
            addresses[slot] = None
        if not done:
            return None
        gradients = {name: grad for (_, name, _), grad in zip(ask.slots, grads, strict=True) if name is not None}
        if ask.through_preparation:
            self._carry_through_preparation(gradients, ask, grads)
        return gradients, grad_q

    def _carry_through_preparation(self, gradients: dict, ask: _Ask, grads: list[torch.Tensor]) -> None:
        """Add to the anchors' gradients in ``gradients`` what the prepared tensors' (``grads`` at ``ask``'s slots
        without a name) carry back through ``layer.prepare``'s backward."""
        layer = self.layer
        with torch.inference_mode(False), torch.enable_grad():  # leaves cloned: a target may be an inference tensor
            leaves = {name: self._targets[name].clone().requires_grad_(True) for name in ask.through_preparation}
            targets = {**self._targets, **leaves}
            prepared = step_plan.kernel_inputs(layer, targets, layer.prepare(targets))
            pairs = [(prepared[slot], grad) for (slot, name, _), grad in zip(ask.slots, grads, strict=True)
                     if name is None and prepared[slot].requires_grad]  # fmt: skip
            carried = torch.autograd.grad([t for t, _ in pairs], list(leaves.values()), [g for _, g in pairs],
                                          allow_unused=True)  # fmt: skip
        for name, extra in zip(leaves, carried, strict=True):
            if extra is not None:
                gradients[name] = gradients[name] + extra

    def _reference_vjp(self, step_q: torch.Tensor, grad_q_next, grad_dq, names: tuple[str, ...], want_q: bool):
        """The recorded step taken again through ``layer.step`` with a graph to the targets asked for (and ``q``),
        differentiated by autograd."""
        layer = self.layer
        with torch.inference_mode(False), torch.enable_grad():  # leaves cloned: a target may be an inference tensor
            leaves = {name: self._targets[name].clone().requires_grad_(True) for name in names}
            q_leaf = step_q.requires_grad_(True) if want_q else step_q
            targets = {**self._targets, **leaves}
            prepared = layer.prepare(targets) if set(names) & self._prepare_reads else self._prepared
            q_next, step = layer.step(q_leaf, targets, prepared=prepared)
            outputs, grads = [q_next], [grad_q_next]
            if grad_dq is not None:
                outputs.append(step.dq)
                grads.append(grad_dq)
            asked = [*leaves.values(), *([q_leaf] if want_q else [])]
            found = torch.autograd.grad(outputs, asked, grads, allow_unused=True) if asked else ()
        found = [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(found, asked, strict=True)]
        gradients = dict(zip(leaves, found, strict=False))
        return gradients, found[-1] if want_q else None
