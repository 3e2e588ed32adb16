"""What the Franka scene loads before it draws: the experiment's configuration (the preset's, or a run checkpoint's),
the checkpoint's predictor, the run's other trained predictors of its seed, the run's models for the picker and the
cases to browse. What goes wrong is said, not raised: the scene shows the messages and trains from scratch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from app.config import ViewerConfig
from app.grasp_yaw.methods import METHODS, TRAINED_KEYS
from kinematics.errors import ProjectError
from learning.grasp_yaw.checkpoints import load_checkpoint
from learning.grasp_yaw.config import ExperimentCfg, preset
from learning.grasp_yaw.experiment import checkpoint_path
from learning.grasp_yaw.predictors import YawPolicy
from learning.grasp_yaw.splits import load_splits
from learning.grasp_yaw.training import TRAINED_METHODS


@dataclass
class LoadedRun:
    """What ``load_run`` found: ``policy`` is the checkpoint's predictor (None: the live trainer starts from
    scratch), ``model`` its ``(method, seed)``; ``trained`` the run's other predictors of that seed by method key;
    ``models`` every ``(method, seed)`` of the run with a checkpoint; ``messages`` the page's status lines by key."""

    cfg: ExperimentCfg
    policy: YawPolicy | None = None
    run: Path | None = None
    model: tuple[str, int] | None = None
    trained: dict[str, YawPolicy] = field(default_factory=dict)
    models: list[tuple[str, int]] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)


def load_run(config: ViewerConfig, kinematics) -> LoadedRun:
    """The configuration and predictors ``config`` names (``config.checkpoint``: a run's checkpoint, or None)."""
    cfg = dataclasses.replace(preset(config.preset), device=config.device)
    if config.checkpoint is None:
        return LoadedRun(cfg, messages={"checkpoint": (
            f"No checkpoint: training the predictor from scratch (preset `{cfg.preset}`), and the teacher-supervised "
            "one on the teacher's labels; the zero-order and shared-constant predictors come with a run (`--run RUN`)."
        )})  # fmt: skip
    try:
        policy, meta = load_checkpoint(config.checkpoint, kinematics)
        cfg = dataclasses.replace(ExperimentCfg.from_dict(meta["config"]), device=config.device)
    except ProjectError as exc:
        message = f"⚠ checkpoint `{config.checkpoint}` could not be loaded: {exc} — training from scratch."
        return LoadedRun(cfg, messages={"checkpoint": message})
    run, seed = Path(config.checkpoint).resolve().parents[2], int(meta["seed"])
    loaded = LoadedRun(cfg, policy, run, (str(meta["method"]), seed))
    loaded.messages["checkpoint"] = (
        f"Loaded `{config.checkpoint}` ({meta['method']}, seed {seed}); trainer paused: Start fine-tunes it."
    )
    problems = []
    for method in METHODS:  # the run's other trained predictors of the seed; a missing or unreadable one is said
        if method.key not in TRAINED_KEYS or method.key == "learned":
            continue
        try:
            loaded.trained[method.key] = load_checkpoint(
                checkpoint_path(run, seed, method.experiment_name), kinematics
            )[0]
        except ProjectError as exc:
            problems.append(f"{method.label}: {exc}")
    if problems:
        loaded.messages["run"] = "⚠ not loaded from the run: " + "; ".join(problems)
    methods = sorted(TRAINED_METHODS, key=lambda m: m != "ik_trained")  # the one the experiment is about first
    loaded.models = [(m, s) for m in methods for s in cfg.train.seeds if checkpoint_path(run, s, m).is_file()]
    return loaded


def case_splits(run: Path | None, cfg: ExperimentCfg, splits: dict, kinematics) -> tuple[dict, str]:
    """The test cases to browse: the run's saved splits, or ``splits`` (the preset's: the goals a run of it saves),
    on the kinematics' device and dtype, and a sentence saying which."""
    if run is not None and (run / "splits.pt").is_file():
        splits = load_splits(run / "splits.pt")
        source = f"The saved cases of run `{run.name}`."
    else:
        source = f"The cases of preset `{cfg.preset}` (no run loaded)."
    return {name: s.to(kinematics.device, kinematics.dtype) for name, s in splits.items()}, source
