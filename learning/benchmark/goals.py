"""The project's speed targets, checked against one run's numbers (where that dtype and batch were
measured)."""

from __future__ import annotations

from learning.benchmark.problem import DISTANT_SEED, NEAR_SEED


def goal(text: str, value: float | None, threshold: float, higher_is_better: bool, detail: str = "") -> dict:
    met = None if value is None else (value >= threshold if higher_is_better else value <= threshold)
    return {"goal": text, "value": value, "threshold": threshold, "higher_is_better": higher_is_better, "met": met,
            "detail": detail}  # fmt: skip


def ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def fk_goals(doc: dict) -> list[dict]:
    """FK+Jacobian at batch 1024 and 1, float32, against pytorch_kinematics and Pinocchio."""
    idx = {(r["dtype"], r["batch"], r["op"], r["method"]): r["median_s"] for r in doc["results"]}

    def t(batch: int, method: str) -> float | None:
        return idx.get(("float32", batch, "fk+jac", method))

    goals = []
    for batch, need in ((1024, 3.0), (1, 2.0)):
        ours, raw = t(batch, "ours.layer"), t(batch, "ours.raw")
        pk, one = t(batch, "pk"), t(batch, "pk.one_pass")
        detail = (
            f"ours.raw: {_fmt(ratio(pk, raw))}; vs pk.one_pass (FK and J in one call): "
            f"{_fmt(ratio(one, ours))} (ours.raw {_fmt(ratio(one, raw))})"
        )
        goals.append(
            goal(
                f"FK+J batch {batch} float32: pk time / ours time >= {need:g}",
                ratio(pk, ours),
                need,
                True,
                detail,
            )
        )
    ours, raw, pin = t(1024, "ours.layer"), t(1024, "ours.raw"), t(1024, "pin.single_x_batch")
    goals.append(
        goal(
            "FK+J batch 1024 float32: 1024 x Pinocchio single-config time / ours time >= 1",
            ratio(pin, ours),
            1.0,
            True,
            f"ours.raw: {_fmt(ratio(pin, raw))}; Pinocchio time from a Python-bound tight loop "
            f"(includes call overhead); vs pin.loop: {_fmt(ratio(t(1024, 'pin.loop'), ours))}",
        )
    )
    return goals


def ik_goals(doc: dict) -> list[dict]:
    """IK forward against pk.matched, near-seed success and the backward pass's cost (batch 1024, float32); the
    fused solve's times at batch 1, 1024 and 8192; the opt-in settings' success and cost."""
    rows = {(r["dtype"], r["batch"], r["targets"], r["method"]): r for r in doc["solves"]}

    def row(method: str, kind: str = NEAR_SEED, batch: int = 1024) -> dict:
        return rows.get(("float32", batch, kind, method), {})

    fwd, bwd, pk = row("ours.forward"), row("ours.forward_backward"), row("pk.matched")
    fwd_d, bwd_d, pk_d = (
        row("ours.forward", DISTANT_SEED),
        row("ours.forward_backward", DISTANT_SEED),
        row("pk.matched", DISTANT_SEED),
    )
    return [
        goal(
            f"IK forward batch 1024 float32 {NEAR_SEED}: pk.matched time / ours time >= 5",
            ratio(pk.get("median_s"), fwd.get("median_s")),
            5.0,
            True,
            f"distant seeds: {_fmt(ratio(pk_d.get('median_s'), fwd_d.get('median_s')))}",
        ),
        goal(
            f"IK batch 1024 float32 {NEAR_SEED}: success rate >= 0.99",
            fwd.get("success_rate"),
            0.99,
            True,
            f"pk.matched: {_fmt(pk.get('success_rate'))}; distant seeds: {_fmt(fwd_d.get('success_rate'))}",
        ),
        goal(
            f"IK batch 1024 float32 {NEAR_SEED}: forward+backward time / forward time <= 4",
            ratio(bwd.get("median_s"), fwd.get("median_s")),
            4.0,
            False,
            f"distant seeds: {_fmt(ratio(bwd_d.get('median_s'), fwd_d.get('median_s')))}",
        ),
        *_time_goals(row),
        goal(
            f"IK batch 1024 float32 {NEAR_SEED}, opt-in settings: success rate >= 0.995",
            row("ours.opt_in").get("success_rate"),
            0.995,
            True,
            f"distant seeds: {_fmt(row('ours.opt_in', DISTANT_SEED).get('success_rate'))}",
        ),
        goal(
            f"IK batch 1024 float32 {NEAR_SEED}, opt-in settings: time / default forward time <= 1.3",
            ratio(row("ours.opt_in").get("median_s"), fwd.get("median_s")),
            1.3,
            False,
            f"distant seeds: {_fmt(ratio(row('ours.opt_in', DISTANT_SEED).get('median_s'), fwd_d.get('median_s')))}",
        ),
    ]


def _time_goals(row) -> list[dict]:
    """The fused solve's absolute times (this machine's 2 cores; noisy)."""
    limits = [(1, "ours.forward", 150e-6), (1, "ours.forward_backward", 500e-6), (1024, "ours.forward", 2e-3),
              (8192, "ours.forward", 15e-3)]  # fmt: skip
    goals = []
    for batch, method, limit in limits:
        seconds = row(method, batch=batch).get("median_s")
        pin = row("pin.dls", batch=batch).get("median_s")
        goals.append(
            goal(
                f"IK batch {batch} float32 {NEAR_SEED}: {method} time (s) <= {limit:g}",
                seconds,
                limit,
                False,
                "" if pin is None else f"pin.dls: {_fmt(pin)} s",
            )
        )
    return goals


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"
