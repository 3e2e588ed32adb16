"""Seeded random inputs for every public kinematics function and the batch-last functions behind the compiled
kernels: random leading shapes, broadcasts, strided, offset, transposed, expanded (stride-0) and negative-view
memory, other dtypes, meta and fake tensors, forward-mode dual tensors and ``vmap``, with and without autograd.

Each case runs twice, with the kernels and inside ``native.disabled()``. Both runs must give the same outputs and
gradients (shape, dtype, device and values) or raise the same error, and a public function may only raise a
``ProjectError`` subclass. A crash, an untyped error from a public function or a silently different answer fails.
"""

from __future__ import annotations

import copy
import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch._subclasses.fake_tensor import FakeTensorMode
from wholebody_support import every_kind_layer, every_kind_targets, tree_of

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer, ProjectError, native, pose_error
from kinematics.batch_last import to_batch_last
from kinematics.ik.dls_step import DAMPED_GRAM, TRANSPOSED_PRODUCT, dls_step
from kinematics.lie.pose_error import pose_error_batch_last
from kinematics.native import loader

F32, F64 = torch.float32, torch.float64
CASES = 600
SEED = 20240601
OTHER_DTYPES = (torch.float16, torch.bfloat16, torch.int64)


@dataclass
class Case:
    """``fn(*inputs)`` -> a list of tensors (or ``None``) under ``mode``: "plain" (gradients to the inputs that
    require one are compared too), "dual" (forward-mode tangents of the first input), "fake" or "vmap"."""

    label: str
    fn: Callable[..., list]
    inputs: list[torch.Tensor | None]
    public: bool
    mode: str = "plain"
    tolerance: float = 0.0  # at least this relative and absolute (times the values' size) difference is allowed


def _weights(t: torch.Tensor) -> torch.Tensor:
    """A fixed cotangent or tangent, the same on both paths."""
    return torch.cos(torch.arange(t.numel(), dtype=F64)).reshape(t.shape).to(t.dtype)


def _run(case: Case) -> list:
    if case.mode == "dual":
        with fwAD.dual_level():
            first = case.inputs[0]
            # make_dual copies the tangent into the primal's layout, which a stride-0 primal cannot hold.
            dual = fwAD.make_dual(first.detach().contiguous(), _weights(first))
            outputs = case.fn(dual, *case.inputs[1:])
            unpacked = [fwAD.unpack_dual(o) if o is not None else (None, None) for o in outputs]
            return [t for pair in unpacked for t in pair]
    if case.mode == "fake":
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fakes = [x if x is None else mode.from_tensor(x) for x in case.inputs]
            outputs = case.fn(*fakes)
            return [None if o is None else (tuple(o.shape), o.dtype, o.device.type) for o in outputs]
    if case.mode == "vmap":
        in_dims = (0, *[None] * (len(case.inputs) - 1))
        mapped = torch.func.vmap(lambda *a: tuple(o for o in case.fn(*a) if o is not None), in_dims=in_dims)
        return list(mapped(*case.inputs))
    outputs = list(case.fn(*case.inputs))
    leaves = [x for x in case.inputs if x is not None and x.requires_grad]
    tracked = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    if leaves and tracked:
        loss = sum((o * _weights(o)).sum() for o in tracked)
        outputs += torch.autograd.grad(loss, leaves, allow_unused=True)
    return outputs


def _outcome(case: Case) -> tuple[str, object]:
    try:
        return "value", _run(case)
    except ProjectError as exc:
        return "project error", type(exc)
    except Exception as exc:  # compared between the paths; a public function may not get here
        if case.public:
            raise AssertionError(f"{case.label}: untyped {type(exc).__name__}: {exc}") from exc
        return "torch error", type(exc)


_TOLERANCE = {F64: 1e-9, F32: 1e-3}


def _floating(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _assert_same(case: Case, got: tuple[str, object], want: tuple[str, object]) -> None:
    assert got[0] == want[0], f"{case.label}: {got} with the kernels, {want} without"
    if got[0] != "value":
        assert got[1] is want[1], f"{case.label}: {got[1]} with the kernels, {want[1]} without"
        return
    assert len(got[1]) == len(want[1]), case.label
    for a, b in zip(got[1], want[1], strict=True):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            assert a == b, f"{case.label}: {a} != {b}"
            continue
        assert (a.shape, a.dtype, a.device) == (b.shape, b.dtype, b.device), f"{case.label}: {a.shape} {b.shape}"
        if a.device.type == "meta":
            continue
        if a.dtype == torch.bool:
            assert torch.equal(a, b), case.label
            continue
        # At the least precise input's tolerance: float32 rounding differs between the two paths and grows through
        # IK iterations and their gradients; a kernel reading the wrong memory is off by the values' own size.
        tol = max([case.tolerance, *(_TOLERANCE.get(x.dtype, 1e-2) for x in (a, *case.inputs) if _floating(x))])
        scale = max(1.0, float(b.detach().abs().nan_to_num(0.0, 0.0, 0.0).amax())) if b.numel() else 1.0
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * scale, equal_nan=True, msg=lambda m: f"{case.label}: {m}")


class Cases:
    """Draws cases from one seeded generator over the shared Panda and PR2 layers (never mutated)."""

    def __init__(self, seed: int, layers: dict) -> None:
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.layers = layers

    # Inputs.

    def pick_layer(self, notes: list[str]) -> KinematicsLayer:
        name = self.rng.choice(["panda32", "panda64", "panda64", "pr2-32", "pr2-64"])
        notes.append(name)
        self.reference = self.layers[name.replace("32", "64")]  # float64 poses and Jacobians to start from
        return self.layers[name]

    def batch(self) -> tuple[int, ...]:
        return self.rng.choice([(), (1,), (2,), (5,), (33,), (0,), (3, 4), (2, 1, 3)])

    def partner(self, batch: tuple[int, ...], notes: list[str]) -> tuple[int, ...]:
        """A batch shape that broadcasts with ``batch`` (ones in some places, fewer dimensions), rarely one that
        does not."""
        r = self.rng.random()
        if r < 0.03 and batch and batch[-1] > 1:
            notes.append("non-broadcasting batch")
            return (*batch[:-1], batch[-1] + 1)
        if r < 0.3:
            return tuple(1 if self.rng.random() < 0.5 else b for b in batch)
        if r < 0.45 and batch:
            return batch[self.rng.randrange(len(batch) + 1) :]
        return batch

    def configs(self, kin: KinematicsLayer, batch: tuple[int, ...]) -> torch.Tensor:
        u = torch.rand(*batch, kin.dof, generator=self.gen, dtype=F64)
        lo, hi = kin.lower.to(F64).clamp(-2.5, 2.5), kin.upper.to(F64).clamp(-2.5, 2.5)
        return lo + (0.1 + 0.8 * u) * (hi - lo)

    def poses(self, kin: KinematicsLayer, batch: tuple[int, ...]) -> torch.Tensor:
        with native.disabled():
            return self.reference(self.configs(kin, batch))

    def prepare(
        self,
        x: torch.Tensor,
        name: str,
        dtype: torch.dtype,
        notes: list[str],
        event_dims: int | None,
        grad: bool = True,
        batch: int = 1,
    ) -> torch.Tensor:
        """``x`` in ``dtype`` (rarely another), sometimes a stride-0 view, in a random memory layout, sometimes
        requiring a gradient. Batch first (``event_dims`` trailing axes): a leading axis of size 1 may be
        expanded to 4; batch-last (``event_dims=None``): a batch axis of size 1 may be expanded to ``batch``."""
        if self.rng.random() < 0.1:
            dtype = self.rng.choice([*OTHER_DTYPES, F64 if dtype == F32 else F32])
            notes.append(f"{name} {dtype}")
        x = x.to(dtype)
        shape = list(x.shape)
        leading = [k for k in range(x.ndim - event_dims) if x.shape[k] == 1] if event_dims is not None else []
        if event_dims is None and x.shape[-1] == 1 and batch > 1:
            leading = [x.ndim - 1]
        if leading and self.rng.random() < 0.4:
            shape[self.rng.choice(leading)] = batch if event_dims is None else 4
            x = x.expand(*shape)
            notes.append(f"{name} expanded")
        kind = self.rng.choice(["contiguous", "contiguous", "strided", "offset", "transposed", "negative"])
        if x.ndim == 0 or x.numel() == 0:
            kind = "contiguous"
        if kind == "strided":
            wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
            wide[..., ::2] = x
            x = wide[..., ::2]
        elif kind == "offset":
            flat = torch.zeros(x.numel() + 3, dtype=x.dtype)
            flat[3:] = x.reshape(-1)
            x = flat[3:].view(x.shape)
        elif kind == "transposed" and x.ndim >= 2:
            x = x.mT.contiguous().mT
        elif kind == "negative" and x.is_floating_point():
            x = torch._neg_view(-x)
        notes.append(f"{name} {kind}")
        if grad and x.is_floating_point() and self.rng.random() < 0.35:
            notes.append(f"{name} requires grad")
            x = x.detach().requires_grad_(True)
        return x

    def tcp(self, dtype: torch.dtype, notes: list[str]) -> torch.Tensor | None:
        r = self.rng.random()
        if r < 0.4:
            return None
        tcp = torch.eye(4, dtype=F64)
        tcp[:3, 3] = torch.tensor([0.01, -0.02, 0.1])
        if r > 0.97:
            notes.append("tcp batched")
            tcp = tcp.expand(2, 4, 4)
        return self.prepare(tcp, "tcp", dtype, notes, 2, grad=False)

    def mode(self, notes: list[str], allowed: tuple[str, ...]) -> str:
        r = self.rng.random()
        mode = "dual" if r < 0.08 else "fake" if r < 0.13 else "vmap" if r < 0.18 else "plain"
        mode = mode if mode in allowed else "plain"
        if mode != "plain":
            notes.append(mode)
        return mode

    # Cases, one per function.

    def draw(self) -> Case:
        kind = self.rng.choice(["chain", "chain", "layer", "pose_error", "pose_error", "ik", "fk_bl", "pe_bl", "dls"])
        return getattr(self, kind)()

    def _chain(self, batch_last: bool) -> Case:
        notes: list[str] = []
        kin = self.pick_layer(notes)
        model, dtype = kin.model, kin.dtype
        batch = self.batch()
        q = self.configs(kin, batch)
        if self.rng.random() < 0.05:
            q = q[..., :1]
            notes.append("wrong dof")
        if self.rng.random() < 0.05 and q.numel():
            q = q.contiguous()
            q.view(-1)[0] = math.nan
            notes.append("nan")
        meta = self.rng.random() < 0.06
        q = self.prepare(to_batch_last(q, 1) if batch_last else q, "q", dtype, notes, None if batch_last else 1)
        q = q.detach() if meta else q
        tcp = self.tcp(dtype, notes)
        if meta:
            notes.append("meta")
            model = copy.deepcopy(model).to("meta")
            q, tcp = q.to("meta"), None if tcp is None else tcp.to("meta")
        with_jacobian = self.rng.random() < 0.8
        method = functools.partial(model.fk_and_jacobian, batch_last=batch_last)
        modes = ("plain", "dual", "fake") if batch_last else ("plain", "dual", "fake", "vmap")
        mode = self.mode(notes, modes if batch and q.is_floating_point() and not meta else ("plain",))
        name = "fk_and_jacobian(batch_last=True)" if batch_last else "fk_and_jacobian"
        return Case(f"{name} {notes}", lambda q, tcp: list(method(q, tcp, with_jacobian)), [q, tcp], True, mode)

    def chain(self) -> Case:
        return self._chain(batch_last=False)

    def fk_bl(self) -> Case:
        return self._chain(batch_last=True)

    def layer(self) -> Case:
        notes: list[str] = []
        kin = self.pick_layer(notes)
        batch = self.batch()
        q = self.configs(kin, batch)
        if self.rng.random() < 0.05:
            q = q[..., :-1]
            notes.append("wrong dof")
        if self.rng.random() < 0.05 and q.numel():
            q = q.contiguous()
            q.view(-1)[-1] = math.inf
            notes.append("inf")
        q = self.prepare(q, "q", kin.dtype, notes, 1)
        method = self.rng.choice(["forward", "fk_and_jacobian", "jacobian"])
        fn = getattr(kin, method)
        mode = self.mode(notes, ("plain", "dual") if q.is_floating_point() else ("plain",))
        return Case(f"KinematicsLayer.{method} {notes}", lambda q: list(_tuple(fn(q))), [q], True, mode)

    def pose_error(self) -> Case:
        notes: list[str] = []
        kin = self.pick_layer(notes)
        batch = self.batch()
        target = self.prepare(self.poses(kin, batch), "target", kin.dtype, notes, 2)
        reached = self.prepare(self.poses(kin, self.partner(batch, notes)), "reached", kin.dtype, notes, 2)
        if self.rng.random() < 0.04:
            reached = reached[..., :3, :]
            notes.append("reached 3x4")
        if self.rng.random() < 0.05:
            notes.append("meta")
            target, reached = target.detach().to("meta"), reached.detach().to("meta")
        ok = target.is_floating_point() and target.ndim > 2 and target.device.type != "meta"
        mode = self.mode(notes, ("plain", "dual", "fake", "vmap") if ok else ("plain",))
        return Case(f"pose_error {notes}", lambda t, r: list(pose_error(t, r)), [target, reached], True, mode)

    def ik(self) -> Case:
        notes: list[str] = []
        kin = self.pick_layer(notes)
        cfg = DifferentiableIKCfg(
            iterations=self.rng.choice([0, 1, 2, 3]),
            step=self.rng.choice(["clamp", "clamp", "qp"]),
            # float32 implicit gradients solve a system regularised by 1e-9: the paths' rounding decides NaN or not.
            gradient=self.rng.choice(["unrolled", "unrolled", "implicit"]) if kin.dtype == F64 else "unrolled",
            enforce_joint_limits=self.rng.random() < 0.8,
        )
        notes.append(f"{cfg.iterations} it {cfg.step} {cfg.gradient} limits={cfg.enforce_joint_limits}")
        solver = DifferentiableIKLayer(kin, cfg)
        batch = self.batch()
        target = self.prepare(self.poses(kin, batch).to(kin.dtype), "target", kin.dtype, notes, 2)
        r = self.rng.random()
        if r < 0.25:
            seed = None
        else:
            seed = self.prepare(
                self.configs(kin, self.partner(batch, notes) if r < 0.7 else ()), "seed", kin.dtype, notes, 1
            )
            try:
                torch.broadcast_shapes(target.shape[:-2], seed.shape[:-1])
            except RuntimeError:  # the solve's own broadcast raises torch's error, not a typed one: not drawn
                seed = None
                notes.append("seed dropped: batches do not broadcast")
        # Forward-mode AD through the implicit gradient is unsupported (test_native: the typed refusal).
        ok = target.is_floating_point() and (seed is None or seed.is_floating_point()) and cfg.gradient == "unrolled"
        mode = self.mode(notes, ("plain", "dual") if ok else ("plain",))

        def solve(target, seed):
            result = solver.solve(target, seed)
            return [result.q, result.position_error, result.rotation_error, result.within_limits]

        # The implicit gradient solves J_F J_F^T + 1e-9 I: rounding differences of the paths' iterates grow ~1e7.
        tolerance = 1e-6 if cfg.gradient == "implicit" else 0.0
        return Case(f"DifferentiableIKLayer.solve {notes}", solve, [target, seed], True, mode, tolerance)

    def pe_bl(self) -> Case:
        notes: list[str] = []
        kin = self.pick_layer(notes)
        n = self.rng.choice([1, 2, 7, 64])
        tensors = []
        for name in ("target", "reached"):
            poses = self.poses(kin, (n if self.rng.random() < 0.75 else 1,))
            if poses.shape[0] != n:
                notes.append(f"{name} batch 1")
            tensors += [to_batch_last(poses[..., :3, :3], 2), to_batch_last(poses[..., :3, 3], 1)]
        if self.rng.random() < 0.3:  # the regression case: a (3, 3, 1) target rotation against a full batch
            tensors[0] = tensors[0][..., :1]
            notes.append("target_rot (3, 3, 1)")
        names = ("target_rot", "target_pos", "rot", "pos")
        inputs = [
            self.prepare(t, name, kin.dtype, notes, None, batch=n) for t, name in zip(tensors, names, strict=True)
        ]
        mode = self.mode(notes, ("plain", "dual", "fake") if inputs[0].is_floating_point() else ("plain",))
        return Case(f"pose_error_batch_last {notes}", lambda *a: list(pose_error_batch_last(*a)), inputs, False, mode)

    def dls(self) -> Case:
        notes: list[str] = []
        kin = self.pick_layer(notes)
        n = self.rng.choice([1, 3, 64])
        q = to_batch_last(self.configs(kin, (n,)), 1)
        with native.disabled():
            jac_t = self.reference.jacobian(q.T).permute(2, 1, 0)
        if self.rng.random() < 0.2:
            jac_t = jac_t[..., :1]
            notes.append("jac_t batch 1")
        err = 0.05 * torch.randn(6, n, generator=self.gen, dtype=F64)
        damping_sq = 0.05**2 * torch.eye(6, dtype=F64)[..., None]
        if self.rng.random() < 0.1:
            damping_sq = damping_sq.expand(6, 6, n)
            notes.append("damping per sample")
        jac_t = self.prepare(jac_t, "jac_t", kin.dtype, notes, None, batch=n)
        function = self.rng.choice(["dls_step", "damped_gram", "transposed_product"])
        notes.append(f"B={n}")
        if function == "dls_step":
            inputs = [
                jac_t,
                self.prepare(err, "err", kin.dtype, notes, None),
                self.prepare(q, "q", kin.dtype, notes, None),
            ]
            inputs.append(self.prepare(damping_sq, "damping_sq", kin.dtype, notes, None, grad=False))
            fn = lambda j, e, q, d: [dls_step(q, j, e, d, 0.5)]  # noqa: E731
        elif function == "damped_gram":
            inputs = [jac_t, self.prepare(damping_sq, "damping_sq", kin.dtype, notes, None, grad=False)]
            fn = lambda j, d: [DAMPED_GRAM(j, d)]  # noqa: E731
        else:
            x = torch.randn(n, 6, generator=self.gen, dtype=F64)
            inputs = [jac_t, self.prepare(x, "x", kin.dtype, notes, 2)]
            fn = lambda j, x: [TRANSPOSED_PRODUCT(j, x)]  # noqa: E731
        mode = self.mode(notes, ("plain", "dual", "fake") if jac_t.is_floating_point() else ("plain",))
        return Case(f"{function} {notes}", fn, inputs, False, mode)


def _tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


@pytest.fixture(scope="module")
def layers(panda_layer, pr2_urdf, chain_of) -> dict[str, KinematicsLayer]:
    out = {f"panda{32 if d == F32 else 64}": panda_layer(d) for d in (F32, F64)}
    for d in (F32, F64):
        out[f"pr2-{32 if d == F32 else 64}"] = KinematicsLayer(
            chain_of(pr2_urdf, "base_link", "r_gripper_tool_frame", d)
        )
    return out


def _fuzz(cases: Cases, count: int, monkeypatch) -> dict[str, int]:
    """Run ``count`` drawn cases with the kernels and without, asserting each pair alike; the outcomes' counts and
    how many reached a compiled kernel."""
    assert native.library() is not None, "the kernels must build here (a C compiler is installed)"
    served = []
    kernel = loader.compiled

    def spy(*args):
        found = kernel(*args)
        served.append(found is not None)
        return found

    monkeypatch.setattr(loader, "compiled", spy)
    counts = {"value": 0, "project error": 0, "torch error": 0, "kernel": 0}
    for index in range(count):
        case = cases.draw()
        case.label = f"case {index}: {case.label}"
        served.clear()
        got = _outcome(case)
        used = any(served)
        with native.disabled():
            want = _outcome(case)
        _assert_same(case, got, want)
        counts[got[0]] += 1
        counts["kernel"] += used
    return counts


def test_every_call_equals_the_torch_path_or_raises_a_project_error(layers, monkeypatch, capsys):
    counts = _fuzz(Cases(SEED, layers), CASES, monkeypatch)
    with capsys.disabled():
        print(
            f"\nnative fuzz: {CASES} cases (seed {SEED}): {counts['value']} answered alike, {counts['project error']} "
            f"raised the same ProjectError, {counts['torch error']} (batch-last functions) the same torch error; "
            f"{counts['kernel']} reached a compiled kernel"
        )
    assert counts["value"] > CASES // 2 and counts["project error"] > 10 and counts["kernel"] > CASES // 3


class WholeBodyCases(Cases):
    """Whole-body cases: the G1 layer with every kind of task and constraint the compiled step encodes
    (``wholebody_support.every_kind_layer``, float32 and float64), ``step`` on a flat batch and ``solve`` on a
    broadcast one, every input in a random layout (rarely another dtype), ``q`` and any target (the contacts'
    anchors too) sometimes requiring a gradient: the compiled step and backward where they apply, the torch
    composition elsewhere, against the torch composition alone."""

    def __init__(self, seed: int, wholebody: dict) -> None:
        super().__init__(seed, {})
        self.wholebody = wholebody

    def draw(self) -> Case:
        notes: list[str] = []
        name = self.rng.choice(["g1-32", "g1-64", "g1-64"])
        layer = self.wholebody[name]
        tree, dtype = layer.tree, layer.tree.joint_lower.dtype
        rows = self.rng.choice([1, 2, 5, 33])
        targets, q = every_kind_targets(tree, rows, self.rng.randrange(1 << 16), reach=self.rng.choice([0.1, 0.3]))
        q = q + 0.02 * torch.randn(q.shape, generator=self.gen, dtype=F64).to(q.dtype) * (torch.arange(tree.nq) >= 7)
        method = self.rng.choice(["step", "step", "solve"])
        notes += [name, method, f"B={rows}"]
        names = list(targets)
        inputs = [self.prepare(q, "q", dtype, notes, 1)]
        for target_name in names:
            inputs.append(self.prepare(targets[target_name], target_name, dtype, notes, targets[target_name].ndim - 1))
        mode = self.mode(notes, ("plain", "dual", "vmap"))
        iterations = self.rng.choice([1, 2, 4])

        def run(q, *values):
            given = dict(zip(names, values, strict=True))
            if method == "step":
                q_next, step = layer.step(q, given)
                return [q_next, step.dq, step.level_status, step.active_inequalities, step.active_bounds]
            result = layer.solve(given, q, iterations=iterations)
            return [result.q, *result.residuals.values(), *result.violations.values()]

        # With the library disabled the QPs run their torch solver, which agrees with the compiled one to the QP's
        # tolerance; the levels' adjoint solves amplify that in the gradients.
        return Case(f"WholeBodyIKLayer.{method} {notes}", run, inputs, True, mode, tolerance=1e-6)


WHOLEBODY_CASES = 90


def test_every_wholebody_call_equals_the_torch_path_or_raises_a_project_error(monkeypatch, capsys):
    layers = {f"g1-{32 if d == F32 else 64}": every_kind_layer(tree_of(d)) for d in (F32, F64)}
    counts = _fuzz(WholeBodyCases(SEED, layers), WHOLEBODY_CASES, monkeypatch)
    with capsys.disabled():
        print(
            f"\nwhole-body fuzz: {WHOLEBODY_CASES} cases (seed {SEED}): {counts['value']} answered alike, "
            f"{counts['project error']} raised the same ProjectError; {counts['kernel']} reached a compiled kernel"
        )
    # an input in another dtype (10 % each, nine inputs: 61 % of the cases hold one) or a target expanded past a batch
    # of one is refused: about a quarter answer
    assert counts["value"] > WHOLEBODY_CASES // 5 and counts["project error"] > 5
    assert counts["kernel"] > WHOLEBODY_CASES // 3
