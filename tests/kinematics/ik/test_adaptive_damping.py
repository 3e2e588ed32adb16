"""The opt-in DLS options of ``DifferentiableIKCfg`` (``residual_damping``, ``error_weights``, ``hold_joint_box``):
the defaults are untouched, the compiled solve equals the torch ops, gradients pass gradcheck, the joint box rows
the default misses are solved, and bad settings raise typed errors. The success rate and the time are measured by
the benchmark (``--suite ik``), not here."""

from __future__ import annotations

import contextlib

import pytest
import torch

from kinematics import ConfigError, DifferentiableIKCfg, DifferentiableIKLayer, native
from learning.benchmark.problem import NEAR_SEED, OPT_IN_SETTINGS, ik_problem
from learning.common.panda import franka_kinematics

OPT_IN = OPT_IN_SETTINGS


@pytest.fixture(scope="module")
def rows():
    return ik_problem(franka_kinematics(dtype=torch.float64), 1024, NEAR_SEED, seed=0)


def _solve(cfg, rows, torch_ops=False, dtype=torch.float64):
    seeds, targets = rows
    ik = DifferentiableIKLayer(franka_kinematics(dtype=dtype), cfg)
    with torch.no_grad(), native.disabled() if torch_ops else contextlib.nullcontext():
        return ik.solve(targets.to(dtype), seeds.to(dtype))


def test_the_defaults_are_the_plain_dls_step():
    assert not DifferentiableIKCfg().adaptive
    assert DifferentiableIKCfg(residual_damping=0.5).adaptive and DifferentiableIKCfg(hold_joint_box=True).adaptive
    assert DifferentiableIKCfg(error_weights=(1, 1, 1, 0.5, 0.5, 0.5)).adaptive


@pytest.mark.parametrize("weights", [(1.0,) * 6, (1.0, 1.0, 1.0, 0.3, 0.3, 0.3)], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_compiled_opt_in_step_equals_the_torch_ops(rows, weights, dtype):
    cfg = DifferentiableIKCfg(**OPT_IN, error_weights=weights)
    fused, reference = _solve(cfg, rows, dtype=dtype), _solve(cfg, rows, torch_ops=True, dtype=dtype)
    assert torch.equal(fused.success, reference.success)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(fused.q, reference.q, atol=tol, rtol=0)


def test_holding_the_joint_box_solves_the_rows_the_projection_leaves(rows):
    """At the default's 16 iterations: with the full step and the residual damping alone, every row still missed
    ends with a joint on a limit (the projection stalls it there); holding such joints solves every row."""
    default = _solve(DifferentiableIKCfg(), rows)
    projected = _solve(DifferentiableIKCfg(**{**OPT_IN, "hold_joint_box": False}), rows)
    held = _solve(DifferentiableIKCfg(**OPT_IN), rows)
    assert (~default.success).sum() >= 10 and (~projected.success).sum() >= 2
    layer = franka_kinematics(dtype=torch.float64)
    q = projected.q[~projected.success]
    assert (((q - layer.lower).abs() < 1e-9) | ((layer.upper - q).abs() < 1e-9)).any(-1).all()
    assert bool(held.success.all())


def test_the_opt_in_step_passes_gradcheck(rows):
    seeds, targets = rows
    ik = DifferentiableIKLayer(franka_kinematics(dtype=torch.float64), DifferentiableIKCfg(**OPT_IN, iterations=4))
    position = targets[:3, :3, 3].clone().requires_grad_(True)

    def solve(p):
        T = torch.cat((torch.cat((targets[:3, :3, :3], p[:, :, None]), -1), targets[:3, 3:]), -2)
        return ik.solve(T, seeds[:3]).q

    assert torch.autograd.gradcheck(solve, (position,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "bad",
    [
        {"error_weights": (1.0, 1.0, 1.0)},
        {"error_weights": (1.0, 1.0, 1.0, 0.0, 1.0, 1.0)},
        {"error_weights": (1.0, 1.0, 1.0, float("nan"), 1.0, 1.0)},
        {"residual_damping": -1.0},
        {"hold_joint_box": True, "enforce_joint_limits": False},
        {"hold_joint_box": True, "step": "qp"},
    ],
)
def test_bad_opt_in_settings_raise(bad):
    with pytest.raises(ConfigError):
        DifferentiableIKCfg(**bad)


def test_a_checkpoint_keeps_the_opt_in_settings():
    ik = DifferentiableIKLayer(
        franka_kinematics(), DifferentiableIKCfg(**OPT_IN, error_weights=(1, 1, 1, 0.5, 0.5, 0.5))
    )
    fresh = DifferentiableIKLayer(franka_kinematics())
    fresh.load_state_dict(ik.state_dict())
    assert fresh.cfg == ik.cfg and fresh.cfg.error_weights == (1.0, 1.0, 1.0, 0.5, 0.5, 0.5)
