"""What a whole-body constraint is: linear equalities, inequalities or bounds on the step, present at every level.

The step ``dq`` is a tangent vector ``(..., nv)`` (the configuration moves to ``tree.integrate(q, dq)``). A
constraint contributes any of ``A dq = b`` (``equality``), ``G dq <= h`` (``inequality``) and
``lb <= dq <= ub`` (``bounds``), built at the current configuration, and says how far the configuration itself is
from satisfying it (``violation``, in the constraint's unit, 0 when satisfied).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from kinematics.errors import ConfigError
from kinematics.model import KinematicTree, TreeState

Linear = tuple[torch.Tensor, torch.Tensor]


class Constraint:
    """Base class; subclasses override what they contribute. ``needs_target``: the constraint reads
    ``targets[name]`` (a contact's anchor pose)."""

    needs_target = False
    target_shape: tuple[int, ...] = ()
    prepared_size = 0  # how many tensors ``prepare`` returns (a tuple of them); 0: it prepares nothing
    prepare_reads: tuple[str, ...] = ()  # the targets ``prepare`` reads (a new value of one: prepare again)
    frames: tuple[str, ...] = ()  # the tree's frames the constraint reads (the layer checks they exist when built)

    def __init__(self, name: str) -> None:
        if not name or not isinstance(name, str):
            raise ConfigError(f"a constraint needs a non-empty name, got {name!r}")
        self.name = name

    def prepare(self, tree: KinematicTree, targets: Mapping[str, torch.Tensor]) -> object | None:
        """What the constraint computes once per solve from the solve's (flat) targets, handed back to it as its
        ``target`` at every step and in the evaluation: a tuple of ``prepared_size`` tensors (batch first), or None
        (the default): nothing. Only a constraint that reads no target of its own (``needs_target`` false)
        prepares."""
        return None

    def equality(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> Linear | None:
        return None

    def inequality(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> Linear | None:
        return None

    def bounds(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> Linear | None:
        return None

    def violation(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> torch.Tensor:
        """``(...)`` how far ``q`` is from satisfying the constraint (0 when it does)."""
        return q.new_zeros(q.shape[:-1])

    def compiled_form(self, plan) -> bool:
        """Add this constraint to the compiled step's ``plan`` (a ``kinematics.wholebody.step_plan.PlanBuilder``)
        through one of its block methods and return True; False where the kernel does not compute it (its layer
        then runs the torch composition). The base class has none."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
