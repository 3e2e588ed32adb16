"""Smoke test of ``python -m learning.benchmark --quick``: its suites in-process, valid results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from optional_dependencies import require_module

require_module("pytorch_kinematics", "pip install pytorch-kinematics, or the bench or dev extra")

from learning.benchmark import main  # noqa: E402
from learning.benchmark.constrained_suite import NEAR_LIMITS  # noqa: E402
from learning.benchmark.problem import NEAR_SEED, TARGET_KINDS  # noqa: E402


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _finite_nonneg(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x >= 0


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    assert main(["--quick", "--threads", "1", "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_writes_json_and_markdown(results):
    for suite in ("fk", "ik"):
        assert (results / f"{suite}.md").read_text().startswith("#")
        doc = json.loads((results / f"{suite}.json").read_text())
        assert doc["suite"] == suite
        assert doc["meta"]["torch_threads"] == 1 and doc["meta"]["quick"] is True
        assert {"results" if suite == "fk" else "solves", "goals", "notes", "methods"} <= set(doc)
    assert not list(results.glob(".*.tmp")), "atomic writes left a temp file behind"


def test_fk_schema_and_numbers(results):
    doc = json.loads((results / "fk.json").read_text())
    methods = {(r["dtype"], r["batch"], r["op"], r["method"]) for r in doc["results"]}
    for dtype in ("float32", "float64"):
        for batch in (1, 16):
            for op in ("fk", "fk+jac"):
                assert (dtype, batch, op, "ours.layer") in methods
                assert (dtype, batch, op, "ours.raw") in methods
                assert (dtype, batch, op, "pk") in methods
    for row in doc["results"]:
        assert _positive(row["median_s"]) and _positive(row["per_config_s"]), row
        if not row.get("derived"):
            assert row["repeats"] >= 1 and row["number"] >= 1
            assert row["min_s"] <= row["median_s"] <= row["q3_s"]
    assert all(_positive(r["speedup"]) for r in doc["speedups"])
    for peer, diffs in doc["agreement"].items():
        if isinstance(diffs, dict):
            assert all(_finite_nonneg(v) and v < 1e-5 for v in diffs.values()), (peer, diffs)


def test_ik_schema_and_numbers(results):
    doc = json.loads((results / "ik.json").read_text())
    cases = {(r["batch"], r["targets"], r["method"]) for r in doc["solves"]}
    for batch in (1, 16):
        for kind in TARGET_KINDS:
            for method in ("ours.forward", "ours.opt_in", "ours.forward_backward", "pk.matched", "pk.defaults"):
                assert (batch, kind, method) in cases
    for row in doc["solves"]:
        assert _positive(row["median_s"]) and _positive(row["solves_per_s"]), row
        assert 0.0 <= row["success_rate"] <= 1.0
        for key in ("position_error_m", "rotation_error_rad"):
            stats = row[key]
            assert all(_finite_nonneg(stats[k]) for k in ("mean", "median", "max")), row
            assert stats["median"] <= stats["max"] and stats["mean"] <= stats["max"]
        mem = row["memory"]["cpu_peak_rss_delta_bytes"]
        assert mem is None or (isinstance(mem, int) and mem >= 0)
        if row["method"] == "ours.forward_backward":
            assert row["gradients_finite"] is True
    near = [r for r in doc["solves"] if r["targets"] == NEAR_SEED and r["method"] == "ours.forward"]
    assert near and all(r["success_rate"] >= 0.5 for r in near)
    names = {c["component"] for c in doc["components"]}
    assert {"fk_and_jacobian", "jjt_damped", "solve_ex", "jt_x", "dls_update"} <= names
    assert all(_positive(c["median_s"]) for c in doc["components"])
    assert all(_positive(s["time_over_ours_forward"]) for s in doc["speedups"])
    # No batch 1024 or 8192 in --quick: those goals are not measured, not failed; the batch-1 times are measured
    batch_one = [g for g in doc["goals"] if "batch 1 " in g["goal"]]
    assert len(batch_one) == 2 and all(isinstance(g["met"], bool) for g in batch_one)
    assert {g["met"] for g in doc["goals"] if g not in batch_one} == {None}
    failures = doc["near_seed_failures"]
    causes = ("failed_on_a_limit", "failed_near_singular", "failed_other")
    assert failures["failed"] == sum(failures[k] for k in causes)
    assert failures["failed"] == round((1 - failures["success"]) * failures["batch"])
    rates = [failures["success_qp_step"], *failures["success_at_iterations"].values()]
    rates += list(failures["success_near_ready_pose"].values())
    assert all(0.0 <= r <= 1.0 for r in rates) and len(rates) == 5
    markdown = (results / "ik.md").read_text()
    assert "## Failures with near seeds over the joint box (float64)" in markdown
    assert all(f"## float32, targets: {kind}" in markdown for kind in TARGET_KINDS)


def test_constrained_suite_reports_modes_and_gradient_agreement(results):
    doc = json.loads((results / "constrained.json").read_text())
    assert doc["suite"] == "constrained"
    modes = {(r["targets"], r["mode"]) for r in doc["steps"]}
    assert modes == {(t, m) for t in (NEAR_SEED, NEAR_LIMITS) for m in ("clamp", "qp", "qp+posture")}
    for row in doc["steps"]:
        assert 0.0 <= row["success_rate"] <= 1.0 and row["forward_s"] > 0
        assert row["outside_limits_rows"] == 0
    implicit = [r for r in doc["gradients"] if r["mode"] == "implicit"]
    assert [r["iterations"] for r in implicit] == [16, 24]
    for row in implicit:
        assert row["solved_rows"] > 0 and -1.0 <= row["target_cosine_mean"] <= 1.0
    assert (results / "constrained.md").read_text().startswith("# QP step")


def test_wholebody_targets_read_one_runs_numbers():
    """The whole-body suite's targets table: each target from the row it names, met or not by its threshold, not
    measured where the run lacks the row; the control loop's and the contention's tables in the report."""
    from learning.benchmark.wholebody_suite import goals, markdown

    def row(batch, op, method, per_row_us):
        return {"batch": batch, "op": op, "method": method, "median_s": per_row_us * 1e-6 * batch,
                "per_row_s": per_row_us * 1e-6}  # fmt: skip

    results = [row(1024, "step", "ours", 8.0), row(1024, "step", "pink.loop", 300.0),
               row(1024, "step+bwd", "ours", 20.0), row(1, "step", "ours", 500.0),
               row(1, "step", "pink.loop", 400.0), row(1, "step", "placo.loop", 40.0), row(1, "stepper.step", "ours", 32.0),
               row(1, "stepper.step+vjp", "ours", 56.0),
               row(1, "step+bwd", "ours", 900.0), row(1, "solve", "ours", 4000.0)]  # fmt: skip
    memory = [{"gradient": "implicit", "iterations": 16, "peak_bytes": 2_000_000},
              {"gradient": "implicit", "iterations": 128, "peak_bytes": 2_100_000}]  # fmt: skip
    loop = {"steps": 100, "p50_s": 4e-4, "p99_s": 1e-3, "max_s": 2e-3, "mean_s": 5e-4, "final_hand_error_m": 1e-3,
            "fixed_work": {"p50_s": 4e-4, "p99_s": 6e-4}}  # fmt: skip
    shared = [{"batch": 1024, "omp_wait_policy": "PASSIVE", "quiet_per_row_s": 1e-5, "busy_per_row_s": 2e-5,
               "ratio": 2.0, "threads": 2},
              {"batch": 1024, "omp_wait_policy": "unset", "quiet_per_row_s": 1e-5, "busy_per_row_s": 4e-5,
               "ratio": 4.0, "threads": 2}]  # fmt: skip
    found = {g["goal"]: (round(g["value"], 3), g["met"]) for g in goals(results, memory, loop, shared)}
    assert found == {
        "one cascade step at batch 1: at least as fast as PlaCo's step": (0.08, False),
        "a stepper's step at batch 1 (targets set in place): at least as fast as PlaCo's step": (1.25, True),
        "one cascade step at batch 1: at least as fast as pink.solve_ik": (0.8, False),
        "one cascade step at batch 1: forward+backward <= 2x forward": (1.8, True),
        "a stepper's step at batch 1 and its backward (vjp): <= 2x its step": (1.75, True),
        "control loop at batch 1: p99 of a step < 2x its p50": (2.5, False),
        "one cascade step at batch 1024: <= 5 us per row": (8.0, False),
        "one cascade step at batch 1024: >= 20x faster per row than pink's loop": (37.5, True),
        "one cascade step at batch 1024: forward+backward <= 2x forward": (2.5, False),
        "a full solve at batch 1 (inputs checked, result evaluated): <= 5 ms": (4.0, True),
        "a step at batch 1024 beside a busy process: <= 3x quiet (OMP_WAIT_POLICY=PASSIVE)": (2.0, True),
        "a step at batch 1024 beside a busy process: <= 3x quiet (OMP_WAIT_POLICY unset, as imported)": (4.0, False),
        "implicit backward memory flat (within 10%) from 16 to 128 iterations": (0.048, True),
    }
    assert {g["met"] for g in goals(results[:1], [])} == {False, None}  # 8 µs a row: only the 5 µs target
    doc = {"robot": "g1.urdf", "dtype": "float32", "results": results, "memory": memory, "notes": [],
           "methods": {}, "control_loop": loop, "contention": shared,
           "goals": goals(results, memory, loop, shared)}  # fmt: skip
    report = markdown(doc)
    assert "## Targets" in report and "| NOT met |" in report
    assert "| 400 µs | 1 ms | 2.5× | 2 ms | 500 µs | 1.00 mm |" in report
    assert "| 400 µs | 600 µs | 1.5× |" in report  # the fixed work's
    detail = next(g["detail"] for g in doc["goals"] if g["goal"].startswith("control loop"))
    assert detail == "p99 / p50; fixed work of the same median: 1.50"
    assert "| 1024 | unset | 10 µs | 40 µs | 4" in report
    assert (
        "| 1 | placo.loop | 40 µs | 500 µs | 0.08× | 32 µs | 1.25× |" in report
        and "| 1024 | pink.loop | 300 µs | 8 µs |" in report
    )


def test_whole_runs_of_the_wholebody_suite_are_decided_by_their_medians():
    """``combine``: the first run's tables, each target's value the median of the runs' (the verdict from it, a
    target some run did not measure decided by those that did), every run's value kept and shown."""
    from learning.benchmark.wholebody_suite import combine, goals, markdown

    def run(placo_us, stepper_us, loop_p99_s):
        results = [{"batch": 1, "op": op, "method": method, "median_s": us * 1e-6, "per_row_s": us * 1e-6}
                   for op, method, us in (("step", "ours", 100.0), ("step", "placo.loop", placo_us),
                                          ("stepper.step", "ours", stepper_us))]  # fmt: skip
        loop = None if loop_p99_s is None else {"steps": 10, "p50_s": 1e-4, "p99_s": loop_p99_s, "max_s": 1e-3,
                                                 "mean_s": 1e-4, "final_hand_error_m": 1e-4}  # fmt: skip
        return {"robot": "g1.urdf", "dtype": "float32", "results": results, "memory": [], "notes": [], "methods": {},
                "control_loop": loop, "contention": [], "goals": goals(results, [], loop)}  # fmt: skip

    runs = [run(40.0, 42.0, 3e-4), run(40.0, 36.0, None), run(40.0, 38.0, 1e-4)]
    doc = combine(runs)
    assert doc["runs"] == 3 and doc["results"] is runs[0]["results"]
    found = {g["goal"]: g for g in doc["goals"]}
    stepper = found["a stepper's step at batch 1 (targets set in place): at least as fast as PlaCo's step"]
    assert [round(v, 4) for v in stepper["runs"]] == [round(40 / 42, 4), round(40 / 36, 4), round(40 / 38, 4)]
    assert stepper["value"] == pytest.approx(40 / 38) and stepper["met"] is True  # the first run alone: not met
    loop = found["control loop at batch 1: p99 of a step < 2x its p50"]
    assert loop["runs"][1] is None and loop["value"] == pytest.approx(2.0) and loop["met"] is True  # (3 + 1) / 2
    assert found["one cascade step at batch 1024: <= 5 us per row"]["met"] is None
    report = markdown(doc)
    assert "The median of 3 whole runs" in report
    assert f"| {stepper['goal']} | 0.952 | 1.11 | 1.05 | 1.05 |" in report
    assert "| control loop at batch 1: p99 of a step < 2x its p50 | 3 | — | 1 | 2 |" in report
    assert "The median of" not in markdown(combine(runs[:1]))


def test_the_step_profile_times_every_part_and_derives_the_costs():
    """The batch-1 profile: every part timed in one run (PlaCo's where installed), the C call's ablations each a real
    call (not a freed layer's), and the derived table from the medians."""
    from learning.benchmark import step_profile
    from learning.benchmark.timing import TimingPolicy

    doc = step_profile.run(timing=TimingPolicy(min_repeats=2, budget_s=0.01, floor_repeats=1, repeat_s=0.0005))
    median = {r["part"]: r["median_s"] for r in doc["results"]}
    assert set(median) | {"placo.step"} == set(step_profile.PARTS)
    assert median["c.step"] < median["binding"] < median["step"]
    for ablation in ("c.one_level", "c.no_polygon", "c.no_step_limit"):  # not ~1 µs: it works
        assert median[ablation] > 0.3 * median["c.step"], ablation
    # the backward alone goes through the compiled backward's call; the graph's forward makes the C call too
    assert median["bwd.retained"] > 0.5 * median["c.backward"] and median["step.graph"] > median["c.step"]
    report = step_profile.markdown(doc)
    assert "| `step` |" in report and "| the second cascade level (C) |" in report
    assert "| the backward timed alone (bwd.retained) |" in report
    assert "| the floor of a backward of torch's own nodes, as a ratio to the step (step+bwd.floor / step) |" in report


def test_the_step_profiles_runs_combine_to_each_parts_median():
    """``--runs N`` for the profile: each part the median of its runs' medians, every run's kept, and the page says
    so; one run is the run itself."""
    from learning.benchmark import step_profile

    def run(scale):
        rows = [{"part": name, "median_s": scale * 1e-5, "q1_s": 0.0} for name in step_profile.PARTS]
        return {"suite": "wholebody-profile", "robot": "g1.urdf", "dtype": "float32", "parts": step_profile.PARTS,
                "results": rows, "notes": []}  # fmt: skip

    runs = [run(1.0), run(3.0), run(2.0)]
    doc = step_profile.combine(runs)
    assert doc["runs"] == 3
    for row in doc["results"]:
        assert row["median_s"] == pytest.approx(2e-5) and row["runs_s"] == pytest.approx([1e-5, 3e-5, 2e-5])
    assert "median of its medians in 3 whole runs" in step_profile.markdown(doc)
    assert step_profile.combine(runs[:1]) is runs[0] and "whole runs" not in step_profile.markdown(runs[0])


def test_the_profiles_floor_records_a_graph_to_the_hand_target():
    """``step+bwd.floor`` times a real backward: its graph reaches the hand target (a zero gradient of its shape)."""
    import torch

    from kinematics import KinematicTree
    from kinematics.wholebody import standing_problem
    from learning.benchmark import step_profile
    from learning.benchmark.wholebody_suite import HAND, ROBOT, _targets

    tree = KinematicTree.from_urdf(ROBOT.urdf_text(), floating_base=True, dtype=torch.float32)
    problem = standing_problem(tree, ROBOT)
    flat = problem.layer._targets(_targets(problem, tree, 1, 0), torch.Size([1]))
    q = problem.q_stand.expand(1, -1).contiguous()
    grad = step_profile.floor_step_backward(problem.layer, q, flat)
    assert grad is not None and grad.shape == flat[HAND].shape and not grad.any()


def test_runs_repeat_the_wholebody_suites_only(capsys):
    """``--runs`` above 1 with a suite it does not repeat is refused by the parser, before anything runs."""
    for suite in ("fk", "all"):  # ("all" is fk, ik, constrained and tree)
        with pytest.raises(SystemExit):
            main(["--suite", suite, "--runs", "3"])
        assert "--runs repeats the wholebody and wholebody-profile suites only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--suite", "wholebody", "--runs", "0"])


def test_the_device_suite_times_every_row_at_every_batch_on_the_path_it_names(tmp_path):
    """``--suite device``: the arm's solve and the whole-body step, each with its backward, at every batch, per call
    and per row, each row naming the path its calls take (on the CPU the compiled kernels, where they loaded); the anchor's
    line says when no row was measured at its batch."""
    from kinematics import native
    from learning.benchmark import device_suite

    assert main(["--suite", "device", "--quick", "--threads", "1", "--batches", "1,3", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "device-cpu.json").read_text())
    assert doc["suite"] == "device-cpu" and doc["meta"]["quick"] is True and doc["notes"] == []
    assert [(r["batch"], r["method"]) for r in doc["results"]] == [
        (batch, method) for batch in (1, 3) for method in device_suite.METHODS
    ]
    path = "compiled (C)" if native.library() is not None else "torch ops"
    for r in doc["results"]:
        assert _positive(r["median_s"]) and r["per_row_s"] == r["median_s"] / r["batch"] and r["path"] == path
    report = (tmp_path / "device-cpu.md").read_text()
    assert "| 3 | `wholebody.step+bwd` |" in report and "No row was measured at batch 4096" in report
    doc["results"][0]["batch"] = 4096
    assert "At batch 4,096: `arm.solve`" in device_suite.markdown(
        doc
    ) and "mink-warp's 2.68 µs" in device_suite.markdown(doc)


def test_the_device_suite_records_a_row_out_of_memory_and_skips_its_larger_batches(monkeypatch):
    """A call that runs out of device memory is a row saying so, its larger batches are not tried, and the other
    rows go on; any other error is raised, not recorded."""
    import torch

    from learning.benchmark import device_suite
    from learning.benchmark.timing import TimingPolicy

    def wholebody(problem, batch, seed):
        def step():
            if batch >= 2:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return torch.zeros(batch)

        return {"wholebody.step": step, "wholebody.step+bwd": lambda: torch.zeros(batch)}

    monkeypatch.setattr(device_suite, "_wholebody", wholebody)
    tiny = TimingPolicy(min_repeats=2, budget_s=0.01, floor_repeats=1, repeat_s=0.0005)
    doc = device_suite.run("cpu", batches=(1, 2, 3), iterations=2, timing=tiny)
    rows = {(r["batch"], r["method"]): r for r in doc["results"]}
    assert "median_s" in rows[1, "wholebody.step"] and rows[2, "wholebody.step"] == {
        "batch": 2,
        "method": "wholebody.step",
        "error": "out of memory",
    }
    assert (3, "wholebody.step") not in rows and "median_s" in rows[3, "wholebody.step+bwd"]
    assert doc["notes"] == ["wholebody.step ran out of device memory at batch 2: larger batches skipped"]
    assert "| 2 | `wholebody.step` | out of memory |" in device_suite.markdown(doc)

    def failing(problem, batch, seed):
        def step():
            raise ValueError("a bug, not a lack of memory")

        return {"wholebody.step": step}

    monkeypatch.setattr(device_suite, "_wholebody", failing)
    with pytest.raises(ValueError, match="a bug"):
        device_suite.run("cpu", batches=(1,), iterations=2, timing=tiny)


def _sleeping_rows(monkeypatch, seconds_per_row, calls=None, interrupt=None):
    """The device suite's four rows as calls that sleep ``seconds_per_row[method] * batch`` seconds (counted in
    ``calls``; ``interrupt`` = (batch, method) raises KeyboardInterrupt there, as a killed run stops)."""
    import time

    from learning.benchmark import device_suite

    def rows(names):
        def build(owner, batch, seed):
            def call(name):
                def run():
                    if interrupt == (batch, name):
                        raise KeyboardInterrupt
                    if calls is not None:
                        calls[batch, name] = calls.get((batch, name), 0) + 1
                    time.sleep(seconds_per_row.get(name, 0.0) * batch)

                return run

            return {name: call(name) for name in names}

        return build

    monkeypatch.setattr(device_suite, "_arm", rows(("arm.solve", "arm.solve+bwd")))
    monkeypatch.setattr(device_suite, "_wholebody", rows(("wholebody.step", "wholebody.step+bwd")))


def test_the_device_suite_profiles_one_call_of_the_solve_and_the_step_op_by_op(monkeypatch):
    """At the profile batch, one call of the arm's solve and of the whole-body step runs under ``torch.profiler``: their
    largest ops by self time, each a share of all their ops' time, on the CPU's clock here; no profile where the batch
    is not run, or where a row was not timed there."""
    from learning.benchmark import device_suite
    from learning.benchmark.timing import TimingPolicy

    monkeypatch.setattr(device_suite, "_log", lambda line: None)
    tiny = TimingPolicy(min_repeats=1, budget_s=0.0, floor_repeats=1, repeat_s=0.0, warmup=0)
    doc = device_suite.run("cpu", batches=(1, 2), iterations=2, timing=tiny, profile_batch=2)
    profile = doc["profile"]
    assert profile["batch"] == 2 and list(profile["rows"]) == list(device_suite.PROFILED)
    for row in profile["rows"].values():
        ops = row["ops"]
        assert row["clock"] == "CPU" and 0 < len(ops) <= device_suite.TOP_OPS
        assert row["calls"] >= sum(op["calls"] for op in ops) > 0 and 0 <= row["host_reads"] < row["calls"]
        assert all(op["op"] for op in ops) and ops == sorted(ops, key=lambda op: -op["self_s"])
        assert 0 < sum(op["self_s"] for op in ops) <= row["total_s"] * (1 + 1e-9)
    report = device_suite.markdown(doc)
    assert "Where one call's time goes at batch 2 (`torch.profiler`: each op's self time" in report
    assert "`wholebody.step`: its ops' self CPU time " in report and "in the profiled call (a timed call: " in report
    assert "beyond its ops' ran outside torch's ops" in report and "read a value back to the host" in report
    assert "op calls (views included" in report and "| op | calls | self time | of the ops' |" in report
    assert device_suite.run("cpu", batches=(1,), iterations=2, timing=tiny, profile_batch=2)["profile"] is None

    def no_profiler(fn, cuda, sync):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(device_suite, "_profile", no_profiler)
    doc = device_suite.run("cpu", batches=(2,), iterations=2, timing=tiny, profile_batch=2)
    assert doc["complete"] is True and doc["profile"] is None and len(doc["results"]) == 4
    assert doc["notes"] == ["the profile at batch 2 failed, so none is shown: CUPTI_ERROR_NOT_INITIALIZED"]
    _sleeping_rows(monkeypatch, {"arm.solve": 0.2, "wholebody.step": 0.2})
    doc = device_suite.run("cpu", batches=(1, 2), iterations=2, timing=tiny, call_budget_s=0.05, profile_batch=2)
    assert doc["profile"] is None and "Where one call" not in device_suite.markdown(doc)


def test_a_row_time_is_predicted_from_how_it_grew_flat_while_launch_bound_linear_at_most():
    """The next batch's time grows as the last two timed batches grew, as a power of the batch between 0 and 1;
    from one timing, linearly."""
    from learning.benchmark.device_suite import _predicted_s

    assert _predicted_s([(4, 1.0)], 16) == pytest.approx(4.0)
    assert _predicted_s([(1, 0.4), (16, 0.4)], 256) == pytest.approx(0.4)  # flat: launch-bound
    assert _predicted_s([(1, 0.5), (16, 0.4)], 256) == pytest.approx(0.4)  # faster with the batch: flat, not less
    assert _predicted_s([(256, 0.5), (4096, 8.0)], 65536) == pytest.approx(128.0)  # linear
    assert _predicted_s([(256, 0.1), (4096, 10.0)], 65536) == pytest.approx(160.0)  # faster than linear: linear
    assert _predicted_s([(1, 1.0), (16, 2.0)], 256) == pytest.approx(4.0)  # a quarter power of the batch


def test_the_device_suite_skips_a_row_whose_call_would_outlast_its_budget(monkeypatch):
    """A row whose predicted time at the next batch is over the call budget says so and is not timed there, nor at
    its larger batches; a first call found over the budget likewise. The other rows go on, and the progress total
    drops what will not run. (The timings are scripted: the prediction does not wait on a clock.)"""
    from learning.benchmark import device_suite
    from learning.benchmark.timing import Timing

    _sleeping_rows(monkeypatch, {"wholebody.step+bwd": 0.3})  # its first call outlasts the budget
    scripted = {"wholebody.step": {1: 0.01, 2: 0.02}}

    def measure(fns, policy, sync):
        ((name, fn),) = fns.items()
        seconds = scripted.get(name, {}).get(measure.batch, 1e-4)
        return {name: Timing(seconds, seconds, seconds, seconds, 1, 1)}

    building = device_suite._wholebody

    def wholebody(problem, batch, seed):
        measure.batch = batch
        return building(problem, batch, seed)

    monkeypatch.setattr(device_suite, "measure", measure)
    monkeypatch.setattr(device_suite, "_wholebody", wholebody)
    lines = []
    monkeypatch.setattr(device_suite, "_log", lines.append)
    doc = device_suite.run("cpu", batches=(8, 1, 4, 2), iterations=2, call_budget_s=0.03)
    rows = {(r["batch"], r["method"]): r for r in doc["results"]}
    assert doc["batches"] == [1, 2, 4, 8] and "median_s" in rows[2, "wholebody.step"]
    assert rows[4, "wholebody.step"] == {"batch": 4, "method": "wholebody.step", "error": "over the call budget"}
    assert rows[1, "wholebody.step+bwd"]["error"] == "over the call budget"
    assert not {(8, "wholebody.step"), (2, "wholebody.step+bwd")} & set(rows)
    assert all("median_s" in rows[b, m] for b in (1, 2, 4, 8) for m in ("arm.solve", "arm.solve+bwd"))
    step_note, bwd_note = sorted(doc["notes"], key=lambda n: not n.startswith("wholebody.step:"))
    assert step_note == (
        "wholebody.step: about 40 ms per call predicted at batch 4 (from 20 ms at 2), over the 30 ms call budget: "
        "not timed, nor its larger batches"
    )
    assert bwd_note.startswith("wholebody.step+bwd: its first call at batch 1 took ") and "over the 30 ms" in bwd_note
    assert doc["complete"] is True and lines[-1].startswith("device: 12/12 jobs")  # 16 planned, 4 dropped
    report = device_suite.markdown(doc)
    assert "| 4 | `wholebody.step` | over the call budget |" in report and "would last over 30 ms" in report
    assert "Unfinished" not in report


def test_a_killed_device_run_keeps_its_rows_and_resumes_where_it_stopped(tmp_path, monkeypatch, capsys):
    """The command line writes the document after every row: a run stopped in its second batch leaves the rows it
    measured, marked unfinished; ``--resume`` measures only the rest. It refuses another run's document (other
    settings, code or machine), a finished one, a checkout with changes, and any suite but the device suite."""
    from learning.common import provenance

    commit = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setattr(provenance, "_commit_from_git", lambda results=None: commit)
    args = ["--suite", "device", "--quick", "--batches", "1,2", "--out", str(tmp_path)]
    calls = {}
    _sleeping_rows(monkeypatch, {}, calls, interrupt=(2, "wholebody.step"))
    with pytest.raises(KeyboardInterrupt):
        main(args)
    doc = json.loads((tmp_path / "device-cpu.json").read_text())
    kept = [(r["batch"], r["method"]) for r in doc["results"]]
    assert doc["complete"] is False and kept == [
        (1, "arm.solve"), (1, "arm.solve+bwd"), (1, "wholebody.step"), (1, "wholebody.step+bwd"),
        (2, "arm.solve"), (2, "arm.solve+bwd"),
    ]  # fmt: skip
    assert "**Unfinished**: 6 of 8 rows so far" in (tmp_path / "device-cpu.md").read_text()

    assert main([*args[:-4], "--batches", "1,4", "--out", str(tmp_path), "--resume"]) == 2
    assert "the earlier run differs: batches [1, 2] (this run: [1, 4])" in capsys.readouterr().err
    monkeypatch.setenv("KINEMATICS_NATIVE", "0")
    assert main([*args, "--resume"]) == 2
    error = capsys.readouterr().err
    assert "the earlier run differs: settings {" in error and "(this run: {'KINEMATICS_NATIVE': '0'" in error
    monkeypatch.delenv("KINEMATICS_NATIVE")
    fingerprint = provenance.source_fingerprint
    monkeypatch.setattr(provenance, "source_fingerprint", lambda: "other code")
    assert main([*args, "--resume"]) == 2
    assert "(this run: 'other code')" in capsys.readouterr().err
    monkeypatch.setattr(provenance, "source_fingerprint", fingerprint)
    monkeypatch.setattr(provenance, "_commit_from_git", lambda results=None: commit + "+changes")
    assert main([*args, "--resume"]) == 2
    assert "only a run of a committed state resumes another" in capsys.readouterr().err
    monkeypatch.setattr(provenance, "_commit_from_git", lambda results=None: commit)

    calls.clear()
    _sleeping_rows(monkeypatch, {}, calls)
    assert main([*args, "--resume"]) == 0
    assert set(calls) == {(2, "wholebody.step"), (2, "wholebody.step+bwd")}
    doc = json.loads((tmp_path / "device-cpu.json").read_text())
    assert doc["complete"] is True and len(doc["results"]) == 8
    assert doc["notes"][0].startswith("resumed: 6 rows kept from an earlier run of the same commit on cpu (")
    assert main([*args, "--resume"]) == 2
    assert "is a finished run; nothing to resume" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--suite", "ik", "--resume"])
    assert "--resume goes on with the device suite only" in capsys.readouterr().err


def test_the_device_suite_runs_without_the_optional_peers_or_the_robot_package(tmp_path):
    """What a lent GPU machine has: torch, but none of the optional peers (Pinocchio, pytorch_kinematics, the QP
    solvers, viser, Ray) and no example-robot-data, whose 400 MB do not travel: the device suite runs through torch's
    ops there from copies of the two URDFs it reads (``EXAMPLE_ROBOT_DATA_SHARE``), imports nothing it blocks, and
    profiles."""
    import os
    import shutil
    import subprocess
    import sys

    import assets

    share = tmp_path / "share"
    for robot in (assets.PANDA, assets.G1):
        (share / robot.urdf_file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(robot.urdf_path(), share / robot.urdf_file)
    blocked = ("pinocchio", "pytorch_kinematics", "proxsuite", "qpsolvers", "pink", "placo", "mink", "mujoco", "viser",
               "ray", "cmaes", "evotorch", "rliable", "playwright")  # fmt: skip
    prelude = f"""
import importlib.metadata, sys
for name in {blocked!r}:
    sys.modules[name] = None
real = importlib.metadata.distribution
def distribution(name):
    if name == "example-robot-data":
        raise importlib.metadata.PackageNotFoundError(name)
    return real(name)
importlib.metadata.distribution = distribution
from learning.benchmark import main
sys.exit(main(["--suite", "device", "--quick", "--batches", "1", "--profile-batch", "1", "--out", {str(tmp_path)!r}]))
"""
    env = {**os.environ, "KINEMATICS_NATIVE": "0", "EXAMPLE_ROBOT_DATA_SHARE": str(share)}
    repo = Path(assets.__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", prelude], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads((tmp_path / "device-cpu.json").read_text())
    assert [r["path"] for r in doc["results"]] == ["torch ops"] * 4 and set(doc["profile"]["rows"]) == {
        "arm.solve",
        "wholebody.step",
    }


def test_a_time_renders_in_the_unit_of_its_magnitude_with_its_sign():
    """A derived row is a difference of medians, negative where the machine's noise exceeds the part."""
    from learning.benchmark.report import fmt_time

    assert fmt_time(3.57e-6) == "3.57 µs" and fmt_time(-2.93e-6) == "-2.93 µs"
    assert fmt_time(-0.0123) == "-12.3 ms" and fmt_time(-4e-10) == "-0.4 ns" and fmt_time(float("nan")) == "—"
