"""The study's design as data, as the pre-registration fixes it: the cells (three axes through one base cell),
the goal sets, the budgets, the methods and their tuning grids, the seeds. ``STUDY_PRESETS["full"]`` is the
pre-registered study; ``"smoke"`` is the same protocol at a size the tests run in seconds."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from kinematics.errors import ConfigError
from learning.counterweight.config import (
    BaselineCfg,
    CounterweightCfg,
    ExperimentCfg,
    GoalRegionCfg,
    TrainCfg,
    ZeroOrderCfg,
)

# azimuths (rad, 0 straight ahead, positive to the robot's left) where goals need a counterweight: in front and
# behind; at the sides the support polygon is wide enough (the scan in the pre-registration)
ARCS = ((-0.7, 0.6), (2.45, 3.83))
SECTOR_WIDTH = 0.15
GRADIENT_STUDY_METHODS = ("gradient", "gradient_implicit")
ZERO_ORDER_STUDY_METHODS = ("es", "sep_cma", "linear_cma", "pgpe")
STUDY_METHODS = (*GRADIENT_STUDY_METHODS, *ZERO_ORDER_STUDY_METHODS)
BUDGETS = ("1x", "equal_time", "10x")  # a zero-order method's; the gradient methods run at 1x
GOAL_SETS = ("train", "tuning", "selection", "test")

# a grid: (setting, values) per dimension; its configurations are their product
Grid = tuple[tuple[str, tuple], ...]


@dataclass(frozen=True)
class Cell:
    """One level of one axis: ``sectors`` k (``None``: the full circle), the policy's hidden ``width``, the
    ``tolerance`` (m)."""

    name: str
    axis: str
    sectors: int | None
    width: int
    tolerance: float

    @property
    def task(self) -> tuple[int | None, float]:
        """What the goals depend on: the width cells share the base cell's goals (only the policy differs)."""
        return self.sectors, self.tolerance

    @property
    def level(self) -> str:
        if self.axis == "goal_dependence":
            return "full circle" if self.sectors is None else f"k = {self.sectors}"
        if self.axis == "width":
            return f"width {self.width}"
        if self.axis == "tolerance":
            return f"{1e3 * self.tolerance:g} mm"
        return "base"


@dataclass(frozen=True)
class GoalSetSizes:
    train: int = 256
    tuning: int = 64
    selection: int = 32
    test: int = 128
    per_goal: int = 64  # per-goal optimisation's goals: the first test goals


@dataclass(frozen=True)
class StudyCfg:
    preset: str = "full"
    problem: CounterweightCfg = field(default_factory=CounterweightCfg)
    goals: GoalRegionCfg = field(default_factory=GoalRegionCfg)  # distance and elevation; azimuths from the cell
    train: TrainCfg = field(
        default_factory=lambda: TrainCfg(steps=24, validate_every=6)
    )  # 24 x 32, a checkpoint per 192
    zero_order: ZeroOrderCfg = field(default_factory=ZeroOrderCfg)
    baselines: BaselineCfg = field(default_factory=BaselineCfg)
    sizes: GoalSetSizes = field(default_factory=GoalSetSizes)
    sectors: tuple[int, ...] = (1, 2, 4, 8)  # and the full circle
    widths: tuple[int, ...] = (16, 64, 256)
    tolerances: tuple[float, ...] = (0.01, 0.005, 0.002)
    base_width: int = 64
    base_tolerance: float = 0.01
    multiple: int = 10  # the largest budget, times the gradient trainer's
    seeds: tuple[int, ...] = tuple(range(10))
    tuning_seeds: tuple[int, ...] = (100, 101)
    split_seed: int = 4321
    max_extensions: int = 4  # edge-rule rounds per stage, at most
    probe_dense: int = 10  # probe goals at the first 10 checkpoints (1x and equal wall time), then as selection.py says
    retuned_levels: tuple[str, ...] = ("width-256", "tolerance-2mm")  # zero-order's 10x scale re-tuned there
    implicit_cells: tuple[str, ...] = ("base",)  # where gradient_implicit is trained (amendment 1)
    require_properties: bool = True  # a cell that loses the task's properties is not trained (smoke: all kept)
    stage_a: dict = field(default_factory=dict)  # method -> Grid (default: STAGE_A)
    stage_b: dict = field(default_factory=dict)  # method -> Grid (default: STAGE_B)
    workers: int = 2

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def cells(self) -> list[Cell]:
        """The base cell first, then each axis's other levels."""
        base = Cell("base", "base", None, self.base_width, self.base_tolerance)
        cells = [base]
        cells += [
            Cell(f"sectors-{k}", "goal_dependence", k, self.base_width, self.base_tolerance) for k in self.sectors
        ]
        cells += [
            Cell(f"width-{w}", "width", None, w, self.base_tolerance) for w in self.widths if w != self.base_width
        ]
        cells += [
            Cell(f"tolerance-{1e3 * t:g}mm", "tolerance", None, self.base_width, t)
            for t in self.tolerances
            if t != self.base_tolerance
        ]
        return cells

    def axes(self) -> dict[str, tuple[str, ...]]:
        """Each axis's cells from its easiest level to its hardest (the base cell among them)."""
        width = {w: "base" if w == self.base_width else f"width-{w}" for w in self.widths}
        tolerance = {t: "base" if t == self.base_tolerance else f"tolerance-{1e3 * t:g}mm" for t in self.tolerances}
        return {
            "goal_dependence": (*(f"sectors-{k}" for k in self.sectors), "base"),
            "width": tuple(width[w] for w in sorted(self.widths)),
            "tolerance": tuple(tolerance[t] for t in sorted(self.tolerances, reverse=True)),
        }

    def cell(self, name: str) -> Cell:
        for cell in self.cells():
            if cell.name == name:
                return cell
        raise ConfigError(f"no cell {name!r} in the study; known: {[c.name for c in self.cells()]}")

    def experiment(self, cell: Cell) -> ExperimentCfg:
        """The experiment's configuration of ``cell``: its problem (tolerance), policy width and training."""
        return ExperimentCfg(
            preset=f"study-{self.preset}",
            problem=dataclasses.replace(self.problem, tolerance=cell.tolerance),
            goals=self.goals,
            train=dataclasses.replace(self.train, hidden=cell.width),
            zero_order=self.zero_order,
            baselines=self.baselines,
            workers=self.workers,
        )

    def one_x(self) -> int:
        """The gradient trainer's budget (1x): its training evaluations and its checkpoints' selection solves."""
        from learning.counterweight.selection import with_checkpoints

        t = self.train
        return with_checkpoints(t.steps * t.batch_size, t.validate_every * t.batch_size, self.sizes.selection)

    def grids(self, stage: str) -> dict[str, Grid]:
        given = self.stage_a if stage == "A" else self.stage_b
        return given or (STAGE_A if stage == "A" else stage_b_grids(self))


def azimuth_intervals(sectors: int | None) -> tuple[tuple[float, float], ...]:
    """The azimuth intervals of a goal-dependence level: ``sectors`` sectors of ``SECTOR_WIDTH`` spread over the
    counterweight arcs (one at the front arc's centre for 1; each arc's centre for 2; ``k / 2`` per arc at its
    ``(2j + 1) / k`` quantiles otherwise), or the whole circle for ``None``."""
    if sectors is None:
        return ((-math.pi, math.pi),)
    if sectors == 1:
        centres = [sum(ARCS[0]) / 2]
    elif sectors % 2 == 0:
        per_arc = sectors // 2
        centres = [lo + (hi - lo) * (2 * j + 1) / (2 * per_arc) for lo, hi in ARCS for j in range(per_arc)]
    else:
        raise ConfigError(f"sectors must be 1 or even (spread over two arcs), got {sectors}")
    half = SECTOR_WIDTH / 2
    return tuple((c - half, c + half) for c in centres)


def log_spaced(low: float, high: float, count: int) -> tuple[float, ...]:
    ratio = (high / low) ** (1 / (count - 1))
    return tuple(float(f"{low * ratio**i:.3g}") for i in range(count))


def cma_default_population(dimension: int) -> int:
    """The CMA libraries' default population, ``4 + floor(3 ln n)``."""
    return 4 + math.floor(3 * math.log(dimension))


def network_size(width: int, outputs: int = 18) -> int:
    """The weights of the two-tanh-layer network on the goal (3 inputs)."""
    return 3 * width + width + width * width + width + width * outputs + outputs


GRADIENT_A: Grid = (("learning_rate", (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)), ("batch_size", (8, 32)))
STAGE_A: dict[str, Grid] = {
    "gradient": GRADIENT_A,
    "gradient_implicit": GRADIENT_A,
    "es": (("es_sigma", (0.005, 0.01, 0.02, 0.05)), ("es_learning_rate", (0.003, 0.01, 0.03))),
    "pgpe": (("pgpe_stdev", (0.005, 0.01, 0.02, 0.05)), ("pgpe_learning_rate", (0.003, 0.01, 0.03))),
    "sep_cma": (("sep_cma_sigma", log_spaced(0.002, 0.2, 12)),),
    "linear_cma": (("linear_cma_sigma", log_spaced(0.002, 0.5, 12)),),
}
# the setting that a non-base level tunes again, per method
SCALE_SETTING = {
    "gradient": "learning_rate",
    "gradient_implicit": "learning_rate",
    "es": "es_sigma",
    "pgpe": "pgpe_stdev",
    "sep_cma": "sep_cma_sigma",
    "linear_cma": "linear_cma_sigma",
}
# what a setting admits: the edge rule extends no further
MINIMUM = {
    "batch_size": 1,
    "es_pairs": 1,
    "es_batch_size": 1,
    "cma_batch_size": 1,
    "pgpe_batch_size": 1,
    "pgpe_population": 2,
    "sep_cma_population": 4,
    "linear_cma_population": 4,
}
EVEN = {"pgpe_population"}  # PGPE's symmetric sampling


def stage_b_grids(cfg: StudyCfg) -> dict[str, Grid]:
    """Population and goals per candidate (the gradient methods: batch and clip), 12 configurations each; the CMA
    populations 0.5, 1, 2 and 4 times the library's default for the base cell's policy."""
    goals = (1, 4, 16)
    sep = cma_default_population(network_size(cfg.base_width))
    linear = cma_default_population(3 * 18 + 18)
    gradient: Grid = (("batch_size", (4, 8, 16, 32, 64, 128)), ("grad_clip", (1.0, 10.0)))
    return {
        "gradient": gradient,
        "gradient_implicit": gradient,
        "es": (("es_pairs", (4, 8, 16, 32)), ("es_batch_size", goals)),
        "pgpe": (("pgpe_population", (8, 16, 32, 64)), ("pgpe_batch_size", goals)),
        "sep_cma": (("sep_cma_population", tuple(round(s * sep) for s in (0.5, 1, 2, 4))), ("cma_batch_size", goals)),
        "linear_cma": (
            ("linear_cma_population", tuple(round(s * linear) for s in (0.5, 1, 2, 4))),
            ("cma_batch_size", goals),
        ),
    }


STUDY_PRESETS = {
    "full": StudyCfg(),
    "smoke": StudyCfg(
        preset="smoke",
        problem=CounterweightCfg(iterations=8),
        train=TrainCfg(steps=4, batch_size=2, validate_every=2, hidden=16),
        zero_order=ZeroOrderCfg(
            es_pairs=1,
            es_batch_size=1,
            cma_batch_size=1,
            pgpe_population=2,
            pgpe_batch_size=1,
            sep_cma_population=4,
            linear_cma_population=4,
        ),
        baselines=BaselineCfg(online_steps=2, constant_steps=2, constant_batch_size=2, constant_starts=(0.0,)),
        sizes=GoalSetSizes(train=6, tuning=3, selection=2, test=4, per_goal=2),
        sectors=(2,),
        widths=(8, 16),
        tolerances=(0.01,),
        base_width=16,
        multiple=3,
        seeds=(0, 1),
        tuning_seeds=(100, 101),
        max_extensions=1,
        retuned_levels=("width-8",),
        require_properties=False,
        stage_a={
            "gradient": (("learning_rate", (1e-3, 3e-3)),),
            "gradient_implicit": (("learning_rate", (1e-3, 3e-3)),),
            "es": (("es_sigma", (0.02, 0.05)),),
            "pgpe": (("pgpe_stdev", (0.02, 0.05)),),
            "sep_cma": (("sep_cma_sigma", (0.02, 0.05)),),
            "linear_cma": (("linear_cma_sigma", (0.05, 0.15)),),
        },
        stage_b={
            "gradient": (("batch_size", (2, 4)),),
            "gradient_implicit": (("batch_size", (2, 4)),),
            "es": (("es_pairs", (1, 2)),),
            "pgpe": (("pgpe_population", (2, 4)),),
            "sep_cma": (("sep_cma_population", (4, 6)),),
            "linear_cma": (("linear_cma_population", (4, 6)),),
        },
        workers=1,
    ),
}


def study_preset(name: str) -> StudyCfg:
    if name not in STUDY_PRESETS:
        raise ConfigError(f"unknown study preset {name!r}; known: {sorted(STUDY_PRESETS)}")
    return STUDY_PRESETS[name]
