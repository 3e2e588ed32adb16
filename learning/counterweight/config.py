"""The counterweight experiment's configuration: the problem, the goal region and its splits, training and the
baselines; the ``smoke`` and ``full`` presets; JSON round trip."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kinematics.errors import ConfigError


@dataclass(frozen=True)
class CounterweightCfg:
    """The whole-body problem (``learning.counterweight.problem``) on ``assets.ROBOTS[robot]``."""

    robot: str = "g1"
    payload_kg: float = 8.0  # held in the reaching hand
    payload_point: tuple[float, float, float] = (0.0, 0.0, 0.0)  # in the hand's frame, m
    margin: float = 0.01  # the centre of mass stays this far inside the support polygon, m
    tolerance: float = 0.01  # the hand reaches the goal within this, m
    feet_tolerance: float = 1e-4  # feet held (m / rad) and the CoM's margin kept to within this
    iterations: int = 16
    gain: float = 0.7
    max_step: float = 0.1
    gradient: str = "unrolled"
    # what an action of 1 means: free hand dx, dy, dz (m), pelvis dx, dz (m), pelvis pitch, torso pitch (rad)
    action_scale: tuple[float, ...] = (0.35, 0.15, 0.25, 0.08, 0.08, 0.3, 0.4)


@dataclass(frozen=True)
class GoalRegionCfg:
    """Goals around the reaching shoulder (world-aligned, spherical): ``distance`` (m), ``azimuth`` (rad, about
    the vertical, 0 straight ahead, negative outward to the reaching side) and ``elevation`` (rad). Two held-out
    splits lie outside every trained goal: farther (``far_distance``) and higher (``high_elevation``)."""

    distance: tuple[float, float] = (0.34, 0.41)
    azimuth: tuple[float, float] = (-0.5, 0.2)
    elevation: tuple[float, float] = (-0.5, 0.1)
    far_distance: tuple[float, float] = (0.41, 0.43)
    high_elevation: tuple[float, float] = (0.1, 0.3)


@dataclass(frozen=True)
class SplitSizes:
    train: int = 256
    validation: int = 32
    test_iid: int = 64
    test_far: int = 64
    test_high: int = 64


@dataclass(frozen=True)
class TrainCfg:
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 20
    batch_size: int = 32
    learning_rate: float = 3e-3
    hidden: int = 64
    action_penalty: float = 1e-4  # times |action|^2, per goal
    validate_every: int = 4
    grad_clip: float = 1.0
    # evolution strategies at the gradient trainer's layer-evaluation budget
    es_pairs: int = 8
    es_batch_size: int = 4
    es_sigma: float = 0.05
    es_learning_rate: float = 0.02


@dataclass(frozen=True)
class BaselineCfg:
    online_steps: int = 10
    online_learning_rate: float = 0.1
    online_goals: int = 32  # per split: the first ones


@dataclass(frozen=True)
class ExperimentCfg:
    preset: str = "full"
    problem: CounterweightCfg = field(default_factory=CounterweightCfg)
    goals: GoalRegionCfg = field(default_factory=GoalRegionCfg)
    splits: SplitSizes = field(default_factory=SplitSizes)
    train: TrainCfg = field(default_factory=TrainCfg)
    baselines: BaselineCfg = field(default_factory=BaselineCfg)
    split_seed: int = 1234

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ExperimentCfg:
        try:
            parts = {
                "problem": CounterweightCfg(**_tuples(data["problem"])),
                "goals": GoalRegionCfg(**_tuples(data["goals"])),
                "splits": SplitSizes(**data["splits"]),
                "train": TrainCfg(**_tuples(data["train"])),
                "baselines": BaselineCfg(**data["baselines"]),
            }
            return cls(preset=data["preset"], split_seed=data["split_seed"], **parts)
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"not a counterweight experiment config: {exc}") from exc


def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


PRESETS = {
    "full": ExperimentCfg(),
    "smoke": ExperimentCfg(
        preset="smoke",
        splits=SplitSizes(train=16, validation=4, test_iid=4, test_far=4, test_high=4),
        train=TrainCfg(seeds=(0,), steps=3, batch_size=8, validate_every=2, es_pairs=2, es_batch_size=2),
        baselines=BaselineCfg(online_steps=2),
        problem=CounterweightCfg(iterations=8),
    ),
}


def preset(name: str) -> ExperimentCfg:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name]
