"""Experiment configuration: frozen dataclasses, the ``smoke`` and ``full`` presets, JSON round trip."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kinematics.errors import ConfigError
from learning.task import CostWeights


@dataclass(frozen=True)
class WorkspaceCfg:
    """Grasp points (root frame, metres) and the region held out for the disjoint-spatial test."""

    x: tuple[float, float] = (0.30, 0.70)
    y: tuple[float, float] = (-0.40, 0.40)
    z: tuple[float, float] = (0.02, 0.30)
    heldout_x: tuple[float, float] = (0.55, 0.70)
    heldout_y: tuple[float, float] = (0.20, 0.40)


@dataclass(frozen=True)
class StartStateCfg:
    """Initial joints ``q0``: ready pose, Gaussian noise on joints 1-6, wrist (joint 7) uniform over its range.

    The shifted distribution (initial-state-shift test) draws joint 1 uniform in ``+-shift_base_range`` and
    uses ``shift_noise`` on joints 2-6.
    """

    noise: float = 0.25
    shift_base_range: float = 1.2
    shift_noise: float = 0.4


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


@dataclass(frozen=True)
class BaselineCfg:
    """Per-goal search baselines and the teacher (numerical reference)."""

    grid_yaws: int = 32
    grid_ik_iterations: int = 24
    online_steps: int = 20
    online_learning_rate: float = 0.15
    online_ik_iterations: int = 24
    teacher_yaws: int = 72
    teacher_refine_yaws: int = 11
    teacher_ik_iterations: int = 64


@dataclass(frozen=True)
class ExperimentCfg:
    preset: str = "full"
    split_seed: int = 2026
    eval_ik_iterations: int = 64
    latency_batch: int = 256
    latency_singles: int = 16
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
    ),
    baselines=BaselineCfg(grid_yaws=12, online_steps=3, teacher_yaws=16, teacher_refine_yaws=3),
    latency_batch=32,
    latency_singles=3,
)
FULL = ExperimentCfg()
PRESETS = {"smoke": SMOKE, "full": FULL}


def preset(name: str) -> ExperimentCfg:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
