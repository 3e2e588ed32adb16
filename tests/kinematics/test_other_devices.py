"""What a GPU run needs of the torch paths, checked on the CPU: every tensor a call makes follows its inputs' device.

Off the CPU every call runs the torch ops (the compiled kernels take CPU tensors only), and a tensor made there
without its inputs' device lands on the default device, the CPU, beside CUDA inputs: the first op that meets both
fails. Here the compiled kernels are refused and the default device is ``meta`` while the inputs are on the CPU, so
such a tensor fails the same op, with no GPU. What these calls cover: the arm's solve (both gradients), and the
whole-body step and solve (both gradients) on a layer with every kind of task and constraint, each with its backward
to the targets and the start.
"""

from __future__ import annotations

import pytest
import torch

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer
from kinematics.native import loader
from kinematics.wholebody import WholeBodyIKCfg
from tests.wholebody_support import every_kind_layer, every_kind_targets, tree_of


@pytest.fixture
def torch_paths(monkeypatch):
    """Every compiled kernel refused, as off the CPU."""
    monkeypatch.setattr(loader, "compiled", lambda *args, **kwargs: None)


def _leaves(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def _assert_on_cpu_and_finite(*tensors: torch.Tensor) -> None:
    for t in tensors:
        assert t is not None and t.device.type == "cpu" and bool(torch.isfinite(t).all())


@pytest.mark.parametrize("gradient", ["unrolled", "implicit"])
def test_the_arms_solve_and_its_gradients_make_no_tensor_off_their_inputs_device(torch_paths, panda64, gradient):
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=6, gradient=gradient))
    seed = torch.linspace(-0.4, 0.4, 7, dtype=torch.float64).expand(3, 7) + torch.tensor([[0.0], [0.1], [0.2]])
    target = panda64(seed + 0.15).detach()
    target_leaf, seed_leaf = _leaves(target, seed)
    with torch.device("meta"):
        result = ik.solve(target_leaf, seed_leaf)
        (result.position_error.square().sum() + result.rotation_error.square().sum()).backward()
    _assert_on_cpu_and_finite(result.q, target_leaf.grad, seed_leaf.grad)


@pytest.mark.parametrize("gradient", ["unrolled", "implicit"])
def test_the_wholebody_step_and_solve_and_their_gradients_make_no_tensor_off_their_inputs_device(torch_paths, gradient):
    tree = tree_of(torch.float64)
    layer = every_kind_layer(tree, WholeBodyIKCfg(iterations=2, gradient=gradient))
    targets, seed = every_kind_targets(tree, 2, seed=0)
    hand, q = _leaves(targets["right_hand"], seed)
    with torch.device("meta"):
        q_next, step = layer.step(q, layer._targets({**targets, "right_hand": hand}, torch.Size([2])))
        (q_next.sum() + step.dq.square().sum()).backward()
    _assert_on_cpu_and_finite(q_next, hand.grad, q.grad)
    hand, q = _leaves(targets["right_hand"], seed)
    with torch.device("meta"):
        result = layer.solve({**targets, "right_hand": hand}, q)
        result.q.square().sum().backward()
    _assert_on_cpu_and_finite(result.q, hand.grad, *([q.grad] if gradient == "unrolled" else []))
    if gradient == "implicit":  # the implicit adjoint differentiates the fixed point, which no start moves
        assert q.grad is None
