"""The compiled chain kernel: equal to the torch pass on three robots in both dtypes, used where it should be,
and a missing compiler falls back to the torch pass with a warning."""

import pytest
import torch

from kinematics import SerialChainKinematics, native
from kinematics.batch_last import to_batch_last

ROBOTS = {
    "panda": ("panda_urdf", "panda_link0", "panda_hand_tcp"),
    "pr2 (prismatic torso)": ("pr2_urdf", "base_link", "r_gripper_tool_frame"),
    "ur5": ("ur5_urdf", "base_link", "tool0"),
}


@pytest.fixture
def fresh_native(monkeypatch):
    """Forget the loaded kernel so that a test can rebuild (or fail to build) it; restored afterwards."""
    monkeypatch.setattr(native, "_state", {})
    return native


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernel_equals_the_torch_pass(request, robot, dtype, monkeypatch):
    urdf_fixture, root, end = ROBOTS[robot]
    chain = SerialChainKinematics.from_urdf(
        request.getfixturevalue(urdf_fixture), end_link_name=end, root_link_name=root, dtype=dtype
    )
    assert native.library() is not None, "the kernel must build on this machine (a C compiler is installed)"
    gen = torch.Generator().manual_seed(7)
    q = to_batch_last(torch.rand(37, chain.dof, generator=gen, dtype=torch.float64).to(dtype) * 4 - 2, 1)
    tcp = torch.eye(4, dtype=dtype)
    tcp[:3, 3] = torch.tensor([0.01, -0.02, 0.1])
    compiled = chain.fk_and_jacobian_batch_last(q, tcp)
    monkeypatch.setattr(native, "supports", lambda q: False)
    reference = chain.fk_and_jacobian_batch_last(q, tcp)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    for got, want in zip(compiled, reference, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=tol)


def test_kernel_is_used_without_a_graph_and_never_with_one(panda_layer, monkeypatch):
    kin = panda_layer(torch.float64)
    calls = []
    original = native.fk_jacobian
    monkeypatch.setattr(native, "fk_jacobian", lambda *a: calls.append(1) or original(*a))
    q = to_batch_last(torch.zeros(3, kin.dof, dtype=torch.float64), 1)
    kin.model._batch_last_pass(q, kin.tcp, True)
    assert len(calls) == 1
    kin.model._batch_last_pass(q.clone().requires_grad_(True), kin.tcp, True)  # autograd through the torch ops
    assert len(calls) == 1


def test_disabled_kernel_runs_the_torch_pass(fresh_native, monkeypatch, panda_layer):
    monkeypatch.setenv("GRASP_YAW_IK_NATIVE", "0")
    assert fresh_native.library() is None
    kin = panda_layer(torch.float64)
    pose, jac = kin.fk_and_jacobian(torch.zeros(2, kin.dof, dtype=torch.float64))
    assert pose.shape == (2, 4, 4) and jac.shape == (2, 6, kin.dof)


def test_missing_compiler_warns_and_falls_back(fresh_native, monkeypatch, tmp_path, panda_layer):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.warns(RuntimeWarning, match="compiled chain kernel is unavailable"):
        assert fresh_native.library() is None
    kin = panda_layer(torch.float64)
    assert kin(torch.zeros(kin.dof, dtype=torch.float64)).shape == (4, 4)


def test_build_lands_atomically_in_its_cache(fresh_native, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert fresh_native.library() is not None
    built = list((tmp_path / "grasp-yaw-ik").iterdir())
    assert len(built) == 1 and built[0].name.startswith("chain-") and built[0].suffix == ".so"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dls_products_equal_their_torch_form(dtype):
    gen = torch.Generator().manual_seed(11)
    jac_t = torch.randn(7, 6, 33, generator=gen, dtype=torch.float64).to(dtype)
    constant = (0.05**2 * torch.eye(6, dtype=dtype))[..., None]
    jac = jac_t.permute(2, 1, 0)  # (B, 6, 7)
    expected = jac @ jac.mT + 0.05**2 * torch.eye(6, dtype=dtype)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(native.gram(jac_t, constant), expected, rtol=0, atol=tol)
    x = torch.randn(33, 6, generator=gen, dtype=torch.float64).to(dtype)
    torch.testing.assert_close(native.jt_x(jac_t, x), (jac.mT @ x[..., None])[..., 0].T, rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pose_error_kernel_equals_the_torch_formula(dtype, monkeypatch):
    from kinematics.batch_last import matmul
    from kinematics.pose_error import pose_error_batch_last
    from kinematics.rotations import so3_exp

    gen = torch.Generator().manual_seed(12)
    w = torch.randn(64, 3, generator=gen, dtype=torch.float64)
    w[:8] *= 1e-7  # below the small-sine threshold
    w[8:24] *= (torch.pi - 0.1 * torch.rand(16, 1, generator=gen, dtype=torch.float64)) / w[8:24].norm(
        dim=-1, keepdim=True
    )
    reached = so3_exp(torch.randn(64, 3, generator=gen, dtype=torch.float64)).permute(1, 2, 0)
    target = matmul(so3_exp(w).permute(1, 2, 0).contiguous(), reached)
    args = [
        t.to(dtype).contiguous()
        for t in (
            target,
            torch.randn(3, 64, generator=gen, dtype=torch.float64),
            reached,
            torch.randn(3, 64, generator=gen, dtype=torch.float64),
        )
    ]
    compiled = torch.cat(pose_error_batch_last(*args))
    monkeypatch.setattr(native, "supports", lambda q: False)
    reference = torch.cat(pose_error_batch_last(*args))
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(compiled, reference, rtol=0, atol=tol)


def test_mixed_dtypes_never_reach_the_kernel(panda_layer):
    kin = panda_layer(torch.float32)
    q = to_batch_last(torch.zeros(2, kin.dof, dtype=torch.float64), 1)
    assert native.fk_jacobian(q, torch.zeros(kin.dof, 4, 3, 4), kin.model.revolute_mask, torch.zeros(3, 4)) is None
    assert native.jt_x(torch.zeros(7, 6, 2), torch.zeros(2, 6, dtype=torch.float64)) is None
