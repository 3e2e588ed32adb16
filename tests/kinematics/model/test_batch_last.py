"""The batch-last helpers: layout round trips, products against torch.matmul, and their hand-written backward."""

import torch

from kinematics.batch_last import cross, from_batch_last, gram, matmul, matmul_constant, to_batch_last

F64 = torch.float64


def test_layout_round_trip_keeps_leading_dimensions():
    x = torch.randn(2, 5, 3, 4, dtype=F64)
    last = to_batch_last(x, 2)
    assert last.shape == (3, 4, 10) and last.is_contiguous()
    torch.testing.assert_close(last[:, :, 7], x.reshape(10, 3, 4)[7], rtol=0, atol=0)
    torch.testing.assert_close(from_batch_last(last, (2, 5)), x, rtol=0, atol=0)
    assert from_batch_last(to_batch_last(torch.randn(3, dtype=F64), 1), ()).shape == (3,)


def test_products_match_torch_matmul_including_transposed_views():
    a, b = torch.randn(3, 4, 9, dtype=F64), torch.randn(4, 5, 9, dtype=F64)
    expected = (a.permute(2, 0, 1) @ b.permute(2, 0, 1)).permute(1, 2, 0)
    torch.testing.assert_close(matmul(a, b), expected)
    c = torch.randn(5, 4, 9, dtype=F64)  # c^T as a strided view
    torch.testing.assert_close(matmul(a, c.transpose(0, 1)), (a.permute(2, 0, 1) @ c.permute(2, 1, 0)).permute(1, 2, 0))
    m = torch.randn(4, 2, dtype=F64)
    torch.testing.assert_close(matmul_constant(a, m), (a.permute(2, 0, 1) @ m).permute(1, 2, 0))


def test_gram_and_cross_match_their_definitions():
    rows = torch.randn(7, 6, 5, dtype=F64)
    constant = 0.1 * torch.eye(6, dtype=F64)[..., None]
    jac = rows.permute(2, 1, 0)  # (B, 6, 7)
    expected = jac @ jac.mT + 0.1 * torch.eye(6, dtype=F64)
    torch.testing.assert_close(gram(rows, constant), expected.permute(1, 2, 0))
    a, b = torch.randn(4, 3, 5, dtype=F64), torch.randn(4, 3, 5, dtype=F64)
    torch.testing.assert_close(cross(a, b), torch.linalg.cross(a, b, dim=1))


def test_hand_written_backward_passes_gradcheck():
    a = torch.randn(3, 3, 4, dtype=F64, requires_grad=True)
    b = torch.randn(3, 5, 4, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(matmul, (a, b))
    assert torch.autograd.gradcheck(lambda x: matmul(x, b.detach().transpose(0, 1)[:3]), (a,))
