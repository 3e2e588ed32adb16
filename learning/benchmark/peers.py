"""The peers (the optional ``bench`` extra): pytorch_kinematics and Pinocchio, imported lazily and built on
the same URDF, root link and TCP link as the chain under test."""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import io
from dataclasses import dataclass
from functools import cache
from types import ModuleType

import torch

INSTALL_HINT = "it is part of the 'bench' extra: pip install -e '.[bench]' (or pip install {dist})"
_PEERS = {"pk": ("pytorch_kinematics", "pytorch-kinematics"), "pin": ("pinocchio", "pin")}


class PeerUnavailableError(ImportError):
    """A peer library is not installed; its rows are skipped."""


@cache
def load(peer: str) -> ModuleType:
    """Import ``pk`` (pytorch_kinematics) or ``pin`` (Pinocchio), or raise ``PeerUnavailableError`` saying
    how to install it."""
    module, dist = _PEERS[peer]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerUnavailableError(f"{module} is not installed ({exc}); {INSTALL_HINT.format(dist=dist)}") from exc


def availability() -> dict[str, str | None]:
    """``{peer: None}`` when importable, else the message that says what to install."""
    out = {}
    for peer in _PEERS:
        try:
            load(peer)
            out[peer] = None
        except PeerUnavailableError as exc:
            out[peer] = str(exc)
    return out


def versions() -> dict[str, str | None]:
    """Installed versions of the peers' distributions (``None`` when missing)."""
    out = {}
    for peer, (_, dist) in _PEERS.items():
        try:
            out[peer] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[peer] = None
    return out


def pk_chain(urdf_text: str, end_link: str, root_link: str, joint_names: tuple[str, ...], device, dtype):
    """pytorch_kinematics' serial chain (its parser's 'Unknown attribute' chatter is swallowed)."""
    pk = load("pk")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        chain = pk.build_serial_chain_from_urdf(urdf_text, end_link_name=end_link, root_link_name=root_link)
    names = tuple(chain.get_joint_parameter_names(exclude_fixed=True))
    if names != joint_names:
        raise RuntimeError(f"pytorch_kinematics found joints {names}, the chain under test has {joint_names}")
    return chain.to(dtype=dtype, device=torch.device(device))


@dataclass
class PinArm:
    """A Pinocchio model reduced to the chain's joints (every other joint locked at neutral) and its TCP."""

    pin: ModuleType
    model: object
    data: object
    frame_id: int

    def fk_jacobian(self, q):
        """TCP placement (``pin.SE3``) and LOCAL_WORLD_ALIGNED frame Jacobian ``(6, nv)`` at ``q``."""
        pin = self.pin
        pin.computeJointJacobians(self.model, self.data, q)
        placement = pin.updateFramePlacement(self.model, self.data, self.frame_id)
        jac = pin.getFrameJacobian(self.model, self.data, self.frame_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        return placement, jac


def pin_arm(urdf_text: str, end_link: str, joint_names: tuple[str, ...]) -> PinArm:
    """Build the reduced Pinocchio model with ``pin.buildReducedModel``."""
    pin = load("pin")
    full = pin.buildModelFromXML(urdf_text)
    lock = [full.getJointId(name) for name in list(full.names)[1:] if name not in joint_names]
    model = pin.buildReducedModel(full, lock, pin.neutral(full)) if lock else full
    names = tuple(model.names)[1:]
    if names != joint_names or model.nq != len(joint_names):
        raise RuntimeError(f"the reduced Pinocchio model has joints {names}, the chain under test has {joint_names}")
    if not model.existFrame(end_link):
        raise RuntimeError(f"Pinocchio has no frame {end_link!r}")
    return PinArm(pin, model, model.createData(), model.getFrameId(end_link))
