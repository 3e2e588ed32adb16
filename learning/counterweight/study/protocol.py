"""The study's protocol, as pre-registered (``docs/counterweight-study.md``), on the experiments' executor:

1. diagnostics of every task (the width cells share the base cell's), written before any training; a cell that
   loses the task's properties is not trained;
2. base tuning, stage A, then stage B from the largest budget's stage A choice, each with the edge rule's
   extensions; each budget chooses over both stages' configurations;
3. in ``cfg.retuned_levels`` (or, where one is not kept, the hardest kept level of its axis: amendment 3), the
   zero-order methods' scale setting at 10x around the base choice, with the edge rule (the other levels take the
   base choices);
4. ten seeds of every method at each budget's choice in every kept cell.

Every phase interleaves the methods (gradient and zero-order jobs side by side, sharing the machine's load). All
training results go to one store (``jobs/runs/``), written as they arrive, so a job asked for twice runs once and
``--resume`` runs only what is missing; the searches are deterministic given the results, so a resumed study
retraces the same choices.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from learning.common.executor import Executor
from learning.common.io import atomic_write_json
from learning.common.jobs import Job, settings_of
from learning.common.provenance import provenance
from learning.common.run_folder import RunFolder
from learning.counterweight.study.design import (
    BUDGETS,
    GOAL_SETS,
    GRADIENT_STUDY_METHODS,
    SCALE_SETTING,
    STUDY_METHODS,
    Cell,
    StudyCfg,
)
from learning.counterweight.study.tasks import diagnostics_task, training_task
from learning.counterweight.study.tuning import Search, neighbourhood

EQUAL_TIME_MULTIPLE = 3  # amendment 2: the run length of a zero-order setting chosen for equal wall time only


def method_budgets(method: str) -> tuple[str, ...]:
    return ("1x",) if method in GRADIENT_STUDY_METHODS else BUDGETS


def cell_methods(cfg: StudyCfg, cell: Cell) -> tuple[str, ...]:
    """The methods trained in ``cell``: the linear policy does not change with width, so the width cells take its
    base cell's runs; ``gradient_implicit`` only in ``cfg.implicit_cells``."""
    return tuple(
        m
        for m in STUDY_METHODS
        if not (cell.axis == "width" and m == "linear_cma")
        and not (m == "gradient_implicit" and cell.name not in cfg.implicit_cells)
    )


def best_row(rows: list[dict], budget: str) -> dict:
    """The tuning row with the best score at ``budget`` (ties: the last iterate's, then the first)."""
    return max(rows, key=lambda row: (row[budget], row[f"{budget}_last"]))


def _grouped(choices: dict[str, dict]) -> list[tuple[dict, tuple[str, ...]]]:
    """Budgets grouped by the settings they chose: ``[(settings, budgets)]`` in budget order."""
    groups: list[tuple[dict, list[str]]] = []
    for budget, settings in choices.items():
        for chosen, budgets in groups:
            if chosen == settings:
                budgets.append(budget)
                break
        else:
            groups.append((settings, [budget]))
    return [(settings, tuple(budgets)) for settings, budgets in groups]


class Study:
    """One run of the study in ``folder`` on ``executor``."""

    def __init__(self, cfg: StudyCfg, folder: RunFolder, executor: Executor, log: Callable[[str], None]) -> None:
        self.cfg, self.folder, self.executor, self.log = cfg, folder, executor, log
        self.results: dict[str, dict] = {}
        self.phase_seconds: dict[str, float] = {}
        self.equal_time_limit: dict[str, float] = {}  # per cell, for tuning (``tuning_limits``)
        self.session = {"started": time.strftime("%Y-%m-%dT%H-%M-%S"), "phase_seconds": self.phase_seconds}
        self.store = folder.results("runs")
        self.one_x = cfg.one_x()
        self.most = cfg.multiple * self.one_x

    # ---- running jobs

    def job(self, cell: str, method: str, settings: dict, seed: int, probe: str, evaluations: int) -> Job:
        own = {"cell": cell, "evaluations": evaluations, "probe": probe}
        return Job(method, settings_of({**settings, **own}), seed, config=self.task.config)

    def length(self, method: str, budgets: tuple[str, ...]) -> int:
        """A run's layer evaluations: what its largest budget needs. A zero-order run chosen for equal wall time
        but not for 10x stops at ``EQUAL_TIME_MULTIPLE`` x 1x (the gradient trainer's 1x seconds buy a zero-order
        method under 1x here; a run that ends first is read at its end and counted as ended before its budget)."""
        if budgets == ("1x",) or method in GRADIENT_STUDY_METHODS:
            return self.one_x
        if "10x" in budgets:
            return self.most
        return min(self.most, EQUAL_TIME_MULTIPLE * self.one_x)

    def run(self, jobs: list[Job], phase: str) -> None:
        unique = list({job.name: job for job in jobs if job.name not in self.results}.values())
        if not unique:
            return
        started = time.perf_counter()
        try:
            for job, result in zip(unique, self.executor.map(self.task, unique, self.store, phase), strict=True):
                settings = dict(job.settings)
                result["_cell"], result["_probe"] = settings["cell"], settings["probe"]  # for the tuning limits
                self.results[job.name] = result
        finally:  # a phase that raises keeps the seconds it spent (its finished runs are stored)
            self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + time.perf_counter() - started
            self.save_session()

    def save_session(self) -> None:
        """This session's phase seconds in ``sessions/<start>.json``: the study's time is their sum over the
        sessions that ran it (amendment 2)."""
        atomic_write_json(self.folder.path / "sessions" / f"{self.session['started']}.json", self.session)

    # ---- tuning

    def tuning_runs(self, search: Search, settings: dict) -> list[dict]:
        length = self.length(search.method, search.budgets)
        return [
            self.results[self.job(search.cell, search.method, settings, seed, "tuning", length).name]
            for seed in self.cfg.tuning_seeds
        ]

    def tuning_limits(self, cell: str) -> dict[str, dict]:
        """Each budget's limit in ``cell``'s tuning; equal wall time: the median seconds of the ``gradient``
        tuning runs there (at 1x, under the same load) of the first round that has them, then kept for every later
        round and stage (amendment 3: every row of a search is scored at the same limit)."""
        limits = {"1x": {"max_evaluations": self.one_x}, "10x": {"max_evaluations": self.most}}
        if cell not in self.equal_time_limit:
            seconds = [
                result["curve"]["seconds"][-1]
                for name, result in self.results.items()
                if name.startswith("gradient-") and result["_cell"] == cell and result["_probe"] == "tuning"
            ]
            if seconds:  # a level's search tunes 10x alone
                self.equal_time_limit[cell] = statistics.median(seconds)
        if cell in self.equal_time_limit:
            limits["equal_time"] = {"max_seconds": self.equal_time_limit[cell]}
        return limits

    def search(self, searches: list[Search], phase: str) -> None:
        while True:
            active = [s for s in searches if not s.done]
            if not active:
                return
            per_search = [
                [
                    self.job(s.cell, s.method, settings, seed, "tuning", self.length(s.method, s.budgets))
                    for settings in s.settings()
                    for seed in self.cfg.tuning_seeds
                ]
                for s in active
            ]
            interleaved = [job for row in _zip_longest(per_search) for job in row]
            round_number = max(s.rounds for s in active) + 1
            self.log(f"{phase}, round {round_number}: {len(active)} searches")
            self.run(interleaved, f"{phase} round {round_number}")
            for s in active:
                s.update(lambda settings, s=s: self.tuning_runs(s, settings), self.tuning_limits(s.cell))
            self.save_tuning(searches, phase)

    def save_tuning(self, searches: list[Search], phase: str) -> None:
        atomic_write_json(self.folder.path / "tuning" / f"{phase}.json", [s.to_dict() for s in searches])

    # ---- the protocol

    def diagnostics(self) -> dict[str, dict]:
        cfg = self.cfg
        task = diagnostics_task(cfg)
        first: dict[tuple, Cell] = {}
        for cell in cfg.cells():
            first.setdefault(cell.task, cell)
        jobs = [Job("diagnostics", settings_of({"cell": c.name}), 0, config=task.config) for c in first.values()]
        started = time.perf_counter()
        outputs = self.executor.map(task, jobs, self.folder.results("diagnostics"), "diagnostics")
        self.phase_seconds["diagnostics"] = time.perf_counter() - started
        self.save_session()
        by_task = {cell.task: output for cell, output in zip(first.values(), outputs, strict=True)}
        return {cell.name: by_task[cell.task] for cell in cfg.cells()}

    def __call__(self) -> dict:
        cfg, log = self.cfg, self.log
        started = time.perf_counter()
        cells = self.diagnostics()
        diagnostics = {name: output["diagnostics"] for name, output in cells.items()}
        atomic_write_json(self.folder.path / "diagnostics.json", diagnostics)  # before any training
        kept = [cell for cell in cfg.cells() if diagnostics[cell.name]["kept_cell"] or not cfg.require_properties]
        for cell in cfg.cells():
            d = diagnostics[cell.name]
            log(
                f"{cell.name}: reach only {d['reach_only']:.2f}, without balance {d['no_balance']:.2f}, "
                f"constant {d['best_constant']:.2f}, per-goal {d['per_goal']:.2f}: "
                f"{'kept' if d['kept_cell'] else 'NOT kept (loses the task properties)'}"
            )
        out = {"diagnostics": diagnostics, "kept": [c.name for c in kept], "choices": {}, "runs": {}}
        if "base" not in out["kept"]:
            log("the base cell does not keep the task's properties: nothing is trained")
            out["seconds"] = time.perf_counter() - started
            return out
        goals = {c.name: {s: cells[c.name]["goal_sets"][s]["goals"] for s in GOAL_SETS} for c in kept}
        self.task = training_task(cfg, goals)

        stage_a = cfg.grids("A")
        searches_a = [
            Search("base", m, "A", stage_a[m], {}, method_budgets(m), cfg.max_extensions) for m in STUDY_METHODS
        ]
        self.search(searches_a, "tuning A")
        stage_b = cfg.grids("B")
        searches_b = [  # from the largest budget's stage A choice; every budget then chooses over A and B
            Search("base", s.method, "B", stage_b[s.method], s.choices[s.budgets[-1]], s.budgets, cfg.max_extensions)
            for s in searches_a
        ]
        self.search(searches_b, "tuning B")
        base = {
            a.method: {budget: best_row([*a.scores, *b.scores], budget)["settings"] for budget in a.budgets}
            for a, b in zip(searches_a, searches_b, strict=True)
        }
        choices = {"base": base}
        scale_values = {s.method: dict(s.grid)[SCALE_SETTING[s.method]] for s in searches_a}
        searches_level = []
        retuned = retuned_levels(cfg, [c.name for c in kept])
        for cell in kept[1:]:
            for m in cell_methods(cfg, cell):
                choices.setdefault(cell.name, {})[m] = dict(base[m])
                if cell.name not in retuned or m in GRADIENT_STUDY_METHODS:
                    continue
                setting, settings = SCALE_SETTING[m], base[m]["10x"]
                fixed = {k: v for k, v in settings.items() if k != setting}
                grid = ((setting, neighbourhood(scale_values[m], settings[setting])),)
                searches_level.append(Search(cell.name, m, "level", grid, fixed, ("10x",), cfg.max_extensions))
        self.search(searches_level, "tuning levels")
        for s in searches_level:
            choices[s.cell][s.method]["10x"] = s.choices["10x"]
        out["choices"] = choices
        out["tuning"] = [s.to_dict() for s in (*searches_a, *searches_b, *searches_level)]

        seed_jobs, index = [], {}
        for seed in cfg.seeds:
            for cell in kept:
                for m in cell_methods(cfg, cell):
                    for settings, budgets in _grouped(choices[cell.name][m]):
                        job = self.job(cell.name, m, settings, seed, "test", self.length(m, budgets))
                        seed_jobs.append(job)
                        for budget in budgets:
                            index[(cell.name, m, budget, seed)] = job.name
        log(f"seeds: {len(seed_jobs)} runs")
        self.run(seed_jobs, "seeds")
        runs: dict = {}
        for (cell, method, budget, seed), name in index.items():
            runs.setdefault(cell, {}).setdefault(method, {}).setdefault(budget, {})[seed] = name
        for cell in kept:
            if cell.axis == "width" and "linear_cma" in runs["base"]:
                runs[cell.name]["linear_cma"] = runs["base"]["linear_cma"]
        out["runs"] = runs
        out["retuned_levels"] = list(retuned)
        out["phase_seconds"] = dict(self.phase_seconds)
        out["seconds"] = time.perf_counter() - started
        out["sessions"] = sessions(self.folder.path)
        return out


def retuned_levels(cfg: StudyCfg, kept: list[str]) -> tuple[str, ...]:
    """The levels whose zero-order scale setting is tuned again: ``cfg.retuned_levels`` where kept; for one that is
    not kept, the hardest kept level of its axis that is harder than the base, if any (amendment 3)."""
    axis_of = {name: axis for axis, names in cfg.axes().items() for name in names}
    out = []
    for level in cfg.retuned_levels:
        if level in kept:
            out.append(level)
            continue
        axis = cfg.axes()[axis_of[level]]  # easiest first
        harder_first = [name for name in reversed(axis[axis.index("base") + 1 :]) if name in kept]
        if harder_first:
            out.append(harder_first[0])
    return tuple(dict.fromkeys(out))


def _zip_longest(rows: list[list[Job]]) -> list[list[Job]]:
    """Round-robin over the searches' jobs: the first of each, then the second of each, ..."""
    longest = max((len(row) for row in rows), default=0)
    return [[row[i] for row in rows if i < len(row)] for i in range(longest)]


def run_study(
    cfg: StudyCfg, folder: RunFolder, executor: Executor, log: Callable[[str], None] = print, command: str = ""
) -> dict:
    """The whole protocol; ``study.json`` (what the analysis reads, with the provenance of the code that ran it)
    written at the end, and ``torch`` results kept in the folder's job store."""
    ran = provenance(command)
    out = Study(cfg, folder, executor, log)()
    out["provenance"] = ran
    atomic_write_json(folder.path / "study.json", out)
    return out


def sessions(folder: Path) -> list[dict]:
    """Every session's record (``Study.save_session``), oldest first."""
    return [json.loads(path.read_text()) for path in sorted((Path(folder) / "sessions").glob("*.json"))]


def load_results(folder: Path, names) -> dict[str, dict]:
    """The stored results of the named jobs (``study.json``'s ``runs``) in the study's ``folder``."""
    store = Path(folder) / "jobs" / "runs"
    return {name: torch.load(store / f"{name}.pt", weights_only=True)["result"] for name in names}
