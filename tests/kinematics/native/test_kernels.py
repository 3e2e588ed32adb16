"""The one dispatch point (``kinematics.native.kernel``): which implementation answers a kernel call, ``torch.compile``
seeing each kernel as one custom op (forward and backward), an implementation added for a device in one place,
and the torch references equal to the compiled kernels."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, native
from kinematics.ik.fused_solve import IK_SOLVE_EVALUATE, IK_SOLVE_VJP, settings
from kinematics.model.chain import FK_JACOBIAN
from learning.benchmark.problem import NEAR_SEED, ik_problem
from learning.common.panda import franka_kinematics

needs_kernels = pytest.mark.skipif(native.library() is None, reason="no compiled kernels here")


def _recording_backend():
    """A ``torch.compile`` backend that keeps every traced graph's call targets (forward and backward graphs, via
    AOTAutograd, whose tracing runs each custom op's fake implementation) and runs the graphs eagerly."""
    targets: list[str] = []

    def record(graph_module, _example_inputs):
        targets.extend(str(node.target) for node in graph_module.graph.nodes if node.op == "call_function")
        return graph_module.forward

    return aot_autograd(fw_compiler=record, bw_compiler=record), targets


@needs_kernels
def test_torch_compile_runs_the_fused_solve_as_one_custom_op_forward_and_backward():
    torch._dynamo.reset()
    ik = DifferentiableIKLayer(franka_kinematics(dtype=torch.float64), DifferentiableIKCfg(validate_inputs=False))
    seeds, targets = ik_problem(franka_kinematics(dtype=torch.float64), 16, NEAR_SEED, seed=3)
    backend, graph_targets = _recording_backend()

    def loss(target, seed):
        result = ik.solve(target, seed)
        return result.q.square().sum() + result.position_error_norm.sum()

    compiled = torch.compile(loss, backend=backend, fullgraph=True)  # one graph: no break anywhere in the solve
    target = targets.clone().requires_grad_(True)
    value = compiled(target, seeds)
    value.backward()
    eager_target = targets.clone().requires_grad_(True)
    expected = loss(eager_target, seeds)
    expected.backward()
    torch.testing.assert_close(value, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(target.grad, eager_target.grad, rtol=0, atol=1e-10)
    assert "kinematics.ik_solve_evaluate.default" in graph_targets  # the kernel, not its torch reference
    assert "kinematics.ik_solve_vjp.default" in graph_targets
    assert "aten.sin.default" not in graph_targets  # no chain pass was traced as torch ops


@needs_kernels
def test_torch_compile_with_input_checks_still_raises_their_typed_errors():
    """With ``validate_inputs`` the compiled solve breaks its graph once, at the kernel's count of invalid rows,
    and a bad target raises the validator's own error."""
    from kinematics import InvalidTargetError

    torch._dynamo.reset()
    layer = franka_kinematics()
    ik = DifferentiableIKLayer(layer)
    seeds, targets = ik_problem(layer, 8, NEAR_SEED, seed=4)
    compiled = torch.compile(lambda t, s: ik.solve(t, s).q, backend="eager")
    torch.testing.assert_close(compiled(targets, seeds), ik.solve(targets, seeds).q, rtol=0, atol=0)
    bad = targets.clone()
    bad[3, :3, :3] *= 1.1
    with pytest.raises(InvalidTargetError, match="orthonormal"):
        compiled(bad, seeds)


def test_a_call_that_records_a_graph_or_runs_under_a_transform_takes_the_reference(monkeypatch):
    layer = franka_kinematics(dtype=torch.float64)
    local, revolute, end = layer.model.kernel_geometry(layer.tcp)
    asked = []
    monkeypatch.setitem(FK_JACOBIAN.implementations, "cpu", lambda *args: asked.append(1))  # declines
    q = torch.zeros(layer.dof, 3, dtype=torch.float64)
    FK_JACOBIAN(q, local, revolute, end, True, True)  # asked, declined: the reference answers
    FK_JACOBIAN(q.requires_grad_(True), local, revolute, end, True, True)  # never asked
    torch.func.vmap(lambda x: FK_JACOBIAN(x[:, None], local, revolute, end, True, True)[1])(q.detach().T)
    assert asked == [1]


def test_an_implementation_is_added_for_a_device_in_one_place(monkeypatch):
    """``implement`` for the tensors' device type: its answer is used, its ``None`` falls back to the reference;
    here on the meta device, where the reference (torch ops) gives the shapes."""
    layer = franka_kinematics()
    local, revolute, end = (t.to("meta") for t in layer.model.kernel_geometry(layer.tcp))
    q = torch.zeros(layer.dof, 5, device="meta")
    rot, pos, jac_t = FK_JACOBIAN(q, local, revolute, end, True, True)  # no meta implementation: the reference
    assert (rot.shape, pos.shape, jac_t.shape) == ((3, 3, 5), (3, 5), (layer.dof, 6, 5))
    answer = (
        torch.empty(3, 3, 5, device="meta"),
        torch.empty(3, 5, device="meta"),
        torch.empty(0, 6, 5, device="meta"),
    )
    monkeypatch.setitem(FK_JACOBIAN.implementations, "meta", lambda *args: answer)
    assert FK_JACOBIAN(q, local, revolute, end, True, True) is answer
    monkeypatch.setitem(FK_JACOBIAN.implementations, "meta", lambda *args: None)
    assert FK_JACOBIAN(q, local, revolute, end, True, True)[2].shape == (layer.dof, 6, 5)


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_fused_kernels_equal_their_torch_references(dtype):
    """``ik_solve_evaluate`` (every output, the iterates and the count of invalid rows) and ``ik_solve_vjp``
    (whose reference is autograd through the reference's steps) against their references on 300 rows."""
    ik = DifferentiableIKLayer(franka_kinematics(dtype=dtype))
    seeds, targets = ik_problem(franka_kinematics(dtype=dtype), 300, NEAR_SEED, seed=6)
    targets = targets.clone()
    targets[7, 0, 0] = float("nan")  # one invalid row: counted by both
    inputs, params = settings(ik, ik._kernel_inputs)
    args = (targets, seeds, inputs, 16, params, True, True)
    compiled, reference = IK_SOLVE_EVALUATE.implementations["cpu"](*args), IK_SOLVE_EVALUATE.reference(*args)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    valid = torch.arange(300) != 7
    for ours, theirs in zip(compiled[:5], reference[:5], strict=True):
        rows = valid if ours.shape[0] == 300 else slice(None)
        ours, theirs = (ours[rows], theirs[rows]) if ours.shape[0] == 300 else (ours[..., valid], theirs[..., valid])
        torch.testing.assert_close(ours.to(dtype), theirs.to(dtype), rtol=0, atol=tol)
    assert int(compiled[5]) == int(reference[5]) == 1
    gen = torch.Generator().manual_seed(1)
    grad, grad_errors = (torch.randn(300, k, generator=gen, dtype=dtype) for k in (7, 6))
    args = (compiled[4][..., valid], targets[valid], inputs, params, True, grad[valid], grad_errors[valid])
    for ours, theirs in zip(IK_SOLVE_VJP.implementations["cpu"](*args), IK_SOLVE_VJP.reference(*args), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=tol * 10 * theirs.abs().max().item())


@needs_kernels
def test_torch_func_then_plain_calls_and_torch_compile_of_torch_func():
    """A solve under ``torch.func`` leaves nothing of its transform in the layer's cached kernel inputs (a plain
    solve after it runs the kernel), and ``torch.compile`` of ``torch.func.grad`` / ``vmap`` over the solve gives
    what eager gives (the kernels' custom ops step aside for the references there)."""
    torch._dynamo.reset()
    layer = franka_kinematics(dtype=torch.float64)
    ik = DifferentiableIKLayer(layer, DifferentiableIKCfg(validate_inputs=False, iterations=4))
    seeds, targets = ik_problem(layer, 4, NEAR_SEED, seed=2)

    def loss(seed):
        return ik.solve(targets, seed).q.square().sum()

    grad = torch.func.grad(loss)(seeds)
    mapped = torch.func.vmap(lambda s: ik.solve(targets[0], s).q)(seeds)
    plain = ik.solve(targets[0].expand(4, 4, 4), seeds).q
    torch.testing.assert_close(mapped, plain, rtol=0, atol=1e-12)
    compiled_grad = torch.compile(torch.func.grad(loss), backend="eager")(seeds)
    compiled_map = torch.compile(lambda s: torch.func.vmap(lambda x: ik.solve(targets[0], x).q)(s), backend="eager")
    torch.testing.assert_close(compiled_grad, grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(compiled_map(seeds), plain, rtol=0, atol=1e-12)


def test_torch_compile_sees_the_tree_kernels_as_custom_ops():
    """The G1's frame pose, frame Jacobian and centre of mass under ``torch.compile``: one graph of the tree's
    custom ops, equal to eager."""
    import assets
    from kinematics import KinematicTree

    torch._dynamo.reset()
    tree = KinematicTree.from_urdf(assets.G1.urdf_text(), floating_base=True, dtype=torch.float64)
    q = tree.neutral().expand(5, -1).clone()
    q[:, 7:] += 0.1 * torch.randn(5, tree.nq - 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    hand = assets.G1.frames["right_hand"]

    def quantities(q):
        state = tree.forward_kinematics(q, validate=False)  # (the quaternion check reads values: a graph break)
        return tree.frame_pose(state, hand), tree.frame_jacobian(state, hand), tree.com_jacobian(state)

    backend, graph_targets = _recording_backend()
    compiled = torch.compile(quantities, backend=backend, fullgraph=True)(q)
    for got, want in zip(compiled, quantities(q), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    for name in ("tree_nodes", "tree_frames", "tree_frame_jacobian", "tree_com"):
        assert f"kinematics.{name}.default" in graph_targets
