"""The fused DLS solve (``kinematics.ik.fused_solve``): every iteration of ``step="clamp"`` in one compiled call,
forward and backward, against the torch ops it replaces (``native.disabled()``), gradcheck through it, and the
cases that must take the torch ops instead."""

from __future__ import annotations

import contextlib

import pytest
import torch
from threads_support import assert_one_thread_gives_two_threads_bits

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer, SerialChainKinematics, native
from kinematics.ik.fused_solve import IK_SOLVE, IK_SOLVE_EVALUATE, IK_SOLVE_VJP
from kinematics.native import fused_ik
from learning.benchmark.problem import DISTANT_SEED, NEAR_SEED, ik_problem
from learning.common.panda import franka_kinematics

pytestmark = pytest.mark.skipif(native.library() is None, reason="no compiled kernels here")


@pytest.fixture(scope="module")
def rows():
    """The IK benchmark's two kinds of joint-box rows (float64), 1000 of each: not a multiple of the tile."""
    layer64 = franka_kinematics(dtype=torch.float64)
    return {kind: ik_problem(layer64, 1000, kind, seed=5) for kind in (NEAR_SEED, DISTANT_SEED)}


def _count_calls(monkeypatch, *kernels) -> list:
    """Calls of the kernels' CPU implementations that ran (did not decline)."""
    calls = []
    for kernel in kernels:

        def run(*args, _implementation=kernel.implementations["cpu"], _name=kernel.name):
            out = _implementation(*args)
            calls.extend([] if out is None else [_name])
            return out

        monkeypatch.setitem(kernel.implementations, "cpu", run)
    return calls


def _count_kernel_calls(monkeypatch) -> list:
    """Calls of either fused forward kernel that ran (the no-graph solve takes ``ik_solve_evaluate``)."""
    return _count_calls(monkeypatch, IK_SOLVE, IK_SOLVE_EVALUATE)


def _solve(dtype, seeds, targets, torch_ops: bool, cfg=None):
    ik = DifferentiableIKLayer(franka_kinematics(dtype=dtype), cfg)
    with torch.no_grad(), native.disabled() if torch_ops else contextlib.nullcontext():
        return ik.solve(targets.to(dtype), seeds.to(dtype))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_fused_solve_equals_the_torch_ops(rows, dtype, threads, monkeypatch):
    """Converging rows to 1e-5 (float32) / 1e-10 (float64); the distant-seed rows, most of which fail, to 1e-9 in
    float64 with the same success flags in both dtypes. (In float32 a failed row's iterates are chaotic: the torch
    ops themselves move by up to 0.14 rad on a quarter of those rows when the seeds change by 1e-7.)"""
    calls = _count_kernel_calls(monkeypatch)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for kind, (seeds, targets) in rows.items():
            fused = _solve(dtype, seeds, targets, torch_ops=False)
            reference = _solve(dtype, seeds, targets, torch_ops=True)
            assert torch.equal(fused.success, reference.success)
            assert torch.equal(fused.within_limits, reference.within_limits)
            if kind == NEAR_SEED or dtype == torch.float64:
                tol = {NEAR_SEED: 1e-5, DISTANT_SEED: None}[kind] if dtype == torch.float32 else None
                tol = tol if tol is not None else (1e-10 if kind == NEAR_SEED else 1e-9)
                torch.testing.assert_close(fused.q, reference.q, atol=tol, rtol=0)
                for name in ("position_error", "rotation_error", "position_error_norm", "rotation_error_norm"):
                    torch.testing.assert_close(getattr(fused, name), getattr(reference, name), atol=tol, rtol=0)
    finally:
        torch.set_num_threads(previous)
    assert calls, "the fused kernel ran"


def test_the_fused_backward_equals_the_torch_ops_and_passes_gradcheck(rows, monkeypatch):
    calls = _count_calls(monkeypatch, IK_SOLVE_VJP)
    ik = DifferentiableIKLayer(franka_kinematics(dtype=torch.float64))
    weights = torch.randn(256, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for seeds, targets in rows.values():

        def gradients(torch_ops: bool, seeds=seeds[:256], targets=targets[:256]):
            target, seed = targets.clone().requires_grad_(True), seeds.clone().requires_grad_(True)
            with native.disabled() if torch_ops else contextlib.nullcontext():
                result = ik.solve(target, seed)
                ((result.q * weights).sum() + result.position_error_norm.sum()).backward()
            return target.grad, seed.grad

        for ours, theirs in zip(gradients(False), gradients(True), strict=True):
            torch.testing.assert_close(ours, theirs, atol=1e-8 * theirs.abs().max().item(), rtol=0)
    short = DifferentiableIKLayer(franka_kinematics(dtype=torch.float64), DifferentiableIKCfg(iterations=5))
    seeds, targets = rows[NEAR_SEED][0][:3], rows[NEAR_SEED][1][:3]

    def solve(position, rotation_vector, seed):
        from kinematics.lie.rotations import so3_exp

        T = targets.clone()
        T = torch.cat((torch.cat((so3_exp(rotation_vector) @ T[:, :3, :3], position[:, :, None]), -1), T[:, 3:]), -2)
        return short.solve(T, seed).q

    inputs = (targets[:, :3, 3].clone(), torch.full((3, 3), 1e-3, dtype=torch.float64), seeds.clone())
    assert torch.autograd.gradcheck(solve, tuple(t.requires_grad_(True) for t in inputs), eps=1e-6, atol=1e-6)
    assert calls, "the fused backward ran"


def test_a_singular_system_gives_non_finite_values_not_an_error(rows):
    """``damping=0`` at a stretched, singular configuration: J J^T is singular; both paths return without an
    error, and the rows they make non-finite are the same."""
    seeds, targets = rows[NEAR_SEED]
    seeds = seeds[:64].clone()
    seeds[:8] = 0.0  # the Panda with every joint at 0 is outside its limits; the projection puts it on them
    cfg = DifferentiableIKCfg(damping=0.0, enforce_joint_limits=False)
    fused = _solve(torch.float64, seeds, targets[:64], torch_ops=False, cfg=cfg)
    reference = _solve(torch.float64, seeds, targets[:64], torch_ops=True, cfg=cfg)
    assert torch.equal(torch.isfinite(fused.q).all(-1), torch.isfinite(reference.q).all(-1))


def test_what_the_kernel_cannot_do_runs_the_torch_ops(rows, pr2_urdf, monkeypatch):
    """A chain with a prismatic joint under autograd, a TCP that requires a gradient, ``torch.func``: the torch
    ops, with their gradients."""
    calls = _count_kernel_calls(monkeypatch)
    chain = SerialChainKinematics.from_urdf(pr2_urdf, end_link_name="r_gripper_palm_link", root_link_name="base_link")
    assert not chain.all_revolute
    ik = DifferentiableIKLayer(KinematicsLayer(chain), DifferentiableIKCfg(iterations=3))
    seed = ik.kinematics.default_seed().expand(2, -1).clone().requires_grad_(True)
    target = ik.kinematics(seed.detach() + 0.05)
    ik.solve(target, seed).q.sum().backward()
    assert seed.grad is not None and not calls
    with torch.no_grad():
        ik.solve(target, seed)
    assert calls, "without a graph the prismatic chain takes the kernel"
    calls.clear()
    layer = franka_kinematics(dtype=torch.float64)
    layer.tcp.requires_grad_(True)
    seeds, targets = rows[NEAR_SEED]
    DifferentiableIKLayer(layer).solve(targets[:4], seeds[:4]).q.sum().backward()
    assert layer.tcp.grad is not None and not calls
    ik = DifferentiableIKLayer(franka_kinematics(dtype=torch.float64))
    jac = torch.func.jacrev(lambda s: ik.solve(targets[0], s).q)(seeds[0])
    assert jac.shape == (7, 7) and not calls


@pytest.mark.parametrize("offset", [0.0, 2.0e5], ids=["reduced", "libm"])
def test_the_kernels_sine_equals_torchs_for_small_and_huge_angles(rows, offset):
    """Unprojected seeds (no joint limits) near 0 rad and near 2e5 rad: the vectorised reduction and, beyond 1e5,
    the C library's sin and cos give the torch ops' iterates."""
    seeds, targets = rows[NEAR_SEED]
    cfg = DifferentiableIKCfg(enforce_joint_limits=False, iterations=4)
    seeds = seeds[:70] + offset
    fused = _solve(torch.float64, seeds, targets[:70], torch_ops=False, cfg=cfg)
    reference = _solve(torch.float64, seeds, targets[:70], torch_ops=True, cfg=cfg)
    torch.testing.assert_close(fused.q, reference.q, atol=1e-9, rtol=0)


def test_another_default_device_leaves_the_fused_solve_on_the_cpu(rows, monkeypatch):
    """The kernel's settings and its count of invalid rows were made on the default device: under
    ``torch.set_default_device`` (``meta`` here, the stand-in for ``cuda``) the kernel read a settings array it could
    not (a segmentation fault). The fused solve answers as under the CPU's default."""
    calls = _count_kernel_calls(monkeypatch)
    seeds, targets = rows[NEAR_SEED][0][:8], rows[NEAR_SEED][1][:8]
    ik = DifferentiableIKLayer(franka_kinematics(dtype=torch.float64))
    fused_ik._SETTINGS.clear()  # the settings' tensor is cached: made again under the meta device
    expected = ik.solve(targets, seeds)
    fused_ik._SETTINGS.clear()
    with torch.device("meta"):
        found = ik.solve(targets, seeds)
    assert found.q.device.type == "cpu" and torch.equal(found.q, expected.q) and len(calls) == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_thread_and_two_give_the_same_bits(rows, dtype, monkeypatch):
    """One thread runs the fused solve's rows outside any OpenMP region, in code compiled apart from the region's:
    the solve and its gradient to the targets on one thread equal two threads' bit for bit."""
    calls = _count_calls(monkeypatch, IK_SOLVE_VJP)  # wrapped, the forward's kernel would not be taken
    seeds, targets = (t[:200].to(dtype) for t in rows[NEAR_SEED])
    ik = DifferentiableIKLayer(franka_kinematics(dtype=dtype))

    def solve():
        target = targets.clone().requires_grad_(True)
        q = ik.solve(target, seeds).q
        (grad,) = torch.autograd.grad((q * torch.linspace(-1, 1, q.shape[-1], dtype=dtype)).sum(), target)
        return q, grad

    assert_one_thread_gives_two_threads_bits(solve)
    assert calls == [IK_SOLVE_VJP.name] * 2  # the fused backward, after the fused forward that kept its iterates
