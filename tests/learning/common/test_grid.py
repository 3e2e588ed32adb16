"""The job grid's executor (local), its durable results, resume, failures, progress and the run folder's refusals."""

from __future__ import annotations

import dataclasses
import json

import grid_support
import pytest
import torch
from grid_support import toy_task

from kinematics.errors import ConfigError
from learning.__main__ import main as learning_main
from learning.common.executor import worker_problem
from learning.common.executors import make_executor
from learning.common.jobs import GridError, Job, fingerprint, settings_of
from learning.common.local_executor import LocalExecutor
from learning.common.progress import GridProgress
from learning.common.run_folder import RunFolder, config_difference


def _jobs(seeds, method="m", config="offset=0.5,marks=None"):
    return [Job(method, settings_of({"lr": 0.1}), seed, config=config) for seed in seeds]


def test_a_jobs_key_names_its_method_settings_seed_budget_and_configuration():
    base = Job("es", settings_of({"sigma": 0.05, "lr": 0.02}), 3, None, "abc")
    assert base.key == {
        "method": "es", "settings": [["lr", 0.02], ["sigma", 0.05]], "seed": 3, "max_seconds": None, "config": "abc"
    }  # fmt: skip
    others = [
        Job("sep_cma", base.settings, 3, None, "abc"),
        Job("es", settings_of({"sigma": 0.1, "lr": 0.02}), 3, None, "abc"),
        Job("es", base.settings, 4, None, "abc"),
        Job("es", base.settings, 3, 2.5, "abc"),
        Job("es", base.settings, 3, None, "abd"),
    ]
    names = {job.name for job in others}
    assert base.name not in names and len(names) == len(others)
    assert base.name.startswith("es-seed3-evaluations-") and others[3].name.startswith("es-seed3-seconds-")
    assert Job("es", base.settings, 3, None, "abc").name == base.name  # stable
    assert fingerprint({"a": 1, "b": [2]}) == fingerprint({"b": [2], "a": 1}) != fingerprint({"a": 2, "b": [2]})


def test_results_arrive_in_submission_order_are_saved_and_a_resume_runs_only_what_is_missing(tmp_path):
    folder = RunFolder(tmp_path / "run", {"preset": "toy", "workers": 1})
    store, task = folder.results("phase"), toy_task()
    grid_support.BUILDS.clear()
    with LocalExecutor(1, progress=False) as executor:
        results = executor.map(task, _jobs([3, 1, 2]), store, "phase")
    assert [float(r["value"]) for r in results] == [3.5, 1.5, 2.5]
    assert sorted(p.name for p in store.folder.iterdir()) == sorted(f"{job.name}.pt" for job in _jobs([3, 1, 2]))
    saved = torch.load(store.path(_jobs([1])[0]), weights_only=True)
    assert saved["key"] == _jobs([1])[0].key and float(saved["result"]["value"]) == 1.5
    # resumed: the three saved jobs are read back, only seed 0 runs
    folder = RunFolder(tmp_path / "run", {"preset": "toy", "workers": 2}, resume=True)  # workers may change
    ran = []
    with LocalExecutor(1, progress=False) as executor:
        original = task.run
        counted = type(task)(
            task.name, task.build, lambda p, j: ran.append(j.seed) or original(p, j), task.context, task.config
        )
        results = executor.map(counted, _jobs([3, 1, 2, 0]), folder.results("phase"), "phase")
    assert ran == [0] and [float(r["value"]) for r in results] == [3.5, 1.5, 2.5, 0.5]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["workers"] == 2


def test_the_problem_is_built_once_per_process():
    grid_support.BUILDS.clear()
    task = toy_task(offset=1.25, name="built-once")
    with LocalExecutor(1, progress=False) as executor:
        executor.map(task, _jobs(range(4), config=task.config))
        executor.map(task, _jobs(range(4, 6), config=task.config))
    assert len(grid_support.BUILDS) == 1 and worker_problem(task)["offset"] == 1.25


def test_a_job_that_raises_is_named_with_its_traceback_after_the_others_finish(tmp_path):
    store = RunFolder(tmp_path / "run", {"preset": "toy"}).results("phase")
    jobs = [*_jobs([0]), Job("raise", (), 7, config="offset=0.5,marks=None"), *_jobs([1])]
    with LocalExecutor(1, progress=False) as executor, pytest.raises(GridError) as caught:
        executor.map(toy_task(), jobs, store, "phase")
    message = str(caught.value)
    assert "1 of 3 jobs of phase failed" in message and "raise() seed 7" in message
    assert "ValueError: job 7 raised on purpose" in message and "Traceback" in message
    assert [failure.job for failure in caught.value.failures] == [jobs[1]]
    assert store.load(jobs[0]) is not None and store.load(jobs[2]) is not None and store.load(jobs[1]) is None
    assert "job 7 raised on purpose" in (store.folder / f"{jobs[1].name}.failed.txt").read_text()


def test_a_worker_that_runs_other_code_than_the_driver_refuses_its_jobs():
    task = dataclasses.replace(toy_task(name="other-code"), code="0" * 16)
    with LocalExecutor(1, progress=False) as executor, pytest.raises(GridError) as caught:
        executor.map(task, _jobs([0], config=task.config))
    assert "runs other project code than the driver" in str(caught.value)
    assert "install the same commit on every node" in str(caught.value)


def test_a_result_file_that_is_not_its_jobs_is_refused(tmp_path):
    store = RunFolder(tmp_path / "run", {"preset": "toy"}).results("phase")
    job, other = _jobs([0, 1])
    store.save(other, {"value": torch.tensor(1.0)})
    store.path(other).rename(store.path(job))
    with pytest.raises(ConfigError, match="does not hold the result of m"):
        store.load(job)
    store.path(job).write_bytes(b"not a torch file")
    with pytest.raises(ConfigError, match="not a readable job result"):
        store.load(job)


def test_the_run_folder_refuses_another_configuration_and_overwriting(tmp_path):
    run = tmp_path / "run"
    RunFolder(run, {"preset": "smoke", "train": {"steps": 2}, "workers": 1})
    with pytest.raises(ConfigError, match="is not empty; pass --resume"):
        RunFolder(run, {"preset": "smoke", "train": {"steps": 2}, "workers": 1})
    with pytest.raises(ConfigError, match=r"another configuration: train\.steps is 2 in the folder and 48 now"):
        RunFolder(run, {"preset": "smoke", "train": {"steps": 48}, "workers": 1}, resume=True)
    with pytest.raises(ConfigError, match="nothing to resume"):
        RunFolder(tmp_path / "empty", {"preset": "smoke"}, resume=True)
    RunFolder(run, {"preset": "smoke", "train": {"steps": 2}, "workers": 2}, resume=True)
    assert config_difference({"preset": "full", "a": 1}, {"preset": "smoke", "a": 2}).startswith("preset is 'full'")


def test_the_command_line_refuses_before_anything_runs(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "jobs").mkdir(parents=True)
    argv = ["train", "--task", "counterweight", "--preset", "smoke", "--run", str(run)]
    assert learning_main(argv) == 2
    assert "is not empty; pass --resume" in capsys.readouterr().err
    assert learning_main([*argv, "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    assert learning_main([*argv[:-2], "--run", str(tmp_path / "new"), "--address", "127.0.0.1:6379"]) == 2
    assert "--address joins a Ray cluster: it needs --executor ray" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    with pytest.raises(SystemExit):
        learning_main(["train", "--resume"])
    assert "--resume needs the --run folder" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown executor 'dask'"):
        make_executor("dask")
    with pytest.raises(ConfigError, match="workers must be at least 1"):
        make_executor("local", 0)


def test_progress_without_a_terminal_prints_count_elapsed_and_eta():
    lines = []
    progress = GridProgress("tuning", 4, done=1, log=lines.append, terminal=False)
    progress.update("es() seed 0")
    progress.update("es() seed 1")
    progress.update("es() seed 2")
    assert lines[0] == "tuning: 1/4 jobs finished before, resumed"
    assert lines[1].startswith("tuning: 2/4 jobs, 0:00 elapsed, ETA 0:0") and lines[1].endswith(": es() seed 0")
    assert "ETA" not in lines[3] and lines[3].startswith("tuning: 4/4 jobs")
    quiet = []
    GridProgress("x", 2, log=quiet.append, enabled=False).update("y")
    assert quiet == []


def test_progress_drops_jobs_that_will_not_run_from_its_total():
    lines = []
    progress = GridProgress("device", 6, log=lines.append, terminal=False)
    progress.update("a")
    progress.drop(3)
    progress.update("b")
    assert progress.total == 3 and lines[-1].startswith("device: 2/3 jobs")
