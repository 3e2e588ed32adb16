"""The compiled kernels: equal to the torch pass on three robots in both dtypes, used where they should be and
never where they cannot serve (broadcast or negative-view inputs, fake tensors, another default device, forward
AD); the installed library is loaded where it matches its sources and a stale one is not; a library that is
missing, broken or incomplete is rebuilt, a missing compiler falls back to the torch pass with a warning, the C
source compiles without warnings, and the ctypes signature table equals the C prototypes."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from kinematics import DtypeDeviceMismatchError, SerialChainKinematics, ShapeError, native, pose_error
from kinematics.batch_last import to_batch_last
from kinematics.lie.pose_error import pose_error_batch_last
from kinematics.model.chain import FK_JACOBIAN
from kinematics.native import build, loader, signatures

ROBOTS = {
    "panda": ("panda_urdf", "panda_link0", "panda_hand_tcp"),
    "pr2 (prismatic torso)": ("pr2_urdf", "base_link", "r_gripper_tool_frame"),
    "ur5": ("ur5_urdf", "base_link", "tool0"),
}


@pytest.fixture(scope="session")
def shared_objects(tmp_path_factory):
    """One folder of compiled units for the tests that build: each test's build compiles only what the previous
    ones did not (a unit's object is named after its compiler, flags and sources)."""
    return tmp_path_factory.mktemp("objects")


@pytest.fixture
def fresh_native(monkeypatch, tmp_path, shared_objects):
    """Forget the loaded kernel and hide the installed library, so that a test can build (or fail to build) it
    with the first-use fallback; restored afterwards."""
    monkeypatch.setattr(loader, "_state", {})
    monkeypatch.setattr(loader, "INSTALLED", tmp_path / "not-installed" / build.LIBRARY)
    monkeypatch.setattr(loader, "_objects_dir", lambda: shared_objects)
    return loader


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernel_equals_the_torch_pass(request, robot, dtype):
    urdf_fixture, root, end = ROBOTS[robot]
    chain = SerialChainKinematics.from_urdf(
        request.getfixturevalue(urdf_fixture), end_link_name=end, root_link_name=root, dtype=dtype
    )
    assert native.library() is not None, "the kernel must build on this machine (a C compiler is installed)"
    gen = torch.Generator().manual_seed(7)
    q = to_batch_last(torch.rand(37, chain.dof, generator=gen, dtype=torch.float64).to(dtype) * 4 - 2, 1)
    tcp = torch.eye(4, dtype=dtype)
    tcp[:3, 3] = torch.tensor([0.01, -0.02, 0.1])
    compiled = chain.fk_and_jacobian(q, tcp, batch_last=True)
    with native.disabled():
        reference = chain.fk_and_jacobian(q, tcp, batch_last=True)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    for got, want in zip(compiled, reference, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=tol)


def test_kernel_is_used_without_a_graph_and_never_with_one(panda_layer, monkeypatch):
    kin = panda_layer(torch.float64)
    served = []
    original = FK_JACOBIAN.implementations["cpu"]
    monkeypatch.setitem(FK_JACOBIAN.implementations, "cpu", lambda *a: served.append(original(*a) is not None))
    q = to_batch_last(torch.zeros(3, kin.dof, dtype=torch.float64), 1)
    kin.model._batch_last_pass(q, kin.tcp, True)
    kin.model._batch_last_pass(q.clone().requires_grad_(True), kin.tcp, True)  # autograd through the torch ops
    assert served == [True]  # a call that records a graph goes to the reference without asking the kernel


def test_disabled_kernel_runs_the_torch_pass(fresh_native, monkeypatch, panda_layer):
    monkeypatch.setenv("KINEMATICS_NATIVE", "0")
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


@pytest.mark.slow
def test_build_lands_atomically_in_its_cache(fresh_native, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert fresh_native.library() is not None
    built = list((tmp_path / "kinematics-native").iterdir())
    assert len(built) == 1 and built[0].name.startswith("kinematics-") and built[0].suffix == ".so"
    assert fresh_native.library_file() == built[0]


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
def test_pose_error_kernel_equals_the_torch_formula(dtype):
    from kinematics.batch_last import matmul
    from kinematics.lie.pose_error import pose_error_batch_last
    from kinematics.lie.rotations import so3_exp

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
    with native.disabled():
        reference = torch.cat(pose_error_batch_last(*args))
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(compiled, reference, rtol=0, atol=tol)


def test_mixed_dtypes_never_reach_the_kernel(panda_layer):
    kin = panda_layer(torch.float32)
    q = to_batch_last(torch.zeros(2, kin.dof, dtype=torch.float64), 1)
    local, revolute, end = torch.zeros(kin.dof, 4, 3, 4), kin.model.revolute_mask, torch.zeros(3, 4)
    assert native.fk_jacobian(q, local, revolute, end, True, True) is None
    assert native.jt_x(torch.zeros(7, 6, 2), torch.zeros(2, 6, dtype=torch.float64)) is None


def _rotations(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(3, 3, n)`` rotations and ``(3, n)`` positions, float64, batch-last."""
    from kinematics.lie.rotations import so3_exp

    gen = torch.Generator().manual_seed(seed)
    rot = so3_exp(torch.randn(n, 3, generator=gen, dtype=torch.float64)).permute(1, 2, 0).contiguous()
    return rot, torch.randn(3, n, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_broadcast_target_is_not_read_past_its_end(dtype):
    """A (3, 3, 1) target rotation against a batch of 64 broadcasts like torch; the kernel reads 9 x 64 values."""
    target_rot, target_pos = (t.to(dtype) for t in _rotations(1, 1))
    rot, pos = (t.to(dtype) for t in _rotations(64, 2))
    got = torch.cat(pose_error_batch_last(target_rot, target_pos[:, :1].expand(3, 64), rot, pos))
    want = torch.cat(pose_error_batch_last(target_rot.expand(3, 3, 64), target_pos.expand(3, 64), rot, pos))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12 if dtype == torch.float64 else 2e-6)
    assert torch.cat(pose_error_batch_last(rot, pos, target_rot, target_pos)).shape == (6, 64)


def test_the_kernels_refuse_shapes_they_would_misread():
    jac_t = torch.randn(7, 6, 5, dtype=torch.float64)
    per_sample = torch.eye(6, dtype=torch.float64)[..., None].expand(6, 6, 5)
    assert native.gram(jac_t, per_sample) is None  # the kernel reads one 6x6 constant
    assert native.jt_x(jac_t, torch.randn(1, 6, dtype=torch.float64)) is None
    rot, pos = _rotations(5, 3)
    assert native.pose_error(rot[..., :1], pos, rot, pos) is None
    assert native.pose_error_vjp(rot, rot[..., :1], pos) is None
    assert native.chain_vjp(rot, jac_t, rot, pos, jac_t[:6]) is None
    local = torch.zeros(7, 4, 3, 4, dtype=torch.float64)
    assert (
        native.fk_jacobian(torch.zeros(1, 5, dtype=torch.float64), local, torch.ones(7), torch.zeros(3, 4), True, True)
        is None
    )


def test_negative_views_are_read_as_their_values(pr2_urdf, chain_of):
    """A negative view (``torch._neg_view``) stores -x with a flag; the kernels would read the unflagged memory."""
    target_rot, target_pos = _rotations(4, 4)
    rot, pos = _rotations(4, 5)
    want = torch.cat(pose_error_batch_last(target_rot, target_pos, rot, pos))
    got = torch.cat(pose_error_batch_last(target_rot, torch._neg_view(-target_pos), rot, torch._neg_view(-pos)))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    pr2 = chain_of(pr2_urdf, "base_link", "r_gripper_tool_frame", torch.float64)  # a prismatic joint reads q itself
    q = to_batch_last(torch.full((3, pr2.dof), 0.2, dtype=torch.float64), 1)
    negative, plain = pr2.fk_and_jacobian(torch._neg_view(-q), batch_last=True), pr2.fk_and_jacobian(q, batch_last=True)
    for got, want in zip(negative, plain, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_fake_tensors_and_another_default_device_never_reach_the_kernel(panda_layer):
    """Both used to end in a segmentation fault: fake tensors have no memory, and the outputs were allocated on
    the default device."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    kin = panda_layer(torch.float64)
    q = torch.zeros(3, kin.dof, dtype=torch.float64)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        pose, jac = kin.model.fk_and_jacobian(mode.from_tensor(q), kin.tcp)
        position, _ = pose_error(pose, pose)
    assert (pose.shape, jac.shape, position.shape) == ((3, 4, 4), (3, 6, kin.dof), (3, 3))
    expected = kin.model.fk_and_jacobian(q, kin.tcp)
    with torch.device("meta"):
        got = kin.model.fk_and_jacobian(q, kin.tcp)
    for a, b in zip(got, expected, strict=True):
        assert a.device.type == "cpu"
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_forward_mode_ad_gets_the_tangent_of_the_pose(panda_layer):
    """Forward-mode AD used to get no tangent from FK (the kernel ran on the primal)."""
    import torch.autograd.forward_ad as fwAD

    kin = panda_layer(torch.float64)
    q = torch.full((2, kin.dof), 0.3, dtype=torch.float64)
    direction = torch.linspace(-1, 1, kin.dof, dtype=torch.float64).expand(2, kin.dof)
    with fwAD.dual_level():
        pose, tangent = fwAD.unpack_dual(kin(fwAD.make_dual(q, direction)))
    assert tangent is not None
    expected = torch.einsum("...ij,ij->...", torch.autograd.functional.jacobian(kin, q), direction)
    torch.testing.assert_close(tangent, expected, rtol=1e-10, atol=1e-12)


def test_bad_chain_inputs_raise_typed_errors(panda_layer):
    kin = panda_layer(torch.float64)
    chain = kin.model
    with pytest.raises(ShapeError, match=r"\(\.\.\., 7\)"):
        chain.forward_kinematics(torch.zeros(3, 1, dtype=torch.float64))  # used to broadcast to every joint
    with pytest.raises(ShapeError, match=r"\(7, B\)"):
        chain.fk_and_jacobian(torch.zeros(3, 7, dtype=torch.float64), batch_last=True)
    with pytest.raises(ShapeError, match="tcp"):
        chain.forward_kinematics(torch.zeros(7, dtype=torch.float64), torch.eye(4, dtype=torch.float64).expand(2, 4, 4))
    with pytest.raises(DtypeDeviceMismatchError, match="float32"):
        chain.forward_kinematics(torch.zeros(7))
    with pytest.raises(DtypeDeviceMismatchError):
        pose_error(torch.eye(4), torch.eye(4, dtype=torch.float64))
    with pytest.raises(ShapeError, match="broadcast"):
        pose_error(torch.eye(4).expand(2, 4, 4), torch.eye(4).expand(3, 4, 4))
    with pytest.raises(ShapeError, match="4, 4"):
        pose_error(torch.eye(4)[:3], torch.eye(4))


def test_the_implicit_gradient_refuses_forward_mode_ad(panda_layer):
    import torch.autograd.forward_ad as fwAD

    from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, UnsupportedTransformError

    kin = panda_layer(torch.float64)
    solver = DifferentiableIKLayer(kin, DifferentiableIKCfg(gradient="implicit", iterations=2))
    target = kin(kin.default_seed())
    with fwAD.dual_level(), pytest.raises(UnsupportedTransformError, match="unrolled"):
        solver.solve(fwAD.make_dual(target, torch.zeros_like(target)))


def _fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return loader.library_path(loader._compiler())


def _assert_kernels_work() -> None:
    jac_t = torch.randn(7, 6, 3, dtype=torch.float64)
    x = torch.randn(3, 6, dtype=torch.float64)
    torch.testing.assert_close(native.jt_x(jac_t, x), (jac_t * x.T).sum(1), rtol=0, atol=1e-12)


@pytest.mark.slow
def test_a_corrupt_cached_library_is_rebuilt(fresh_native, monkeypatch, tmp_path, recwarn):
    library = _fresh_cache(monkeypatch, tmp_path)
    library.parent.mkdir(parents=True)
    library.write_bytes(b"not a shared object")
    assert fresh_native.library() is not None
    _assert_kernels_work()
    assert library.read_bytes()[:4] == b"\x7fELF" or library.stat().st_size > 1000
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.slow
def test_a_cached_library_without_every_kernel_is_rebuilt(fresh_native, monkeypatch, tmp_path):
    library = _fresh_cache(monkeypatch, tmp_path)
    library.parent.mkdir(parents=True)
    stub = tmp_path / "stub.c"
    stub.write_text("void jt_x_double(long dof, long n) { (void)dof; (void)n; }\n")
    subprocess.run([*loader._compiler(), "-shared", "-fPIC", "-o", str(library), str(stub)], check=True)
    assert fresh_native.library() is not None  # used to raise AttributeError in the caller
    _assert_kernels_work()


def test_a_failed_rebuild_warns_and_falls_back(fresh_native, monkeypatch, tmp_path, panda_layer):
    compiler = tmp_path / "broken-cc"
    compiler.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo broken 1.0; exit 0; fi\necho no >&2; exit 1\n')
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    library = _fresh_cache(monkeypatch, tmp_path)
    library.parent.mkdir(parents=True)
    library.write_bytes(b"truncated")
    with pytest.warns(RuntimeWarning, match="compiled chain kernel is unavailable"):
        assert fresh_native.library() is None
    kin = panda_layer(torch.float64)
    assert kin(torch.zeros(kin.dof, dtype=torch.float64)).shape == (4, 4)


@pytest.mark.slow
def test_cc_may_carry_arguments(fresh_native, monkeypatch, tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("CC", f"{compiler} -pipe")  # like CC="ccache gcc"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert fresh_native.library() is not None
    _assert_kernels_work()


@pytest.mark.slow
def test_the_c_source_compiles_without_warnings(tmp_path):
    """The user build tolerates warnings; this check (run in CI) does not: every unit, as the build compiles it."""
    compiler = loader._compiler()
    if shutil.which(compiler[0]) is None:
        pytest.skip("no C compiler")
    strict = ("-Wall", "-Wextra", "-Werror")
    build.build(tmp_path / "k.so", tmp_path / "objects", compiler, accept=loader._load, extra_flags=strict)


def test_the_c_sources_ship_as_package_data():
    tomllib = pytest.importorskip("tomllib")
    with open(build.CSRC.parents[2] / "pyproject.toml", "rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["kinematics.native"]
    shipped = {p for pattern in package_data for p in build.CSRC.parent.glob(pattern)}
    assert set(build.sources()) <= shipped
    assert {build.CSRC / unit for unit in build.UNITS} <= set(build.sources())


def test_each_unit_is_an_object_per_type():
    """Two objects per unit (its float half, its double half), which the build compiles in parallel; identity.c,
    which has no per-type code, once. Linking them is the slow build tests' (every kernel loads, none twice)."""
    objects = build.objects_of_units()
    stems = [stem for _, stem, _ in objects]
    assert len(stems) == len(set(stems))
    for unit in build.UNITS:
        flags = {flags for u, _, flags in objects if u == unit}
        if unit in build.ONE_OBJECT:
            assert len(flags) == 1 and "KINEMATICS_NATIVE_SOURCE_HASH" in next(iter(flags))[0]
        else:
            assert flags == {(flag,) for flag in build.TYPES.values()}
    assert objects[0][0] == "qp_active_set.c"  # the longest compile starts first


_C_TYPE_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "const"}


def _c_type(declaration: str) -> str:
    """``const float *restrict x`` -> ``const float *``: the type's words, then its stars (name and ``restrict``
    dropped)."""
    tokens = [t for t in re.findall(r"\w+|\*", declaration) if t != "restrict"]
    if len(tokens) > 1 and tokens[-1] not in _C_TYPE_WORDS and tokens[-1] != "*":
        tokens = tokens[:-1]  # the parameter's name
    return " ".join(tokens)


def _prototypes(header: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``name: (return type, argument types)`` of every prototype in a C header (comments and preprocessor lines
    dropped)."""
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    found = {}
    for restype, name, params in re.findall(r"([\w\s*]+?)\s*\b(\w+)\s*\(([^)]*)\)\s*;", text):
        assert name not in found, f"{name} declared twice"
        argtypes = tuple(_c_type(p) for p in params.split(",") if p.strip() != "void")
        found[name] = (_c_type(restype + " _"), argtypes)
    return found


def test_the_signature_table_equals_the_c_prototypes():
    """signatures.py, what ctypes is told, against csrc/kernels.h, what the compiler checks every definition
    against: the same functions, argument counts, argument types and return types."""
    declared = _prototypes((build.CSRC / "kernels.h").read_text())
    table = signatures.c_declarations()
    assert sorted(table) == sorted(declared)
    for name, (restype, argtypes) in table.items():
        c_restype, c_argtypes = declared[name]
        assert len(argtypes) == len(c_argtypes), (
            f"{name}: {len(argtypes)} arguments in the table, {len(c_argtypes)} in C"
        )
        for i, (ours, theirs) in enumerate(zip(argtypes, c_argtypes, strict=True)):
            assert ours == theirs, f"{name}: argument {i} is {ours!r} in the table, {theirs!r} in C"
        assert restype == c_restype, f"{name}: returns {restype!r} in the table, {c_restype!r} in C"


def test_the_prototype_parser_sees_a_difference():
    header = "/* x */\nlong f_float(long n, const float *restrict x, float *y);\nvoid g(void);\n"
    assert _prototypes(header) == {"f_float": ("long", ("long", "const float *", "float *")), "g": ("void", ())}
    assert _prototypes(header.replace("float *y", "double *y"))["f_float"][1][2] == "double *"


def test_the_loaded_functions_carry_the_table_s_signatures():
    lib = native.library()
    if lib is None:
        pytest.skip("no compiled kernels here")
    with pytest.raises(TypeError):
        lib.jt_x_double(1, 2)  # too few arguments: refused, not a read of whatever the registers hold
    assert lib.qp_adjoint_float.restype is signatures.ctypes.c_long
    assert len(lib.qp_polish_double.argtypes) == len(signatures.KERNELS["qp_polish"][1])


def test_the_installed_library_is_loaded_where_it_matches_its_sources(monkeypatch):
    if not loader.INSTALLED.exists():
        pytest.skip("no installed library (pip install builds it)")
    monkeypatch.setattr(loader, "_state", {})
    assert native.library() is not None
    assert native.library_file() == loader.INSTALLED
    assert native.library().kinematics_native_source_hash().decode() == build.source_hash()
    _assert_kernels_work()


@pytest.mark.slow
def test_a_stale_installed_library_is_not_loaded(fresh_native, monkeypatch, tmp_path):
    """Sources edited after the install (their hash differs from the library's): the sources are built instead."""
    installed = Path(native.__file__).with_name(build.LIBRARY)  # (fresh_native hides it)
    if not installed.exists():
        pytest.skip("no installed library (pip install builds it)")
    monkeypatch.setattr(fresh_native, "INSTALLED", installed)
    monkeypatch.setattr(build, "source_hash", lambda: "edited-since-the-install")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert fresh_native.library() is not None
    assert fresh_native.library_file().parent == tmp_path / "kinematics-native"
    assert fresh_native.library().kinematics_native_source_hash() == b"edited-since-the-install"
    _assert_kernels_work()


def test_a_compiler_without_openmp_builds_without_it(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    wrapper = tmp_path / "cc-without-openmp"
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp ] && exit 1; done\nexec {cc} "$@"\n')
    wrapper.chmod(0o755)
    assert build.openmp_flags([str(wrapper)]) == ()
    assert build.openmp_flags([cc]) in ((), (build.OPENMP,))
