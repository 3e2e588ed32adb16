"""The ray executor on one machine: the smoke grids of both experiments equal the local pool's, a job whose worker
dies is retried by Ray, the environment reaches the workers, and each worker builds its problem once. One local
Ray cluster (2 CPUs) serves every test of this module."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from grid_support import toy_task

from kinematics.errors import ConfigError
from learning.common.jobs import GridError, Job
from learning.common.local_executor import LocalExecutor

ray = pytest.importorskip("ray")
from learning.common.ray_executor import RayExecutor  # noqa: E402

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    # the test helpers' module reaches the workers through the job's runtime environment, as a user's code would
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": str(TESTS)}})
    yield
    ray.shutdown()


def test_the_environment_reaches_the_workers_and_each_builds_its_problem_once(cluster):
    with RayExecutor(2, progress=False) as executor:
        assert not executor.started_here  # it joined the running Ray and leaves it running
        task = toy_task(offset=2.0)
        jobs = [Job("m", (), seed, config=task.config) for seed in range(8)]
        results = executor.map(task, jobs)
    assert [float(r["value"]) for r in results] == [seed + 2.0 for seed in range(8)]
    assert {r["omp_wait_policy"] for r in results} == {"PASSIVE"}
    assert {r["omp_threads"] for r in results} == {"1"} and {r["torch_threads"] for r in results} == {1}
    # a worker process builds the problem once, at its first job, and keeps it for the others
    assert all(r["built_in"] == r["pid"] for r in results) and len({r["pid"] for r in results}) < len(results)
    assert ray.is_initialized()


def test_a_job_on_a_cuda_device_asks_for_a_gpu_and_a_cluster_without_one_says_so(cluster):
    task = dataclasses.replace(toy_task(), device="cuda")
    with RayExecutor(2, progress=False) as executor, pytest.raises(ConfigError, match="ask 1 GPU each, but the Ray"):
        executor.map(task, [Job("m", (), 0, config=task.config)])
    with RayExecutor(2, gpus_per_job=0, progress=False) as executor:  # a CUDA job that asks for no GPU runs anyway
        assert float(executor.map(task, [Job("m", (), 0, config=task.config)])[0]["value"]) == 0.5
    with pytest.raises(ConfigError, match="gpus_per_job must be at least 0"):
        RayExecutor(2, gpus_per_job=-1)


def test_a_job_that_kills_its_worker_is_retried_and_the_grid_completes(cluster, tmp_path):
    task = toy_task(marks=tmp_path)
    jobs = [Job("m", (), 0, config=task.config), Job("die_once", (), 1, config=task.config)]
    with RayExecutor(2, retries=2, progress=False) as executor:
        results = executor.map(task, jobs)
    assert [float(r["value"]) for r in results] == [0.5, 1.5]
    assert (tmp_path / "attempt-1").read_text() == str(results[1]["pid"])  # the retry ran in a new worker


def test_a_job_whose_worker_keeps_dying_is_named_when_its_retries_are_spent(cluster, tmp_path):
    task = toy_task(marks=tmp_path)
    jobs = [Job("m", (), 0, config=task.config), Job("die_always", (), 4, config=task.config)]
    with RayExecutor(2, retries=1, progress=False) as executor, pytest.raises(GridError) as caught:
        executor.map(task, jobs)
    assert "1 of 2 jobs of jobs failed" in str(caught.value) and "die_always() seed 4" in str(caught.value)
    assert "WorkerCrashedError" in caught.value.failures[0].traceback


def test_the_counterweight_smoke_grid_gives_the_local_pools_policies(cluster, tmp_path):
    from learning.counterweight.config import preset
    from learning.counterweight.experiment import build_problem
    from learning.counterweight.goals import make_splits
    from learning.counterweight.protocol import run_protocol

    cfg = preset("smoke")
    splits = make_splits(cfg, build_problem(cfg))
    goals = {name: splits[name].goals for name in ("train", "validation", "tuning")}
    with LocalExecutor(2, progress=False) as local, RayExecutor(2, progress=False) as remote:
        runs = {name: run_protocol(cfg, goals, ex) for name, ex in (("local", local), ("ray", remote))}
    assert runs["local"]["chosen"] == runs["ray"]["chosen"]
    compared = 0
    for (job, trained), (ray_job, ray_trained) in zip(runs["local"]["runs"], runs["ray"]["runs"], strict=True):
        assert job.method == ray_job.method and job.seed == ray_job.seed and job.settings == ray_job.settings
        if job.budget == "evaluations":  # a seconds budget depends on the machine's speed at that moment
            compared += 1
            assert trained.state.keys() == ray_trained.state.keys()
            for name in trained.state:
                assert torch.equal(trained.state[name], ray_trained.state[name]), (job.describe(), name)
            assert trained.curve.validation_success == ray_trained.curve.validation_success
    assert compared == 5


def test_the_grasp_yaw_smoke_grid_gives_the_local_pools_predictors(cluster, tmp_path):
    from learning.common.panda import franka_kinematics
    from learning.grasp_yaw.checkpoints import load_checkpoint
    from learning.grasp_yaw.config import SMOKE
    from learning.grasp_yaw.experiment import checkpoint_path, train_run
    from learning.grasp_yaw.training import TRAINED_METHODS

    with LocalExecutor(2, progress=False) as local, RayExecutor(2, progress=False) as remote:
        train_run(SMOKE, tmp_path / "local", executor=local)
        train_run(SMOKE, tmp_path / "ray", executor=remote)
    kinematics = franka_kinematics()
    for seed in SMOKE.train.seeds:
        for method in TRAINED_METHODS:
            if method == "zero_order_wall_time":
                continue
            _, a = load_checkpoint(checkpoint_path(tmp_path / "local", seed, method), kinematics)
            _, b = load_checkpoint(checkpoint_path(tmp_path / "ray", seed, method), kinematics)
            for name in a["state_dict"]:
                assert torch.equal(a["state_dict"][name], b["state_dict"][name]), (method, seed, name)
            assert a["history"]["val_cost"] == b["history"]["val_cost"]
