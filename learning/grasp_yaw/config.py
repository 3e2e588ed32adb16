"""Experiment configuration: frozen dataclasses, the ``smoke``, ``full`` and ``reference`` presets, JSON round trip.

``full`` is this project's protocol. ``reference`` is the protocol of the seed's own example as its README and
config state it (a local task around its ready posture); every knob that differs between the two is a field here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kinematics.errors import ConfigError
from learning.grasp_yaw.task import CostWeights


@dataclass(frozen=True)
class WorkspaceCfg:
    """Grasp points (root frame, metres) and the region held out for the disjoint-spatial test."""

    x: tuple[float, float] = (0.30, 0.70)
    y: tuple[float, float] = (-0.40, 0.40)
    z: tuple[float, float] = (0.02, 0.30)
    heldout_x: tuple[float, float] = (0.55, 0.70)
    heldout_y: tuple[float, float] = (0.20, 0.40)


START_DISTRIBUTIONS = ("gaussian", "box")
NETWORKS = ("unit_correction", "bounded")
CONSTANTS = ("radial_offset", "absolute")
SCHEDULES = ("cosine", "constant")
GRID_ANCHORS = ("radial", "absolute")
ONLINE_STARTS = ("radial", "heading")


@dataclass(frozen=True)
class StartStateCfg:
    """Initial joints ``q0`` around ``posture`` (empty: the robot's ready pose), in one of two distributions.

    ``"gaussian"``: Gaussian ``noise`` on joints 1-6, the wrist (joint 7) uniform over its range; the shifted
    distribution (initial-state-shift test) draws joint 1 uniform in ``+-shift_base_range`` and uses
    ``shift_noise`` on joints 2-6.

    ``"box"`` (the seed's): uniform in ``+-box_half_width`` on every joint plus ``+-wrist_half_width`` more on the
    wrist; the shifted distribution adds ``shift_offsets`` (radians, one per joint) to the same draws.
    """

    distribution: str = "gaussian"
    posture: tuple[float, ...] = ()
    noise: float = 0.25
    shift_base_range: float = 1.2
    shift_noise: float = 0.4
    box_half_width: float = 0.12
    wrist_half_width: float = 0.7
    shift_offsets: tuple[float, ...] = (0.20, 0.0, 0.15, 0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        if self.distribution not in START_DISTRIBUTIONS:
            raise ConfigError(f"unknown start distribution {self.distribution!r}; choose one of {START_DISTRIBUTIONS}")


@dataclass(frozen=True)
class SplitSizes:
    train: int = 4096
    validation: int = 512
    test_iid: int = 512
    test_spatial: int = 512
    test_shift: int = 512


@dataclass(frozen=True)
class TrainCfg:
    """Training of the yaw network and the shared constant through the IK layer."""

    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 800
    batch_size: int = 256
    learning_rate: float = 2e-3
    grad_clip: float = 1.0  # max gradient norm: a batch that crosses a failure cliff must not throw the net away
    ik_iterations: int = 24
    validate_every: int = 50
    hidden: int = 128
    # The one-yaw networks (IK-trained one yaw, teacher-supervised, zero-order): "unit_correction" rotates the
    # radial yaw by a predicted unit vector, reading goal_features; "bounded" is the seed's network, heading plus
    # at most +-90 degrees, reading only the normalised joints and grasp point (predictors.BoundedYawNet).
    network: str = "unit_correction"
    # The shared constant: "radial_offset" adds one learned angle to the radial yaw; "absolute" (the seed's) is one
    # learned yaw for every goal.
    constant: str = "radial_offset"
    constant_learning_rate: float = 0.02
    lr_schedule: str = "cosine"  # "cosine" decays to zero over the budget; "constant" (the seed's) keeps it
    # The IK-trained network's yaw hypotheses: each step solves IK for all of them and the cheapest (failures
    # penalised) takes the cost gradient; at inference the cheapest of them is the answer.
    hypotheses: int = 4
    constant_steps: int = 100
    supervised_steps: int = 1000
    # Zero-order (evolution strategies) baseline, at the one-yaw IK-trained predictor's IK-evaluation budget
    # (zero_order) and for its training seconds (zero_order_wall_time).
    es_pairs: int = 16
    es_batch_size: int = 32
    es_sigma: float = 0.02
    es_learning_rate: float = 0.01

    def __post_init__(self) -> None:
        for name, allowed in (("network", NETWORKS), ("constant", CONSTANTS), ("lr_schedule", SCHEDULES)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"unknown {name} {getattr(self, name)!r}; choose one of {allowed}")


@dataclass(frozen=True)
class BaselineCfg:
    """Per-goal search baselines and the teacher (numerical reference)."""

    grid_yaws: int = 32
    grid_ik_iterations: int = 24
    # "radial": the radial yaw plus k 2 pi / grid_yaws; "absolute" (the seed's): linspace(-pi, pi, grid_yaws), both
    # ends included (the same yaw twice).
    grid_anchor: str = "radial"
    online_steps: int = 20
    online_learning_rate: float = 0.15
    online_ik_iterations: int = 24
    online_start: str = "radial"  # the yaw the per-goal Adam search starts from: "radial" or "heading" (the seed's)
    online_incumbents: tuple[float, ...] = ()  # absolute yaws also solved and kept if cheaper (the seed's: (0.0,))
    teacher_yaws: int = 72
    teacher_refine_yaws: int = 11
    teacher_ik_iterations: int = 64

    def __post_init__(self) -> None:
        for name, allowed in (("grid_anchor", GRID_ANCHORS), ("online_start", ONLINE_STARTS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"unknown {name} {getattr(self, name)!r}; choose one of {allowed}")


@dataclass(frozen=True)
class ExperimentCfg:
    preset: str = "full"
    split_seed: int = 2026
    eval_ik_iterations: int = 64
    latency_batch: int = 256
    latency_singles: int = 16
    latency_rounds: int = 7  # of every method's batch solve in turn: their medians are the throughputs
    device: str = "cpu"
    workspace: WorkspaceCfg = field(default_factory=WorkspaceCfg)
    start: StartStateCfg = field(default_factory=StartStateCfg)
    sizes: SplitSizes = field(default_factory=SplitSizes)
    train: TrainCfg = field(default_factory=TrainCfg)
    baselines: BaselineCfg = field(default_factory=BaselineCfg)
    weights: CostWeights = field(default_factory=CostWeights)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ExperimentCfg:
        return _build(cls, data)


def _build(kind, data):
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping for {kind.__name__}, got {type(data).__name__}")
    known = {f.name: f for f in dataclasses.fields(kind)}
    unknown = set(data) - set(known)
    if unknown:
        raise ConfigError(f"unknown {kind.__name__} fields: {sorted(unknown)}")
    values = {}
    for name, value in data.items():
        default = getattr(kind(), name)
        if dataclasses.is_dataclass(default):
            values[name] = _build(type(default), value)
        elif isinstance(default, tuple):
            values[name] = tuple(value)
        else:
            values[name] = value
    return kind(**values)


SMOKE = ExperimentCfg(
    preset="smoke",
    sizes=SplitSizes(train=128, validation=32, test_iid=32, test_spatial=32, test_shift=32),
    train=TrainCfg(
        seeds=(0, 1),
        steps=30,
        batch_size=64,
        validate_every=15,
        hidden=64,
        constant_steps=10,
        supervised_steps=30,
        learning_rate=1e-2,
        constant_learning_rate=0.1,
    ),
    baselines=BaselineCfg(grid_yaws=12, online_steps=3, teacher_yaws=16, teacher_refine_yaws=3),
    latency_batch=32,
    latency_singles=3,
    latency_rounds=2,
)
FULL = ExperimentCfg()

# The seed's ready posture and its TCP by this project's Panda FK (metres, root frame; a test checks them). The
# target box is x and z +-5 cm around that TCP and y from -5 to +1 cm; the disjoint-spatial test has y from +2.5 to
# +5.5 cm, disjoint from the box (so the held-out region never needs rejecting).
REFERENCE_POSTURE = (0.0, -0.569, 0.0, -2.810, 0.0, 3.037, 0.741)
REFERENCE_TCP = (0.46333, 0.0, 0.38549)
REFERENCE = ExperimentCfg(
    preset="reference",
    workspace=WorkspaceCfg(
        x=(REFERENCE_TCP[0] - 0.05, REFERENCE_TCP[0] + 0.05),
        y=(REFERENCE_TCP[1] - 0.05, REFERENCE_TCP[1] + 0.01),
        z=(REFERENCE_TCP[2] - 0.05, REFERENCE_TCP[2] + 0.05),
        heldout_x=(REFERENCE_TCP[0] - 0.05, REFERENCE_TCP[0] + 0.05),
        heldout_y=(REFERENCE_TCP[1] + 0.025, REFERENCE_TCP[1] + 0.055),
    ),
    start=StartStateCfg(distribution="box", posture=REFERENCE_POSTURE),
    sizes=SplitSizes(train=1024, validation=128, test_iid=128, test_spatial=128, test_shift=128),
    train=TrainCfg(
        seeds=(17, 29, 43),
        steps=200,
        batch_size=64,
        learning_rate=0.002,
        grad_clip=10.0,
        validate_every=25,
        hidden=64,
        network="bounded",
        constant="absolute",
        constant_steps=200,
        constant_learning_rate=0.04,
        supervised_steps=200,
        lr_schedule="constant",
    ),
    baselines=BaselineCfg(
        grid_yaws=129,
        grid_ik_iterations=64,
        grid_anchor="absolute",
        online_steps=50,
        online_learning_rate=0.08,
        online_start="heading",
        online_incumbents=(0.0,),
    ),
    weights=CostWeights(position=1e4, rotation=100.0),
)
PRESETS = {"smoke": SMOKE, "full": FULL, "reference": REFERENCE}


def preset(name: str) -> ExperimentCfg:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
