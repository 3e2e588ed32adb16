"""``KinematicsLayer``: a chain plus its TCP offset and physical joint limits, as a torch module."""

from __future__ import annotations

import torch
from torch import nn

from kinematics.errors import CheckpointMismatchError, DtypeDeviceMismatchError, NonFiniteError, ShapeError
from kinematics.lie.rotations import validate_transform
from kinematics.model.chain import SerialChainKinematics


def check_tensor(x: torch.Tensor, name: str, like: torch.Tensor) -> None:
    """Raise unless ``x`` is a tensor on ``like``'s dtype and device."""
    if not isinstance(x, torch.Tensor):
        raise ShapeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != like.dtype or x.device != like.device:
        raise DtypeDeviceMismatchError(
            f"{name} is {x.dtype} on {x.device} but the module is {like.dtype} on {like.device}; "
            f"convert the input with .to(...) or move the module"
        )


class KinematicsLayer(nn.Module):
    """FK ``(..., dof) -> (..., 4, 4)`` and geometric Jacobian ``(..., 6, dof)`` of a chain's TCP, in the root frame.

    Args:
        model: the chain (its geometry becomes buffers of this module).
        tcp: ``(4, 4)`` TCP offset from the chain's end link; identity when omitted.
        joint_limits: ``(dof, 2)`` physical [lower, upper] limits (``-inf``/``inf`` for unbounded joints);
            the URDF limits when omitted.
    """

    def __init__(
        self,
        model: SerialChainKinematics,
        tcp: torch.Tensor | None = None,
        joint_limits: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        ref = model.tail
        tcp = torch.eye(4, dtype=ref.dtype, device=ref.device) if tcp is None else torch.as_tensor(tcp)
        check_tensor(tcp, "tcp", ref)
        validate_transform(tcp, "tcp")
        if tcp.shape != (4, 4):
            raise ShapeError(f"tcp must have shape (4, 4), got {tuple(tcp.shape)}")
        if joint_limits is None:
            joint_limits = torch.stack((model.lower, model.upper), -1)
        check_tensor(joint_limits, "joint_limits", ref)
        if joint_limits.shape != (model.dof, 2):
            raise ShapeError(f"joint_limits must have shape ({model.dof}, 2), got {tuple(joint_limits.shape)}")
        if torch.isnan(joint_limits).any() or (joint_limits[:, 0] > joint_limits[:, 1]).any():
            raise ShapeError("joint_limits must be [lower, upper] pairs with lower <= upper and no NaN")
        self.register_buffer("tcp", tcp.clone())
        self.register_buffer("lower", joint_limits[:, 0].clone())
        self.register_buffer("upper", joint_limits[:, 1].clone())
        self._register_load_state_dict_pre_hook(self._check_checkpoint)

    @property
    def dof(self) -> int:
        return self.model.dof

    @property
    def dtype(self) -> torch.dtype:
        return self.tcp.dtype

    @property
    def device(self) -> torch.device:
        return self.tcp.device

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.model.joint_names

    def check_joints(self, q: torch.Tensor, name: str = "q") -> None:
        """Raise a typed error unless ``q`` is a finite ``(dof,)`` or ``(..., dof)`` tensor on this module's dtype/device."""
        check_tensor(q, name, self.tcp)
        if q.ndim < 1 or q.shape[-1] != self.dof:
            raise ShapeError(f"{name} must have shape (..., {self.dof}), got {tuple(q.shape)}")
        if not torch.isfinite(q).all():
            raise NonFiniteError(f"{name} contains NaN or infinite entries")

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        """TCP pose in the root frame: ``(..., dof) -> (..., 4, 4)``."""
        self.check_joints(q)
        return self.model.fk_and_jacobian(q, self.tcp, with_jacobian=False)[0]

    def fk_and_jacobian(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """TCP pose ``(..., 4, 4)`` and geometric Jacobian ``(..., 6, dof)`` (linear rows first, root-frame axes)."""
        self.check_joints(q)
        return self.model.fk_and_jacobian(q, self.tcp)

    def jacobian(self, q: torch.Tensor) -> torch.Tensor:
        """Geometric Jacobian ``(..., 6, dof)`` at the TCP (Pinocchio's LOCAL_WORLD_ALIGNED)."""
        return self.fk_and_jacobian(q)[1]

    def default_seed(self) -> torch.Tensor:
        """``(dof,)``: bounded joints at the middle of their limits, unbounded ones at zero."""
        bounded = torch.isfinite(self.lower) & torch.isfinite(self.upper)
        mid = 0.5 * (torch.where(bounded, self.lower, 0.0) + torch.where(bounded, self.upper, 0.0))
        return mid.clone()

    def clamp(self, q: torch.Tensor) -> torch.Tensor:
        """Project onto the joint limits (derivative one inside, zero outside)."""
        return torch.clamp(q, self.lower, self.upper)

    def within_limits(self, q: torch.Tensor) -> torch.Tensor:
        """``(..., dof) -> (...)`` bool: every joint inside its physical limits."""
        return ((q >= self.lower) & (q <= self.upper)).all(-1)

    def get_extra_state(self) -> dict:
        return {
            "geometry_fingerprint": self.model.fingerprint,
            "joint_names": list(self.joint_names),
            "chain": f"{self.model.root_link_name} -> {self.model.end_link_name}",
        }

    def set_extra_state(self, state: dict) -> None:
        pass  # Checked in the pre-hook, before any buffer is overwritten.

    def _check_checkpoint(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors) -> None:
        extra = state_dict.get(prefix + "_extra_state")
        if extra is None:
            raise CheckpointMismatchError("the state dict has no geometry fingerprint; it was not saved by this layer")
        if extra.get("geometry_fingerprint") != self.model.fingerprint:
            raise CheckpointMismatchError(
                f"the state dict was saved from another chain ({extra.get('chain', 'links unknown')}, joints "
                f"{extra.get('joint_names')}); this layer's chain is {self.model.root_link_name} -> "
                f"{self.model.end_link_name} with joints {list(self.joint_names)}, and its geometry differs. "
                f"Rebuild the same chain before loading."
            )
        tcp = state_dict.get(prefix + "tcp")
        if tcp is not None and not torch.allclose(tcp.to(torch.float64), self.tcp.to(torch.float64), atol=1e-6):
            raise CheckpointMismatchError(
                "the state dict was saved with another TCP offset; build the layer with the same tcp= before loading"
            )
