"""Yaw predictors: the conditional network ``f(q0, p)``, its several-hypothesis variant, the seed's bounded network,
and the shared constant.

All output a unit yaw vector ``(N, 2)``: the radial yaw vector rotated by a predicted unit correction, so the
prediction is continuous on the whole circle (no wrap at +-pi). The several-hypothesis network predicts ``K``
such yaws and its policy answers with the one whose IK solve costs least, so its answer can jump between basins
where the best yaw does, which a single continuous output cannot. The network reads normalised joints, their
sines and cosines, the normalised grasp point, the radial yaw and the heading (the hand's current yaw, from FK of ``q0``).
The seed's bounded network reads only the joints and the grasp point, normalised around the start distribution and
the target box, and answers heading plus at most +-90 degrees.
"""

from __future__ import annotations

import torch
from torch import nn

from kinematics import KinematicsLayer
from learning.grasp_yaw.baselines import CheckedSolve, cheapest_candidate, ik_layer, solve_candidates
from learning.grasp_yaw.config import ExperimentCfg, StartStateCfg, WorkspaceCfg
from learning.grasp_yaw.splits import start_posture
from learning.grasp_yaw.task import current_heading, failure_penalty, radial_angle, yaw_vector


def rotate_yaw(base: torch.Tensor, correction: torch.Tensor) -> torch.Tensor:
    """Compose two yaw vectors ``(..., 2)`` (complex multiplication): angles add."""
    c = base[..., 0] * correction[..., 0] - base[..., 1] * correction[..., 1]
    s = base[..., 0] * correction[..., 1] + base[..., 1] * correction[..., 0]
    return torch.stack((c, s), -1)


def goal_features(
    kinematics: KinematicsLayer, p: torch.Tensor, q0: torch.Tensor, workspace: WorkspaceCfg
) -> torch.Tensor:
    """``(N, 3), (N, dof) -> (N, 3 * dof + 7)`` network inputs, all of order one."""
    lower, upper = kinematics.lower, kinematics.upper
    q_norm = 2 * (q0 - lower) / (upper - lower) - 1
    lo = p.new_tensor([workspace.x[0], workspace.y[0], workspace.z[0]])
    hi = p.new_tensor([workspace.x[1], workspace.y[1], workspace.z[1]])
    p_norm = 2 * (p - lo) / (hi - lo) - 1
    return torch.cat(
        (
            q_norm,
            torch.sin(q0),
            torch.cos(q0),
            p_norm,
            yaw_vector(radial_angle(p)),
            yaw_vector(current_heading(kinematics, q0)),
        ),
        -1,
    )


class YawNet(nn.Module):
    """MLP ``features -> unit correction (2,)`` applied to the radial yaw. Starts at the radial yaw (correction 0)."""

    def __init__(self, in_features: int, hidden: int = 128) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_features, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2)
        )
        head = self.body[-1]
        nn.init.normal_(head.weight, std=1e-3)
        with torch.no_grad():
            head.bias.copy_(torch.tensor([1.0, 0.0]))

    def forward(self, features: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        raw = self.body(features)
        correction = raw / raw.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return rotate_yaw(yaw_vector(radial_angle(p)), correction)


class YawHypothesesNet(nn.Module):
    """MLP ``features -> K unit corrections``: ``K`` yaw hypotheses ``(N, K, 2)``, hypothesis ``k`` starting at
    the radial yaw + ``2 pi k / K`` (a ``K``-yaw grid). ``YawPolicy`` answers with the one whose IK solve costs least."""

    def __init__(self, in_features: int, hidden: int, hypotheses: int) -> None:
        super().__init__()
        self.hypotheses = hypotheses
        self.body = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.SiLU(),
            nn.Linear(hidden, hidden),
            nn.SiLU(),
            nn.Linear(hidden, 2 * hypotheses),
        )
        head = self.body[-1]
        nn.init.normal_(head.weight, std=1e-3)
        offsets = torch.arange(hypotheses, dtype=torch.float32) * (2 * torch.pi / hypotheses)
        with torch.no_grad():
            head.bias.copy_(yaw_vector(offsets).reshape(-1))

    def forward(self, features: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        correction = self.body(features).reshape(-1, self.hypotheses, 2)
        correction = correction / correction.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return rotate_yaw(yaw_vector(radial_angle(p))[:, None, :], correction)


class BoundedYawNet(nn.Module):
    """The seed's network: an MLP ``(dof + 3) -> hidden -> hidden -> 1`` (SiLU) whose output ``u`` sets the yaw to
    heading + ``pi/2 tanh(u)``; its last layer is zero, so it starts at heading.

    It reads ``(q0 - q_centre) / q_scale`` and ``(p - p_centre) / p_scale`` (buffers, saved with the weights): the
    start distribution's centre and half-widths, the target box's centre and half-extents.
    """

    def __init__(self, kinematics: KinematicsLayer, start: StartStateCfg, workspace: WorkspaceCfg, hidden: int) -> None:
        super().__init__()
        dof = kinematics.dof
        q_centre = start_posture(kinematics, start)
        if start.distribution == "box":
            q_scale = torch.full((dof,), start.box_half_width, dtype=torch.float64)
            q_scale[-1] = start.wrist_half_width
        else:
            q_scale = torch.full((dof,), start.noise, dtype=torch.float64)
            q_scale[-1] = 0.5 * float(kinematics.upper[-1] - kinematics.lower[-1])
        box = torch.tensor((workspace.x, workspace.y, workspace.z), dtype=torch.float64)
        self.register_buffer("q_centre", q_centre)
        self.register_buffer("q_scale", q_scale)
        self.register_buffer("p_centre", box.mean(-1))
        self.register_buffer("p_scale", 0.5 * (box[:, 1] - box[:, 0]))
        self.body = nn.Sequential(
            nn.Linear(dof + 3, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1)
        )
        nn.init.zeros_(self.body[-1].weight)
        nn.init.zeros_(self.body[-1].bias)

    def features(self, kinematics: KinematicsLayer, p: torch.Tensor, q0: torch.Tensor) -> torch.Tensor:
        """``(N, dof + 5)``: the normalised joints and grasp point, then the heading as a unit vector."""
        q = (q0 - self.q_centre) / self.q_scale
        return torch.cat((q, (p - self.p_centre) / self.p_scale, yaw_vector(current_heading(kinematics, q0))), -1)

    def forward(self, features: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        correction = (torch.pi / 2) * torch.tanh(self.body(features[:, :-2]))[:, 0]
        return rotate_yaw(features[:, -2:], yaw_vector(correction))


class SharedConstant(nn.Module):
    """One learned angle (radians), the same for every goal: added to the radial yaw, or (``absolute``, the seed's
    constant) the yaw itself."""

    def __init__(self, absolute: bool = False) -> None:
        super().__init__()
        self.absolute = absolute
        self.offset = nn.Parameter(torch.zeros(()))

    def forward(self, features: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        if self.absolute:
            return yaw_vector(self.offset).expand(p.shape[0], 2)
        return yaw_vector(radial_angle(p) + self.offset)


class YawPolicy(nn.Module):
    """A predictor with its feature map: ``policy(p, q0) -> yaw (N, 2)``. Only the predictor is saved.

    A several-hypothesis predictor's answer is its cheapest hypothesis: all ``K`` are solved with the training
    IK (``cfg.train.ik_iterations`` steps) from ``q0`` in one batch, as training solves them, and scored by the task's
    cost, failures penalised; one network call plus ``K`` IK checks. ``choose`` also hands on the answer's check
    (``CheckedSolve``), which the final solve continues.
    """

    def __init__(self, predictor: nn.Module, kinematics: KinematicsLayer, cfg: ExperimentCfg) -> None:
        super().__init__()
        self.predictor = predictor
        self._kinematics = (kinematics,)  # shared, not owned: kept out of the state dict and .to()
        self.workspace, self.weights = cfg.workspace, cfg.weights
        self.check_ik = ik_layer(kinematics, cfg.train.ik_iterations)
        self.penalty = failure_penalty(kinematics)

    def forward(self, p: torch.Tensor, q0: torch.Tensor) -> torch.Tensor:
        return self.choose(p, q0)[0]

    def choose(self, p: torch.Tensor, q0: torch.Tensor) -> tuple[torch.Tensor, CheckedSolve | None]:
        """The answer ``(N, 2)`` and, for a several-hypothesis predictor, its check (``None`` for one yaw: nothing
        was solved)."""
        yaw = self.predictor(self.features(p, q0), p)
        return (yaw, None) if yaw.dim() == 2 else self.cheapest(p, q0, yaw)

    def features(self, p: torch.Tensor, q0: torch.Tensor) -> torch.Tensor:
        if isinstance(self.predictor, BoundedYawNet):
            return self.predictor.features(self._kinematics[0], p, q0)
        return goal_features(self._kinematics[0], p, q0, self.workspace)

    def cheapest(
        self, p: torch.Tensor, q0: torch.Tensor, hypotheses: torch.Tensor
    ) -> tuple[torch.Tensor, CheckedSolve]:
        """``(N, K, 2) -> (N, 2)`` the hypothesis whose checking IK solve from ``q0`` costs least (each solved as the
        network gave it), and that solve."""
        checked = hypotheses.detach()
        psi = torch.atan2(checked[..., 1], checked[..., 0])
        candidates = solve_candidates(self.check_ik, p, q0, psi, self.weights, self.penalty, yaw=checked)
        best, solve = cheapest_candidate(self.check_ik, candidates)
        return hypotheses.gather(1, best[:, None, None].expand(-1, 1, 2))[:, 0], solve


def feature_count(dof: int) -> int:
    return 3 * dof + 7


def build_predictor(kind: str, kinematics: KinematicsLayer, cfg: ExperimentCfg) -> nn.Module:
    """``kind``: ``"shared_constant"`` or a network kind (``"ik_trained"``, ``"teacher_supervised"``, ...). The
    IK-trained predictor has ``train.hypotheses`` yaw hypotheses; every other network has one yaw and is
    ``train.network``'s (``YawNet`` or the seed's ``BoundedYawNet``)."""
    train = cfg.train
    if kind == "shared_constant":
        return SharedConstant(absolute=train.constant == "absolute")
    if kind == "ik_trained" and train.hypotheses > 1:
        return YawHypothesesNet(feature_count(kinematics.dof), train.hidden, train.hypotheses)
    if train.network == "bounded":
        return BoundedYawNet(kinematics, cfg.start, cfg.workspace, train.hidden)
    return YawNet(feature_count(kinematics.dof), train.hidden)
