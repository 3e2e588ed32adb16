"""The one dispatch point between the layers and their kernels.

Every operation that has a compiled implementation is a ``Kernel``: a name, a schema, a torch reference (plain
torch ops, on every device and dtype, with autograd, ``torch.func`` and forward-mode AD) and, per device type, the
implementations that are faster there (today the CPU's ``kinematics.native`` kernels). Callers call the kernel;
they never see which implementation ran. A new kernel, or a GPU one, is added in one place: ``implement``.

Which implementation runs, decided here and nowhere else:

- under forward-mode AD or a ``torch.func`` transform, or while autograd records a graph through a tensor
  argument: the reference (the compiled kernels have no tangents, batching rules or backward of their own; the
  layers' autograd Functions call kernels inside their forward and backward, where nothing is recorded);
- while ``torch.compile`` traces: the kernel's ``torch.library`` custom op (``kinematics::<name>``), one opaque
  node whose shapes come from the reference run on fake tensors; the compiled graph calls the implementations
  below at run time;
- otherwise the device's implementation, which may decline (``None``: another dtype, a shape it does not read, no
  compiler), and then the reference.

Eager calls do not go through the custom op: its dispatcher costs about 50 us per call, a third of a whole
batch-1 solve. The two paths run the same functions.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._C import _functorch

from kinematics.batch_last import transforms_active

NAMESPACE = "kinematics"


def _tensors(args: tuple) -> list[torch.Tensor]:
    found = []
    for a in args:
        if isinstance(a, torch.Tensor):
            found.append(a)
        elif isinstance(a, (tuple, list)):
            found.extend(t for t in a if isinstance(t, torch.Tensor))
    return found


def _contiguous(out):
    """The custom op's outputs: contiguous (the layout its fake promises), none an input or a view of one."""
    if isinstance(out, torch.Tensor):
        return out.contiguous().clone() if out._base is not None else out.contiguous()
    return tuple(_contiguous(t) for t in out)


def _device_type(args: tuple) -> str:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device.type
        if isinstance(a, (tuple, list)) and a and isinstance(a[0], torch.Tensor):
            return a[0].device.type
    return "cpu"


class Kernel:
    """One operation: ``reference(*args)`` defines it; ``implement(device_type, fn)`` adds a faster ``fn`` that
    returns the same outputs or ``None`` to decline. ``schema`` is the ``torch.library`` schema of the arguments
    and outputs (tuples of tensors are ``Tensor[]``). ``fake`` gives the outputs' shapes to ``torch.compile``
    where the reference cannot run on fake tensors (it calls autograd, say); by default the reference does."""

    def __init__(self, name: str, schema: str, reference: Callable, fake: Callable | None = None) -> None:
        self.name = name
        self.reference = reference
        self.implementations: dict[str, Callable] = {}  # device type -> implementation (``implement``)
        self.op = torch.library.custom_op(
            f"{NAMESPACE}::{name}", lambda *args: _contiguous(self._run(*args)), mutates_args=(), schema=schema
        )
        self.op.register_fake(lambda *args: _contiguous((fake or reference)(*args)))

    def implement(self, device_type: str, function: Callable) -> Callable:
        """Run ``function(*args)`` for arguments on ``device_type`` (``"cpu"``, ``"cuda"``, ...) before the
        reference; it returns the reference's outputs (equal to its tolerance) or ``None`` where it does not
        apply."""
        self.implementations[device_type] = function
        return function

    def implemented(self, *args) -> bool:
        """Whether an implementation other than the reference would take ``args`` (by its ``accepts``
        attribute: a check of metadata only, which needs no data and works on fake tensors)."""
        accepts = getattr(self.implementations.get(_device_type(args)), "accepts", None)
        return accepts is not None and accepts(*args)

    def __call__(self, *args):
        tensors = _tensors(args)
        recorded = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if torch.compiler.is_compiling():  # dynamo traces torch.func transforms itself; the op has no vmap rule
            batched = any(_functorch.is_batchedtensor(t) for t in tensors)
            return self.reference(*args) if recorded or batched else self.op(*args)
        if recorded or transforms_active():
            return self.reference(*args)
        return self._run(*args)

    def _run(self, *args):
        implementation = self.implementations.get(_device_type(args))
        out = None if implementation is None else implementation(*args)
        return self.reference(*args) if out is None else out

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, implemented on {sorted(self.implementations) or 'no device'})"
