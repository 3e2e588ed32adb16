"""What the tests of the row-parallel kernels share: the same computation on one thread and on two."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def assert_one_thread_gives_two_threads_bits(compute: Callable[[], Sequence[torch.Tensor]]) -> None:
    """``compute()`` on one thread (torch's intra-op threads size the kernels' OpenMP teams; a team of one runs
    outside any parallel region), then on two: every tensor it returns equal bit for bit. The thread count is put
    back after."""
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = compute()
        torch.set_num_threads(2)
        two = compute()
    finally:
        torch.set_num_threads(previous)
    for a, b in zip(one, two, strict=True):
        assert torch.equal(a, b)
