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
    # the R^9 offsets' bound: every 3-vector block (a translation, a rotation column) shorter than this (m for a
    # translation). Below 0.5, a rotation's two columns can never become parallel (each stays within 0.5 of its
    # rest column, and those are orthonormal), so Gram-Schmidt stays away from its singular set; 0.45 m is more
    # than any body target can move with both feet held (the free hand's reach behind the body is about 0.4 m).
    offset_bound: float = 0.45
    # the "axes" ablation: what an action of 1 means: free hand dx, dy, dz (m), pelvis dx, dz (m), pelvis pitch, torso pitch (rad)
    action_scale: tuple[float, ...] = (0.35, 0.15, 0.25, 0.08, 0.08, 0.3, 0.4)


@dataclass(frozen=True)
class GoalRegionCfg:
    """Goals around the reaching shoulder (world-aligned, spherical): ``distance`` (m), ``azimuth`` (rad, about
    the vertical, 0 straight ahead, negative outward to the reaching side) and ``elevation`` (rad). Trained goals
    lie in ``sectors`` (in front; behind on the reaching side). Held out: ``far_distance`` (both sectors, farther
    than any trained goal) and ``between_azimuth`` (a band between the sectors, beside the front one)."""

    distance: tuple[float, float] = (0.34, 0.41)
    sectors: tuple[tuple[float, float], ...] = ((-0.4, 0.3), (-3.14, -2.3))
    elevation: tuple[float, float] = (-0.6, 0.2)
    far_distance: tuple[float, float] = (0.41, 0.44)
    between_azimuth: tuple[float, float] = (-0.75, -0.4)


@dataclass(frozen=True)
class SplitSizes:
    train: int = 256
    validation: int = 64
    test_iid: int = 128
    test_far: int = 64
    test_between: int = 64
    tuning: int = 64  # chooses the hyperparameters; disjoint from validation, which chooses a run's checkpoint


@dataclass(frozen=True)
class TrainCfg:
    """Training through the layer (the gradient policy, its ``axes`` ablation, the best constant offset), and the
    shared protocol: one *layer evaluation* is one goal's whole-body solve; every trainer takes a checkpoint (the
    validation goals solved, charged to its budget) every ``validate_every * batch_size`` training evaluations of
    this configuration, whatever batch size a tuned method uses (``learning.counterweight.selection``)."""

    steps: int = 48
    batch_size: int = 32
    learning_rate: float = 3e-3
    hidden: int = 64
    output_penalty: float = 1e-4  # times |output|^2, per goal
    validate_every: int = 4
    grad_clip: float = 1.0


@dataclass(frozen=True)
class ZeroOrderCfg:
    """The zero-order trainers (forward solves only). ``es``: OpenAI-ES on the network (antithetic pairs, centred
    ranks, Adam); ``sep_cma``: separable CMA-ES (``cmaes.SepCMA``) on the network's weights; ``linear_cma``: full
    CMA-ES (``cmaes.CMA``) on ``LinearPolicy``'s 72 weights. Each candidate (or perturbation) is scored on
    ``batch_size`` goals; a population of ``None`` is the library's default."""

    es_pairs: int = 8
    es_batch_size: int = 4
    es_sigma: float = 0.05
    es_learning_rate: float = 0.02
    cma_batch_size: int = 4
    sep_cma_sigma: float = 0.05
    sep_cma_population: int | None = None
    linear_cma_sigma: float = 0.1
    linear_cma_population: int | None = None
    pgpe_population: int = 16
    pgpe_batch_size: int = 4
    pgpe_stdev: float = 0.02
    pgpe_learning_rate: float = 0.01


@dataclass(frozen=True)
class TuningCfg:
    """The same tuning budget for every trained method: three configurations each, trained once with
    ``seed`` at the gradient trainer's layer-evaluation budget, the one whose selected checkpoint does best on the
    tuning split kept (disjoint from the validation split that selects the checkpoint). The ``axes`` ablation
    reuses the gradient policy's choice."""

    seed: int = 100
    gradient_learning_rate: tuple[float, ...] = (1e-3, 3e-3, 1e-2)
    es: tuple[tuple[float, float], ...] = ((0.02, 0.01), (0.05, 0.02), (0.1, 0.05))  # (sigma, Adam learning rate)
    sep_cma_sigma: tuple[float, ...] = (0.02, 0.05, 0.15)
    linear_cma_sigma: tuple[float, ...] = (0.05, 0.15, 0.5)


@dataclass(frozen=True)
class BaselineCfg:
    online_steps: int = 20
    online_learning_rate: float = 0.02
    online_goals: int = 64  # per split: the first ones
    constant_steps: int = 20
    constant_batch_size: int = 32
    constant_learning_rate: float = 0.02
    # the free hand's forward offsets (m) the best constant starts from, the best on validation kept: rest alone
    # stalls where the front goals' gradients (hand back) and the behind goals' (hand forward) cancel
    constant_starts: tuple[float, ...] = (0.0, -0.2, 0.2)


@dataclass(frozen=True)
class ExperimentCfg:
    preset: str = "full"
    problem: CounterweightCfg = field(default_factory=CounterweightCfg)
    goals: GoalRegionCfg = field(default_factory=GoalRegionCfg)
    splits: SplitSizes = field(default_factory=SplitSizes)
    train: TrainCfg = field(default_factory=TrainCfg)
    zero_order: ZeroOrderCfg = field(default_factory=ZeroOrderCfg)
    tuning: TuningCfg = field(default_factory=TuningCfg)
    baselines: BaselineCfg = field(default_factory=BaselineCfg)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    workers: int = 2  # processes training side by side, one torch thread each
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
                "train": TrainCfg(**data["train"]),
                "zero_order": ZeroOrderCfg(**data["zero_order"]),
                "tuning": TuningCfg(**_tuples(data["tuning"])),
                "baselines": BaselineCfg(**_tuples(data["baselines"])),
            }
            return cls(
                preset=data["preset"],
                seeds=tuple(data["seeds"]),
                workers=data["workers"],
                split_seed=data["split_seed"],
                **parts,
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"not a counterweight experiment config: {exc}") from exc


def _tuples(d: dict) -> dict:
    """JSON lists back to (nested) tuples."""
    return {k: _tuple(v) for k, v in d.items()}


def _tuple(v):
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v


PRESETS = {
    "full": ExperimentCfg(),
    "smoke": ExperimentCfg(
        preset="smoke",
        problem=CounterweightCfg(iterations=8),
        splits=SplitSizes(train=8, validation=4, test_iid=4, test_far=2, test_between=2),
        train=TrainCfg(steps=2, batch_size=4, validate_every=1, hidden=16),
        zero_order=ZeroOrderCfg(es_pairs=2, es_batch_size=1, cma_batch_size=1),
        tuning=TuningCfg(
            gradient_learning_rate=(3e-3,), es=((0.05, 0.02),), sep_cma_sigma=(0.05,), linear_cma_sigma=(0.15,)
        ),
        baselines=BaselineCfg(online_steps=2, online_goals=2, constant_steps=2, constant_batch_size=4),
        seeds=(0,),
        workers=1,
    ),
}


def preset(name: str) -> ExperimentCfg:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name]
