"""``WholeBodyIKLayer``: tasks by priority level and constraints on a ``KinematicTree``, solved by a fixed number of
strict-cascade steps (``kinematics.wholebody.cascade``), differentiable unrolled or implicitly.

``solve(targets, seed)`` runs ``cfg.iterations`` steps ``q <- integrate(q, dq)`` from ``seed`` ``(..., nq)``;
``targets`` maps each task's name (and each contact's) to its target. No early stop, no host synchronisation in
the loop.

Gradients (``cfg.gradient``):

* ``"unrolled"``: autograd through every step (memory grows with the iterations).
* ``"implicit"``: the steps run without a graph; at the fixed point ``q* = integrate(q*, dq(q*, theta))`` the
  backward solves the adjoint equation ``u = g + M^T u`` in tangent coordinates, ``M`` the derivative of one step
  at ``q*`` (``cfg.implicit_iterations`` fixed-point iterations; ``M^T u`` through a single step's graph, or with
  ``M`` formed once for small batches, see ``JACOBIAN_MAX_BATCH``), then applies the step's derivative w.r.t. the
  targets. Memory is one step's graph whatever the iteration count (where ``M`` is formed, of ``nv`` copies of each
  row up to ``JACOBIAN_GRAPH_ROWS`` rows: several times the batch's graph, see ``JACOBIAN_MAX_BATCH``); the seed
  gets no gradient (the fixed point does not depend on it to first order). Exact in the limit on converged rows.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

from kinematics.batch_last import transforms_active
from kinematics.errors import (
    CheckpointMismatchError,
    ConfigError,
    DtypeDeviceMismatchError,
    ShapeError,
    UnsupportedTransformError,
)
from kinematics.model import KinematicTree
from kinematics.wholebody import step_kernel, step_plan
from kinematics.wholebody.cascade import CascadeStep, cascade_step
from kinematics.wholebody.constraints.constraint import Constraint
from kinematics.wholebody.tasks.task import Task

GRADIENTS = ("unrolled", "implicit")
# The implicit backward: up to JACOBIAN_MAX_BATCH rows it forms each row's step derivative M (nv reverse passes
# batched through one step's graph of at most JACOBIAN_GRAPH_ROWS rows), then iterates with M; above, each iteration
# is a vector-Jacobian product through one step's graph of the batch. The same products either way; the first pays
# the step's per-call overhead once instead of once per iteration, the second does less arithmetic (32 products
# against nv) where the batch already amortises that overhead. Measured on the G1 in float32, both through the
# compiled step and backward: 9.9 against 40 ms at batch 1, 54 against 61 ms at 64, 90 against 76 ms at 128 (equal
# near 110 rows). The first holds a graph nv times the batch's (up to JACOBIAN_GRAPH_ROWS rows).
JACOBIAN_MAX_BATCH = 96
JACOBIAN_GRAPH_ROWS = 1024


@dataclass(frozen=True)
class WholeBodyIKCfg:
    """Frozen settings of the layer.

    Attributes:
        iterations: cascade steps per solve (fixed).
        damping: ``damping^2 |dq|^2`` in every level: the Levenberg-Marquardt term that keeps steps short where a
            level is near-singular (a stretched arm reaching out of range) and the linearisation would fail.
        qp_iterations: of ``solve_qp``'s interior point per level (on the rows its active-set steps leave).
        qp_active_set_steps: ``solve_qp``'s active-set steps per level, tried first: the first level from the
            empty active set, each lower one from the level above's. A standing robot's levels have few active
            constraints, and the steps solve nearly every row.
        qp_refinements: of each active-set solve whose system is too ill-conditioned to be solved as it is (a
            pivot below 1e-3 of its factor's largest: ``solve_qp``'s step 2), from the elastic system's solution to
            the original's (one takes such a level's dual residual from about 1e-10 to 1e-17; the backward always
            refines twice).
        position_tolerance, rotation_tolerance: a task succeeds when its position rows' error norm (m) and its
            orientation rows' (rad) are within them (a posture task always counts as succeeded).
        gradient: ``"unrolled"`` or ``"implicit"``.
        implicit_iterations: adjoint fixed-point iterations of the implicit backward.
    """

    iterations: int = 16
    damping: float = 0.05
    qp_iterations: int = 16
    qp_active_set_steps: int = 4
    qp_refinements: int = 1
    position_tolerance: float = 1e-3
    rotation_tolerance: float = 1e-2
    gradient: str = "unrolled"
    implicit_iterations: int = 32

    def __post_init__(self) -> None:
        for name in ("iterations", "qp_iterations", "implicit_iterations"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        for name in ("qp_active_set_steps", "qp_refinements"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be an int >= 0, got {value!r}")
        for name in ("damping", "position_tolerance", "rotation_tolerance"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.gradient not in GRADIENTS:
            raise ConfigError(f"gradient must be one of {GRADIENTS}, got {self.gradient!r}")


@dataclass(frozen=True)
class WholeBodyIKResult:
    """A solve's outcome. ``q`` ``(..., nq)``; per task name: ``residuals`` (its error ``(..., size)`` at ``q``)
    and ``success`` ``(...)``; per constraint name: ``violations`` ``(...)`` (0 when it holds); the last step's
    ``level_status`` ``(..., n_levels)`` (``kinematics.qp.solve`` statuses), ``active_inequalities`` and
    ``active_bounds``."""

    q: torch.Tensor
    residuals: dict[str, torch.Tensor]
    success: dict[str, torch.Tensor]
    violations: dict[str, torch.Tensor]
    level_status: torch.Tensor
    active_inequalities: torch.Tensor | None
    active_bounds: torch.Tensor | None


class WholeBodyIKLayer(nn.Module):
    """Whole-body IK on ``tree``: ``levels`` of tasks (the first has the highest priority), ``constraints`` at
    every level, settings ``cfg``."""

    def __init__(
        self,
        tree: KinematicTree,
        levels: Sequence[Sequence[Task]],
        constraints: Sequence[Constraint] = (),
        cfg: WholeBodyIKCfg | None = None,
    ) -> None:
        super().__init__()
        self.tree = tree
        self.levels = tuple(tuple(level) for level in levels)
        self.constraints = tuple(constraints)
        self.cfg = cfg if cfg is not None else WholeBodyIKCfg()
        if not self.levels or any(not level for level in self.levels):
            raise ConfigError("a whole-body layer needs at least one level, and no level may be empty")
        names = [t.name for level in self.levels for t in level] + [c.name for c in self.constraints]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ConfigError(f"task and constraint names must be unique; repeated: {duplicated}")
        self.tasks = {t.name: t for level in self.levels for t in level}
        for owner in (*self.tasks.values(), *self.constraints):  # unknown frames fail here, not mid-solve
            for frame in owner.frames:
                tree.frame_index(frame)
        owners = {**self.tasks, **{c.name: c for c in self.constraints}}
        self._target_shapes = tuple((name, tuple(owners[name].target_shape)) for name in self.target_names)
        self._register_load_state_dict_pre_hook(self._check_checkpoint)

    # ------------------------------------------------------------------------------------------------ inputs
    @property
    def target_names(self) -> tuple[str, ...]:
        """The names ``solve`` needs a target for: every task's, and every contact's anchor."""
        return (*self.tasks, *(c.name for c in self.constraints if c.needs_target))

    def _targets(self, targets: Mapping[str, torch.Tensor], batch: torch.Size) -> dict[str, torch.Tensor]:
        if not isinstance(targets, Mapping):
            raise ShapeError(f"targets must be a mapping from names to tensors, got {type(targets).__name__}")
        missing = [n for n in self.target_names if n not in targets]
        if missing:
            raise ShapeError(f"targets missing for {missing} (this layer needs {list(self.target_names)})")
        unknown = sorted(set(targets) - set(self.target_names))
        if unknown:
            raise ShapeError(f"targets given for unknown tasks or contacts {unknown}; known: {list(self.target_names)}")
        ref = self.tree.joint_lower
        out = {}
        owners = {**self.tasks, **{c.name: c for c in self.constraints}}
        for name in self.target_names:
            target, owner = targets[name], owners[name]
            shape = owner.target_shape
            if isinstance(owner, Task):
                owner.check_target(target)
            elif not isinstance(target, torch.Tensor) or tuple(target.shape[target.ndim - len(shape) :]) != shape:
                raise ShapeError(f"contact {name!r}: its anchor must be (..., {shape})")
            if target.dtype is not ref.dtype or target.device != ref.device:
                raise DtypeDeviceMismatchError(
                    f"target {name!r} is {target.dtype} on {target.device}; the tree is {ref.dtype} on {ref.device}"
                )
            try:
                out[name] = target.expand(*batch, *shape).reshape(-1, *shape)
            except RuntimeError:
                raise ShapeError(
                    f"target {name!r} of shape {tuple(target.shape)} does not broadcast to the batch {tuple(batch)}"
                ) from None
        return out

    def _batch(self, targets: Mapping[str, torch.Tensor], seed: torch.Tensor) -> torch.Size:
        owners = {**self.tasks, **{c.name: c for c in self.constraints}}
        shapes = [seed.shape[:-1]]
        for name in self.target_names:
            target = targets.get(name)
            if isinstance(target, torch.Tensor):
                shapes.append(target.shape[: target.ndim - len(owners[name].target_shape)])
        try:
            return torch.broadcast_shapes(*shapes)
        except RuntimeError:
            raise ShapeError(f"the batch shapes of the seed and targets do not broadcast: {shapes}") from None

    # ------------------------------------------------------------------------------------------------ solving
    def prepare(self, targets: Mapping[str, torch.Tensor]) -> dict[str, object]:
        """What the constraints compute once per solve from the flat ``targets`` (the support polygon from the
        contacts' anchors), by constraint name: pass it to every ``step`` of a loop with these targets."""
        prepared = {}
        for constraint in self.constraints:
            if (value := constraint.prepare(self.tree, targets)) is not None:
                prepared[constraint.name] = value
        return prepared

    def step(
        self,
        q: torch.Tensor,
        targets: Mapping[str, torch.Tensor],
        *,
        prepared: Mapping[str, object] | None = None,
    ) -> tuple[torch.Tensor, CascadeStep]:
        """One cascade step at ``q`` ``(B, nq)`` (flat batch; each target ``(B, *shape)``, a ``ShapeError``
        otherwise): ``(q_next, CascadeStep)``. ``prepared``: ``prepare(targets)``, computed here when omitted. On the
        CPU one compiled call (``step_kernel.CASCADE_STEPS``); where autograd records a graph to ``q`` and the
        tasks' targets, the compiled call and its compiled backward (``step_kernel.compiled_step_with_gradient``);
        where it records one to a contact's anchor or the prepared polygon, the torch composition."""
        _refuse_transforms()
        self._check_step(q, targets)
        if prepared is None:
            prepared = self.prepare(targets)
        return self._steps(q, targets, prepared, 1, False)[:2]

    def _check_step(self, q: torch.Tensor, targets: Mapping[str, torch.Tensor]) -> None:
        """``step``'s inputs: ``q`` ``(B, nq)`` and a target ``(B, *shape)`` for each of ``target_names`` (no
        broadcast: ``solve`` broadcasts); a ``ShapeError`` that says which is not. Shapes only, a few µs."""
        if not isinstance(q, torch.Tensor) or q.ndim != 2 or q.shape[1] != self.tree.nq:
            found = tuple(q.shape) if isinstance(q, torch.Tensor) else type(q).__name__
            raise ShapeError(f"step: q must be (B, {self.tree.nq}), got {found}")
        rows = q.shape[0]
        for name, shape in self._target_shapes:
            target = targets.get(name)
            if not isinstance(target, torch.Tensor) or target.shape != (rows, *shape):
                found = tuple(target.shape) if isinstance(target, torch.Tensor) else target
                raise ShapeError(f"step: target {name!r} must be ({rows}, {', '.join(map(str, shape))}), got {found}")

    def _steps(self, q: torch.Tensor, targets, prepared, steps: int, evaluate: bool):
        """``(q, CascadeStep, residuals, violations)`` after ``steps`` steps (``CASCADE_STEPS``). Where autograd
        records a graph that the compiled step and backward take (``step_kernel.compiled_step_with_gradient``), step
        after step through them, the evaluation by the torch composition."""
        inputs = step_plan.kernel_inputs(self, targets, prepared)
        done, step = 0, None
        while done < steps and (out := step_kernel.compiled_step_with_gradient(self, q, inputs)):
            q, step, done = out[0], CascadeStep(*out[1:5]), done + 1
        if done == steps:
            residuals = violations = None
            if evaluate:
                residuals, violations = self._evaluation(q, targets, prepared)
            return q, step, residuals, violations
        out = step_kernel.CASCADE_STEPS(step_kernel.key(self), q, inputs, steps - done, evaluate)
        return out[0], CascadeStep(*out[1:5]), out[5], out[6]

    def reference_steps(self, q: torch.Tensor, inputs: list[torch.Tensor], steps: int, evaluate: bool = False):
        """``step_kernel.CASCADE_STEPS``' reference: ``steps`` steps of the torch composition from ``q`` for the
        kernel's ``inputs`` (``step_plan.kernel_inputs``) and, with ``evaluate``, every task's error and every
        constraint's violation at the last configuration; the outputs as the kernel returns them."""
        tree, cfg = self.tree, self.cfg
        targets, prepared = step_plan.split_inputs(self, inputs)
        step = None
        for _ in range(steps):
            state = tree.forward_kinematics(q, validate=False)
            step = cascade_step(
                tree, state, q, self.levels, self.constraints, {**targets, **prepared}, cfg.damping, cfg.qp_iterations,
                cfg.qp_active_set_steps, qp_refinements=cfg.qp_refinements,
            )  # fmt: skip
            q = tree.integrate(q, step.dq)
        residuals = violations = q.new_zeros(q.shape[0], 0)
        if evaluate:
            residuals, violations = self._evaluation(q, targets, prepared)
        return q, step.dq, step.level_status, step.active_inequalities, step.active_bounds, residuals, violations

    def _evaluation(self, q: torch.Tensor, targets, prepared) -> tuple[torch.Tensor, torch.Tensor]:
        """Every task's error ``(B, sum of sizes)`` and every constraint's violation ``(B, n_constraints)`` at ``q``."""
        tree = self.tree
        state = tree.forward_kinematics(q, validate=False)
        residuals = torch.cat([task.error(tree, state, q, targets[name]) for name, task in self.tasks.items()], -1)
        found = [c.violation(tree, state, q, prepared.get(c.name, targets.get(c.name))) for c in self.constraints]
        return residuals, torch.stack(found, -1) if found else q.new_zeros(q.shape[0], 0)

    def _iterate(self, q: torch.Tensor, targets: Mapping[str, torch.Tensor], iterations: int):
        return self._steps(q, targets, self.prepare(targets), iterations, False)[:2]

    def forward(
        self, targets: Mapping[str, torch.Tensor], seed: torch.Tensor, *, iterations: int | None = None
    ) -> torch.Tensor:
        """``(..., nq)``: the configuration a solve reaches; see ``solve``."""
        return self.solve(targets, seed, iterations=iterations).q

    def solve(
        self, targets: Mapping[str, torch.Tensor], seed: torch.Tensor, *, iterations: int | None = None
    ) -> WholeBodyIKResult:
        """Solve from ``seed`` ``(..., nq)`` for ``targets`` (name -> tensor, leading dims broadcast), in
        ``iterations`` cascade steps (``cfg.iterations`` when omitted)."""
        tree, cfg = self.tree, self.cfg
        if iterations is None:
            iterations = cfg.iterations
        if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
            raise ConfigError(f"iterations must be an int >= 1, got {iterations!r}")
        _refuse_transforms()
        tree._check(seed, "seed", tree.nq)
        if seed.is_cpu:  # as forward_kinematics validates: never a device synchronisation
            tree.check_quaternion(seed)
        batch = self._batch(targets, seed)
        flat = self._targets(targets, batch)
        q = seed.expand(*batch, tree.nq).reshape(-1, tree.nq)
        wants_grad = torch.is_grad_enabled() and (q.requires_grad or any(t.requires_grad for t in flat.values()))
        if cfg.gradient == "implicit" and wants_grad:
            names = tuple(flat)
            q = _ImplicitSolve.apply(self, names, iterations, q, *(flat[n] for n in names))
            with torch.no_grad():
                _, step = self.step(q.detach(), {n: t.detach() for n, t in flat.items()})
            return self.evaluate(q, flat, step, batch)
        q, step, residuals, violations = self._steps(q, flat, self.prepare(flat), iterations, True)
        return self._result(q, step, residuals, violations, batch)

    def evaluate(self, q: torch.Tensor, targets: Mapping[str, torch.Tensor], step, batch: torch.Size):
        """The result of a solve that reached ``q`` (flat) with the last ``step``, for the flat ``targets``."""
        residuals, violations = self._evaluation(q, targets, self.prepare(targets))
        return self._result(q, step, residuals, violations, batch)

    def _result(self, q, step, residuals, violations, batch: torch.Size) -> WholeBodyIKResult:
        """The result from the flat ``residuals`` (every task's error, in task order) and ``violations``."""
        cfg = self.cfg
        errors = residuals.split([task.size for task in self.tasks.values()], -1)
        residual, success = {}, {}
        for (name, task), error in zip(self.tasks.items(), errors, strict=True):
            residual[name] = error.reshape(*batch, task.size)
            success[name] = task.succeeded(error, cfg.position_tolerance, cfg.rotation_tolerance).reshape(batch)
        violation = {c.name: v.reshape(batch) for c, v in zip(self.constraints, violations.unbind(-1), strict=True)}

        def shaped(x):
            return None if x is None else x.reshape(*batch, *x.shape[1:])

        return WholeBodyIKResult(
            q=q.reshape(*batch, self.tree.nq),
            residuals=residual,
            success=success,
            violations=violation,
            level_status=shaped(step.level_status),
            active_inequalities=shaped(step.active_inequalities),
            active_bounds=shaped(step.active_bounds),
        )

    # --------------------------------------------------------------------------------------------- checkpoints
    def geometry_fingerprint(self) -> str:
        """Hash of the tree's geometry, the tasks' and constraints' definitions (not their targets)."""
        d = self.tree.description
        digest = hashlib.sha256()
        digest.update(repr((d.root_link, d.node_names, d.joint_names, d.frame_names, self.tree.floating_base)).encode())
        for array in (d.parent, d.kind, d.node_origin, d.dof, d.multiplier, d.offset, d.lower, d.upper):
            digest.update(array.tobytes())
        for array in (d.frame_node, d.frame_offset, d.mass, d.com_local):
            digest.update(array.tobytes())
        digest.update(repr([[repr(t) for t in level] for level in self.levels]).encode())
        digest.update(repr([repr(c) for c in self.constraints]).encode())
        return digest.hexdigest()

    def get_extra_state(self) -> dict:
        return {"cfg": asdict(self.cfg), "fingerprint": self.geometry_fingerprint()}

    def set_extra_state(self, state: dict) -> None:
        self.cfg = WholeBodyIKCfg(**state["cfg"])

    def _check_checkpoint(self, state_dict, prefix, *args) -> None:
        saved = state_dict.get(prefix + "_extra_state")
        if saved is not None and saved.get("fingerprint") != self.geometry_fingerprint():
            raise CheckpointMismatchError(
                "this whole-body layer's checkpoint was saved from another robot, task set or constraint set"
            )


def _refuse_transforms() -> None:
    """The layer's QPs have no forward-mode or batching rule (``solve_qp`` refuses them): refuse a ``torch.func``
    transform or forward-mode AD at the entry, with the typed error, before anything data-dependent runs under it."""
    if transforms_active():
        raise UnsupportedTransformError(
            "the whole-body layer supports first-order reverse-mode autograd only (its QPs have no forward-mode or "
            "batching rule); torch.func transforms and forward-mode AD are unsupported"
        )


class _ImplicitSolve(torch.autograd.Function):
    """``apply(layer, names, iterations, seed, *targets) -> q*``: forward without a graph, backward by the adjoint
    fixed point (see the module docstring)."""

    @staticmethod
    def forward(ctx, layer, names: tuple[str, ...], iterations: int, seed: torch.Tensor, *targets: torch.Tensor):
        with torch.no_grad():
            q, _ = layer._iterate(seed, dict(zip(names, targets, strict=True)), iterations)
        ctx.layer, ctx.names = layer, names
        ctx.save_for_backward(q, *targets)
        return q

    @staticmethod
    def backward(ctx, grad_q: torch.Tensor):
        q_star, *targets = ctx.saved_tensors
        q_star = q_star.detach()  # the forward's output: unpacked, it carries this Function's graph
        layer, tree = ctx.layer, ctx.layer.tree
        detached = {n: t.detach() for n, t in zip(ctx.names, targets, strict=True)}
        form_jacobian = 0 < q_star.shape[0] <= JACOBIAN_MAX_BATCH
        with torch.enable_grad():
            delta = q_star.new_zeros(q_star.shape[0], tree.nv).requires_grad_(True)
            q = tree.integrate(q_star, delta)
            (g_delta,) = torch.autograd.grad(q, delta, grad_q, retain_graph=not form_jacobian)  # dL/d(tangent at q*)
            if form_jacobian:
                M = _step_jacobian(layer, q_star, detached)

                def transposed_product(u: torch.Tensor) -> torch.Tensor:
                    return (M.mT @ u[..., None])[..., 0]
            else:
                psi = tree.difference(q_star, layer.step(q, detached)[0])  # the step map in tangent coordinates at q*

                def transposed_product(u: torch.Tensor) -> torch.Tensor:
                    return torch.autograd.grad(psi, delta, u, retain_graph=True)[0]

            u = g_delta
            for _ in range(layer.cfg.implicit_iterations):
                u = g_delta + transposed_product(u)
            theta = [t.detach().requires_grad_(ctx.needs_input_grad[4 + i]) for i, t in enumerate(targets)]
            wanted = [t for t in theta if t.requires_grad]
            grads = ()
            if wanted:  # q* without a graph: the compiled step and its compiled backward where they apply
                q_next, _ = layer.step(q_star, dict(zip(ctx.names, theta, strict=True)))
                grads = torch.autograd.grad(tree.difference(q_star, q_next), wanted, u, allow_unused=True)
        grads = iter(grads)
        out = [next(grads) if t.requires_grad else None for t in theta]
        out = [torch.zeros_like(t) if g is None and t.requires_grad else g for g, t in zip(out, theta, strict=True)]
        return None, None, None, None, *out


def _step_jacobian(layer: WholeBodyIKLayer, q_star: torch.Tensor, targets: dict[str, torch.Tensor]) -> torch.Tensor:
    """``M`` ``(B, nv, nv)``: the derivative of one step at ``q_star`` in tangent coordinates,
    ``M[b, i, j] = d psi_i / d delta_j`` with ``psi(delta) = difference(q*, step(integrate(q*, delta)))``. Each row's
    ``nv`` copies go through one step's graph together and one backward seeds each copy with a unit vector, in
    chunks of at most ``JACOBIAN_GRAPH_ROWS`` graph rows."""
    tree, nv, batch = layer.tree, layer.tree.nv, q_star.shape[0]
    chunk = max(1, JACOBIAN_GRAPH_ROWS // nv)
    seeds = torch.eye(nv, dtype=q_star.dtype, device=q_star.device)
    blocks = []
    for lo in range(0, batch, chunk):
        q = q_star[lo : lo + chunk]
        rows = q.shape[0]

        def copies(x: torch.Tensor, rows: int = rows) -> torch.Tensor:  # (rows, ...) -> (nv * rows, ...), copy-major
            return x.detach().expand(nv, *x.shape).reshape(nv * rows, *x.shape[1:])

        q_copies = copies(q)
        delta = q_copies.new_zeros(nv * rows, nv).requires_grad_(True)
        q_next, _ = layer.step(
            tree.integrate(q_copies, delta), {n: copies(t[lo : lo + chunk]) for n, t in targets.items()}
        )
        psi = tree.difference(q_copies, q_next)
        (rows_of_M,) = torch.autograd.grad(psi, delta, seeds[:, None, :].expand(nv, rows, nv).reshape(nv * rows, nv))
        blocks.append(rows_of_M.reshape(nv, rows, nv).transpose(0, 1))  # (rows, i, j)
    return torch.cat(blocks)
