"""``WholeBodyStepper``: one layer's step for a fixed batch of robots whose targets change in place from call to
call, what a control loop calls every tick (PlaCo's and mink's shape: a solver holding its tasks, their targets set,
then one step).

``layer.step(q, targets)`` checks every target, prepares the support polygon and binds the targets' addresses at
each call; at batch 1 that is most of its time (``docs/results/benchmark/wholebody-profile.md``). A stepper does
it once: it owns a copy of each target (``set_target`` writes into it), prepares again only when a target that a
constraint's preparation reads changes (a contact's anchor), and each ``step(q)`` checks ``q`` and makes the compiled
call. Its answers are ``layer.step``'s: where the compiled call does not apply (no compiled plan, another device,
a ``q`` it does not take, a graph recorded through ``q``, a transform active) it calls ``layer.step`` with its
targets and prepared polygon, which then differentiates to ``q`` as always. Its targets carry no gradient: for
gradients to the targets, call ``layer.step`` or ``layer.solve``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from kinematics import native
from kinematics.errors import ConfigError, ShapeError
from kinematics.wholebody import step_kernel, step_plan
from kinematics.wholebody.cascade import CascadeStep
from kinematics.wholebody.layer import WholeBodyIKLayer


class WholeBodyStepper:
    """``layer``'s step for ``rows`` robots, from ``targets`` (name -> ``(rows, *shape)``, every target the layer
    reads, as ``layer.step`` takes them), copied.

    Example::

        stepper = WholeBodyStepper(layer, targets)
        for tick in range(ticks):
            stepper.set_target("right_hand", T_world_hand_goal)   # (rows, 4, 4), or broadcast to it
            q, step = stepper.step(q)
    """

    def __init__(self, layer: WholeBodyIKLayer, targets: Mapping[str, torch.Tensor]) -> None:
        self.layer = layer
        tree = layer.tree
        rows = {t.shape[0] for t in targets.values() if isinstance(t, torch.Tensor) and t.ndim > 0}
        if len(rows) != 1:
            raise ShapeError(f"stepper: every target must be (rows, ...) with one row count, got {sorted(rows)} rows")
        self.rows = rows.pop()
        layer._check_step(torch.empty(self.rows, tree.nq, dtype=tree.joint_lower.dtype), targets)
        self._targets = {name: self._own(targets[name]) for name in layer.target_names}
        self._prepare_reads = {name for c in layer.constraints for name in c.prepare_reads}
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
        lower = layer.tree.joint_lower
        self._built_from = (layer.cfg, layer.tree, lower.data_ptr())  # what ``plan_of`` builds a plan from
        self._plan = step_kernel.plan_of(layer) if lower.is_cpu else None
        self._bound = None
        if self._plan is not None:
            inputs = step_plan.kernel_inputs(layer, self._targets, self._prepared)
            bound = native.BoundStep(self._plan, inputs, self.rows)
            self._bound = bound if bound.kernel is not None else None

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
        value = torch.as_tensor(value)
        if value.requires_grad:
            raise ConfigError(
                f"stepper: target {name!r} requires grad, and a stepper's targets carry none: call layer.step or "
                "layer.solve for gradients to the targets"
            )
        if value.shape != own.shape:  # broadcast_shapes costs more than the copy: only where the shapes differ
            try:
                shape = torch.broadcast_shapes(value.shape, own.shape)
            except RuntimeError:
                shape = None
            if shape != own.shape:
                raise ShapeError(f"stepper: target {name!r} is {tuple(own.shape)}; got {tuple(value.shape)}")
        own.copy_(value)
        if name in self._prepare_reads:
            self._prepare()

    def _known(self, name: str) -> str:
        if name not in self._targets:
            raise ConfigError(f"stepper: no target {name!r}; this layer's targets are {list(self._targets)}")
        return name

    def step(self, q: torch.Tensor) -> tuple[torch.Tensor, CascadeStep]:
        """One cascade step from ``q`` ``(rows, nq)`` towards the targets in force: ``(q_next, CascadeStep)``,
        ``layer.step``'s."""
        bound = self._bound
        if bound is not None and not (q.requires_grad and torch.is_grad_enabled()):
            layer, (cfg, tree, address) = self.layer, self._built_from
            if layer.cfg is not cfg or layer.tree is not tree or tree.joint_lower.data_ptr() != address:
                # the layer took new settings or moved (dtype, device): the plan and the targets' copies follow
                self._targets = {name: self._own(t) for name, t in self._targets.items()}
                self._prepare()
                return self.step(q)
            out = bound(q)
            if out is not None:
                return out[0], CascadeStep(*out[1:])
        return self.layer.step(q, self._targets, prepared=self._prepared)
