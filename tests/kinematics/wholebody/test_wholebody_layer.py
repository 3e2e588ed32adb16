"""The whole-body layer on a standing G1 reaching with its right hand: feet held, CoM over the support polygon,
limits kept; the cascade is strict (each level's optimum kept exactly) and equals a reference QP solver level by
level; one weighted level equals pink's step; batched equals per-sample; gradients unrolled and implicit agree
and pass gradcheck; bad inputs raise typed errors; checkpoints carry the settings and refuse another geometry."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import assets
from kinematics import (
    CheckpointMismatchError,
    ConfigError,
    FrameNotFoundError,
    KinematicTree,
    ShapeError,
    UnsupportedTransformError,
)
from kinematics.qp.problem import SOLVED
from kinematics.wholebody import (
    ComTask,
    FrameTask,
    PostureTask,
    WholeBodyIKCfg,
    WholeBodyIKLayer,
    cascade_step,
    standing_problem,
)
from kinematics.wholebody import layer as layer_module
from kinematics.wholebody.cascade import constraint_rows, weighted_rows

G1 = assets.G1
HAND = G1.frames["right_hand"]


@pytest.fixture(scope="module")
def g1() -> KinematicTree:
    return KinematicTree.from_urdf(G1.urdf_text(), floating_base=True, dtype=torch.float64)


@pytest.fixture(scope="module")
def problem(g1):
    return standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=12))


def hand_targets(g1, problem, offsets) -> dict[str, torch.Tensor]:
    state = g1.forward_kinematics(problem.q_stand)
    T = g1.frame_pose(state, HAND).expand(len(offsets), 4, 4).clone()
    T[:, :3, 3] += torch.as_tensor(offsets, dtype=torch.float64)
    return {**problem.fixed_targets, "right_hand": T}


OFFSETS = [[0.10, 0.0, 0.05], [0.05, -0.10, -0.05], [0.15, 0.05, 0.10], [0.0, 0.0, -0.10]]


def test_a_standing_g1_reaches_with_its_feet_held_and_its_com_over_its_soles(g1, problem) -> None:
    targets = hand_targets(g1, problem, OFFSETS)
    result = problem.layer.solve(targets, problem.q_stand)
    assert result.q.shape == (4, g1.nq)
    assert result.success["right_hand"].all(), result.residuals["right_hand"].norm(dim=-1)
    assert result.violations["left_foot"].max() < 1e-6 and result.violations["right_foot"].max() < 1e-6
    assert result.violations["com_in_support"].max() < 1e-6
    assert result.violations["joint_limits"].max() < 1e-9
    assert (result.level_status == SOLVED).all()
    quaternion = result.q[:, 3:7]
    torch.testing.assert_close(quaternion.norm(dim=-1), torch.ones(4, dtype=torch.float64))


def test_a_far_low_reach_leans_until_the_com_is_on_the_polygon_margin(g1) -> None:
    """Far forward and low, the robot leans over: the CoM constraint becomes active and holds, feet held."""
    problem = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=40))
    targets = hand_targets(g1, problem, [[0.45, 0.0, -0.2], [0.35, -0.2, -0.25]])
    result = problem.layer.solve(targets, problem.q_stand)
    assert result.active_inequalities[:, -problem.layer.constraints[2].size :].any(-1).all(), "the polygon binds"
    assert result.violations["com_in_support"].max() < 1e-6
    # Leaning on the polygon's edge the iteration converges slower (an active constraint turns off and on while
    # the posture settles): after 40 steps the feet are within 2 um (1e-9 for the reaches above).
    assert result.violations["left_foot"].max() < 2e-6 and result.violations["right_foot"].max() < 2e-6
    assert result.violations["joint_limits"].max() < 1e-9


def _reference_qp(P, c, A, b, G, h, lb, ub):
    qpsolvers = pytest.importorskip("qpsolvers")
    solver = "proxqp" if "proxqp" in qpsolvers.available_solvers else qpsolvers.available_solvers[0]
    x = qpsolvers.solve_qp(P, c, G, h, A, b, lb, ub, solver=solver, eps_abs=1e-10, eps_rel=0)
    assert x is not None
    return x


def test_a_starved_qp_never_steps_outside_the_step_limits(g1) -> None:
    # with 4 interior-point steps per level many levels end unsolved; their least-violation steps are clamped to
    # the bounds, so every step stays within the step limit and the joint limits hold
    starved = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=1, qp_iterations=4))
    targets = hand_targets(g1, starved, [[0.3, -0.2, 0.2], [0.25, 0.1, -0.3], [0.35, 0.0, 0.0], [0.2, 0.3, 0.1]])
    q = starved.q_stand.expand(4, -1).clone()
    unsolved = 0
    for _ in range(12):
        result = starved.layer.solve(targets, q)
        unsolved += int((result.level_status != SOLVED).sum())
        step = result.q[:, 7:] - q[:, 7:]
        assert step.abs().max() <= 0.1 + 1e-9
        assert result.violations["joint_limits"].max() < 1e-9
        q = result.q
    assert unsolved > 0  # the situation this test is about happened


def test_the_cascade_equals_a_reference_solver_level_by_level_and_is_strict(g1, problem) -> None:
    layer = problem.layer
    targets = hand_targets(g1, problem, [[0.3, -0.1, 0.0]])
    q = problem.q_stand[None]
    state = g1.forward_kinematics(q)
    step = cascade_step(g1, state, q, layer.levels, layer.constraints, targets, layer.cfg.damping, 50, 4)
    rows = constraint_rows(g1, state, q, layer.constraints, targets)
    n = lambda t: None if t is None else t[0].numpy()  # noqa: E731
    G, h = n(rows.G), n(rows.h)
    lb, ub = n(rows.lb), n(rows.ub)
    lb, ub = np.where(np.isinf(lb), -1e9, lb), np.where(np.isinf(ub), 1e9, ub)
    A_kept, b_kept, x = [n(rows.A)], [n(rows.b)], None
    for tasks in layer.levels:
        J, r = (t[0].numpy() for t in weighted_rows(g1, state, q, tasks, targets))
        P = J.T @ J + layer.cfg.damping**2 * np.eye(g1.nv)
        x = _reference_qp(P, -J.T @ r, np.vstack(A_kept), np.concatenate(b_kept), G, h, lb, ub)
        A_kept.append(J)
        b_kept.append(J @ x)
        if len(A_kept) == 2:
            first_level = J @ x
    np.testing.assert_allclose(step.dq[0].numpy(), x, atol=1e-6)
    J1, _ = weighted_rows(g1, state, q, layer.levels[0], targets)
    np.testing.assert_allclose((J1[0] @ step.dq[0]).numpy(), first_level, atol=1e-8)  # strict: level 1 kept


def test_one_weighted_level_equals_pinks_step(g1, problem) -> None:
    """The same frame, CoM and posture tasks and costs in one level, no constraints: the step equals
    ``pink.solve_ik``'s. The frames sit at their targets (pink's frame error is the SE(3) log in the frame, whose
    Jacobian couples rotation into translation away from the target; ours is the world position error and the
    rotation log, so the two agree at zero frame error); the CoM and the posture are off theirs."""
    pin = pytest.importorskip("pinocchio")
    pink = pytest.importorskip("pink")
    from pink.tasks import ComTask as PinkComTask
    from pink.tasks import FrameTask as PinkFrameTask
    from pink.tasks import PostureTask as PinkPostureTask

    model = pin.buildModelFromUrdf(str(G1.urdf_path()), pin.JointModelFreeFlyer())
    q = problem.q_stand.clone()
    q[7:] += 0.05 * torch.randn(g1.nv - 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    configuration = pink.Configuration(model, model.createData(), q.numpy())
    state = g1.forward_kinematics(q[None])
    T_hand = g1.frame_pose(state, HAND)[0].clone()
    com = g1.center_of_mass(state)[0] + torch.tensor([0.02, -0.01, -0.03], dtype=torch.float64)
    feet = [G1.frames["left_foot"], G1.frames["right_foot"]]

    ours = [FrameTask("hand", HAND, position_cost=1.0, orientation_cost=0.2), ComTask(cost=2.0)]
    ours += [FrameTask(f, f, position_cost=10.0, orientation_cost=5.0) for f in feet]
    ours += [PostureTask(g1, cost=0.1)]
    targets = {"hand": T_hand, "com": com, "posture": problem.fixed_targets["posture"]}
    targets |= {f: g1.frame_pose(state, f)[0] for f in feet}
    damping = 1e-6
    layer = WholeBodyIKLayer(g1, [ours], [], WholeBodyIKCfg(iterations=1, damping=damping))
    step = cascade_step(g1, state, q[None], layer.levels, (), {k: v[None] for k, v in targets.items()}, damping, 30, 4)

    theirs = [PinkFrameTask(HAND, position_cost=1.0, orientation_cost=0.2), PinkComTask(cost=2.0)]
    theirs += [PinkFrameTask(f, position_cost=10.0, orientation_cost=5.0) for f in feet]
    theirs += [PinkPostureTask(cost=0.1)]
    theirs[0].set_target(pin.SE3(T_hand.numpy()))
    theirs[1].set_target(com.numpy())
    for task, f in zip(theirs[2:4], feet, strict=True):
        task.set_target(pin.SE3(targets[f].numpy()))
    theirs[4].set_target(np.concatenate(([0, 0, 0, 0, 0, 0, 1.0], problem.fixed_targets["posture"].numpy())))
    solver = "daqp" if "daqp" in __import__("qpsolvers").available_solvers else "proxqp"
    velocity = pink.solve_ik(configuration, theirs, 1.0, solver=solver, damping=damping**2, limits=[])
    np.testing.assert_allclose(step.dq[0].numpy(), velocity, atol=1e-6, rtol=1e-4)


def test_batched_equals_a_per_sample_loop(g1, problem) -> None:
    targets = hand_targets(g1, problem, OFFSETS[:3])
    batched = problem.layer.solve(targets, problem.q_stand)
    for i in range(3):
        one = problem.layer.solve({k: v[i : i + 1] if v.ndim == 3 else v for k, v in targets.items()}, problem.q_stand)
        torch.testing.assert_close(one.q[0], batched.q[i], atol=1e-9, rtol=0)


def test_float32_follows_float64(g1, problem) -> None:
    tree32 = KinematicTree.from_urdf(G1.urdf_text(), floating_base=True, dtype=torch.float32)
    problem32 = standing_problem(tree32, G1, cfg=WholeBodyIKCfg(iterations=12))
    targets = hand_targets(g1, problem, OFFSETS[:2])
    q64 = problem.layer.solve(targets, problem.q_stand).q
    q32 = problem32.layer.solve({k: v.float() for k, v in targets.items()}, problem32.q_stand).q
    torch.testing.assert_close(q32.double(), q64, atol=2e-3, rtol=0)


def test_unrolled_and_implicit_gradients_agree(g1) -> None:
    grads = {}
    for mode in ("unrolled", "implicit"):
        problem = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=20, gradient=mode))
        targets = hand_targets(g1, problem, [[0.08, -0.05, 0.05], [0.05, 0.02, -0.05]])
        hand = targets["right_hand"].clone().requires_grad_(True)
        result = problem.layer.solve({**targets, "right_hand": hand}, problem.q_stand)
        weights = torch.linspace(-1, 1, g1.nq, dtype=torch.float64)
        (result.q * weights).sum().backward()
        grads[mode] = hand.grad[:, :3, 3].clone()
    for row in range(2):
        cosine = torch.nn.functional.cosine_similarity(grads["unrolled"][row], grads["implicit"][row], dim=0)
        assert cosine > 0.99, (row, cosine, grads)


@pytest.mark.parametrize("anchors", [False, True], ids=["targets", "targets-and-anchors"])
def test_the_implicit_backward_forms_the_step_derivative_or_iterates_with_the_same_products(
    g1, monkeypatch, anchors
) -> None:
    problem = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=12, gradient="implicit"))
    targets = hand_targets(g1, problem, OFFSETS[:3])
    weights = torch.linspace(-1, 1, g1.nq, dtype=torch.float64)
    names = ["right_hand", "posture", *(("left_foot",) if anchors else ())]  # an anchor: the torch step's VJP

    def gradients() -> list[torch.Tensor]:
        leaves = {n: targets[n].clone().requires_grad_(True) for n in names}
        (problem.layer.solve({**targets, **leaves}, problem.q_stand).q * weights).sum().backward()
        return [leaves[n].grad for n in names]

    formed = gradients()  # 3 rows: M formed, the 3 rows' 105 copies in one graph
    chunked = []
    for rows_per_chunk in (2, 1):  # chunks of 2 rows then 1, and of 1 row each
        monkeypatch.setattr(layer_module, "JACOBIAN_GRAPH_ROWS", rows_per_chunk * g1.nv)
        chunked.append(gradients())
    monkeypatch.setattr(layer_module, "JACOBIAN_MAX_BATCH", 0)
    iterated = gradients()
    for i, a in enumerate(formed):
        assert a.abs().max() > 1e-3
        for b in chunked:
            torch.testing.assert_close(a, b[i], atol=1e-12, rtol=0)
        torch.testing.assert_close(a, iterated[i], atol=1e-10, rtol=0)


def test_the_implicit_backward_of_an_empty_batch_is_empty(g1) -> None:
    problem = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=2, gradient="implicit"))
    targets = hand_targets(g1, problem, OFFSETS[:1])
    hand = targets["right_hand"][:0].clone().requires_grad_(True)  # no rows; the other targets broadcast
    q = problem.layer.solve({**targets, "right_hand": hand}, problem.q_stand).q
    assert q.shape == (0, g1.nq)
    q.sum().backward()
    assert hand.grad.shape == (0, 4, 4)


def test_one_cascade_step_passes_gradcheck_wrt_the_hand_target(g1, problem) -> None:
    layer = problem.layer
    targets = hand_targets(g1, problem, [[0.05, -0.02, 0.03]])
    q = problem.q_stand[None]
    state = g1.forward_kinematics(q)

    def step(position: torch.Tensor) -> torch.Tensor:
        T = targets["right_hand"].clone()
        T = torch.cat((torch.cat((T[:, :3, :3], position[:, :, None]), -1), T[:, 3:]), -2)
        return cascade_step(
            g1, state, q, layer.levels, layer.constraints, {**targets, "right_hand": T}, layer.cfg.damping, 40, 4
        ).dq

    position = targets["right_hand"][:, :3, 3].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(step, (position,), eps=1e-6, atol=1e-5)


def test_bad_inputs_raise_typed_errors(g1, problem) -> None:
    layer = problem.layer
    targets = hand_targets(g1, problem, [[0.1, 0, 0]])
    with pytest.raises(ShapeError, match="missing"):
        layer.solve({k: v for k, v in targets.items() if k != "right_hand"}, problem.q_stand)
    with pytest.raises(ShapeError, match="unknown"):
        layer.solve({**targets, "left_hand": targets["right_hand"]}, problem.q_stand)
    with pytest.raises(ShapeError, match="right_hand"):
        layer.solve({**targets, "right_hand": torch.zeros(1, 3, dtype=torch.float64)}, problem.q_stand)
    with pytest.raises(ShapeError):
        layer.solve(targets, problem.q_stand[:10])
    with pytest.raises(FrameNotFoundError, match="right_hnd"):
        WholeBodyIKLayer(g1, [[FrameTask("hand", "right_hnd")]])
    with pytest.raises(ConfigError, match="unique"):
        WholeBodyIKLayer(g1, [[ComTask("a")], [ComTask("a")]])
    with pytest.raises(ConfigError, match="gradient"):
        WholeBodyIKCfg(gradient="adjoint")


def test_bad_step_inputs_and_transforms_raise_typed_errors(g1, problem) -> None:
    """``step`` takes a flat batch, every target with the seed's rows (no broadcast); ``solve`` and ``step`` refuse
    ``torch.func`` transforms and forward-mode AD at the entry (the QPs have no rule for them)."""
    layer = problem.layer
    flat = layer._targets(hand_targets(g1, problem, [[0.1, 0, 0], [0, 0.1, 0]]), torch.Size([2]))
    q = problem.q_stand.expand(2, -1)
    layer.step(q, flat)
    with pytest.raises(ShapeError, match="q must be"):
        layer.step(problem.q_stand, flat)
    with pytest.raises(ShapeError, match="'right_hand' must be \\(2, 4, 4\\)"):
        layer.step(q, {**flat, "right_hand": flat["right_hand"][:1]})
    with pytest.raises(ShapeError, match="'posture'"):
        layer.step(q, {k: v for k, v in flat.items() if k != "posture"})
    with pytest.raises(UnsupportedTransformError):
        torch.func.vmap(lambda row: layer.step(row[None], {k: v[:1] for k, v in flat.items()})[0])(q)
    with pytest.raises(UnsupportedTransformError), fwAD.dual_level():
        layer.solve(flat, fwAD.make_dual(q.contiguous(), torch.ones_like(q)), iterations=1)


def test_a_checkpoint_carries_the_settings_and_refuses_another_geometry(g1, problem) -> None:
    saved = problem.layer.state_dict()
    other = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=3)).layer
    other.load_state_dict(saved)
    assert other.cfg.iterations == 12
    two_hands = standing_problem(g1, G1, hands=("left_hand", "right_hand")).layer
    with pytest.raises(CheckpointMismatchError):
        two_hands.load_state_dict(saved)


def test_forward_returns_q_and_iterations_can_be_overridden_per_call(g1, problem) -> None:
    targets = hand_targets(g1, problem, OFFSETS[:2])
    torch.testing.assert_close(problem.layer(targets, problem.q_stand), problem.layer.solve(targets, problem.q_stand).q)
    short = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=3)).layer.solve(targets, problem.q_stand)
    overridden = problem.layer.solve(targets, problem.q_stand, iterations=3)
    assert torch.equal(overridden.q, short.q)
    assert not torch.equal(overridden.q, problem.layer.solve(targets, problem.q_stand).q)
    assert problem.layer.cfg.iterations == 12  # the override changes nothing of the layer
    hand = targets["right_hand"].clone().requires_grad_(True)
    implicit = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=12, gradient="implicit")).layer
    q = implicit({**targets, "right_hand": hand}, problem.q_stand, iterations=3)
    torch.testing.assert_close(q.detach(), short.q)
    q.sum().backward()
    assert hand.grad is not None and torch.isfinite(hand.grad).all()
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ConfigError, match="iterations"):
            problem.layer.solve(targets, problem.q_stand, iterations=bad)


def test_each_task_says_what_it_reads_and_when_it_succeeded(g1) -> None:
    error = torch.tensor([[0.003, 0.0, 0.0, 0.0, 0.0, 0.02], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    pose, position = FrameTask("hand", HAND), FrameTask("hand", HAND, kind="position")
    assert pose.frames == (HAND,) and position.frames == (HAND,)
    assert pose.succeeded(error, 5e-3, 1e-2).tolist() == [False, True]  # the rotation row is 0.02 rad
    assert position.succeeded(error[:, :3], 5e-3, 1e-2).tolist() == [True, True]
    assert FrameTask("hand", HAND, kind="orientation").succeeded(error[:, 3:], 5e-3, 1e-2).tolist() == [False, True]
    assert ComTask().frames == () and ComTask().succeeded(error[:, :3], 1e-3, 1.0).tolist() == [False, True]
    assert PostureTask(g1).succeeded(torch.ones(2, len(g1.joint_names)), 0.0, 0.0).all()
    with pytest.raises(FrameNotFoundError):
        WholeBodyIKLayer(g1, [[FrameTask("hand", "no_such_link")]])


def test_a_solve_prepares_the_polygon_once_and_a_loop_can_too(g1, problem) -> None:
    """``solve`` builds the support polygon once, from the contacts' anchors (the steps and the evaluation read the
    same); a step given ``prepare``'s result
    equals one that prepares it itself, bit for bit; a loop of prepared steps equals ``solve``."""
    layer = problem.layer
    targets = hand_targets(g1, problem, OFFSETS)
    flat = layer._targets(targets, torch.Size([len(OFFSETS)]))
    q = problem.q_stand.expand(len(OFFSETS), g1.nq).contiguous()
    prepared = layer.prepare(flat)
    assert set(prepared) == {"com_in_support"}
    calls = []
    polygon = next(c for c in layer.constraints if c.name == "com_in_support")
    original = polygon.prepare
    polygon.prepare = lambda *args: calls.append(1) or original(*args)
    try:
        solved = layer.solve(targets, problem.q_stand, iterations=3)
    finally:
        del polygon.prepare
    assert len(calls) == 1, "once for the steps and the evaluation after them"
    looped = q
    for _ in range(3):
        mine, theirs = layer.step(looped, flat, prepared=prepared), layer.step(looped, flat)
        assert torch.equal(mine[0], theirs[0]) and torch.equal(mine[1].dq, theirs[1].dq)
        looped = mine[0]
    assert torch.equal(looped, solved.q)
