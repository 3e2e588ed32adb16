"""The stale-result rule of the viewer (``app.shell.generations``), with deterministic interleavings and no sleeps."""

from __future__ import annotations

import queue
import threading

from app.shell.generations import GenerationGate


def test_result_for_older_generation_is_discarded() -> None:
    gate: GenerationGate[str] = GenerationGate()
    old = gate.submit("a")
    request = gate.take(timeout=0)
    assert request is not None and request.generation == old
    new = gate.submit("b")  # the inputs change while "a" is being computed
    drawn: list[str] = []
    assert not gate.publish(old, lambda: drawn.append("a"))
    assert gate.take(timeout=0).generation == new
    assert gate.publish(new, lambda: drawn.append("b"))
    assert drawn == ["b"] and gate.discarded == 1 and gate.drawn == 1


def test_worker_takes_only_the_latest_request() -> None:
    gate: GenerationGate[int] = GenerationGate()
    for value in range(5):
        gate.submit(value)
    request = gate.take(timeout=0)
    assert request.inputs == 4 and request.generation == 5
    assert gate.take(timeout=0) is None  # nothing newer: the skipped ones are never computed


def test_submit_during_draw_waits_so_the_draw_is_never_stale() -> None:
    """A submit racing with a draw either lands before it (the draw is discarded) or after it (drawn, then stale)."""
    gate: GenerationGate[str] = GenerationGate()
    generation = gate.submit("a")
    in_draw, release = threading.Event(), threading.Event()
    current_at_draw: list[bool] = []

    def draw() -> None:
        current_at_draw.append(gate.latest.inputs == "a")
        in_draw.set()
        release.wait()

    publisher = threading.Thread(target=lambda: gate.publish(generation, draw))
    publisher.start()
    in_draw.wait()
    submitted = threading.Event()
    submitter = threading.Thread(target=lambda: (gate.submit("b"), submitted.set()))
    submitter.start()
    assert not submitted.wait(timeout=0.05)  # blocked by the draw holding the lock
    release.set()
    publisher.join()
    submitter.join()
    assert current_at_draw == [True]
    assert gate.latest.inputs == "b" and not gate.is_current(generation)


def test_on_submit_runs_before_any_result_for_the_new_inputs() -> None:
    gate: GenerationGate[str] = GenerationGate()
    events: list[str] = []
    generation = gate.submit("a", on_submit=lambda: events.append("pending a"))
    gate.publish(generation, lambda: events.append("drawn a"))
    assert events == ["pending a", "drawn a"]


def test_rapid_burst_draws_zero_stale_results_and_the_last_one() -> None:
    """N inputs in a burst while a worker thread computes; every other result is overtaken mid-computation.

    The interleaving is scripted with queues (no sleeps): even inputs finish before the next submit, odd ones
    after it. At each draw the test records whether the drawn inputs are the current ones.
    """
    gate: GenerationGate[int] = GenerationGate()
    n = 101
    taken, go, done = queue.Queue(), queue.Queue(), queue.Queue()
    stale, drawn_values = 0, []

    def draw(value: int) -> None:
        nonlocal stale
        stale += gate.latest.inputs != value
        drawn_values.append(value)

    def worker() -> None:
        while (request := gate.take()) is not None:
            taken.put(request.inputs)
            go.get()
            gate.publish(request.generation, lambda v=request.inputs: draw(v))
            done.put(None)

    def finish_computation() -> None:
        go.put(None)
        done.get()

    thread = threading.Thread(target=worker)
    thread.start()
    overtaken = False
    for value in range(n):
        gate.submit(value)
        if overtaken:
            finish_computation()  # the previous request finishes after its inputs changed
        assert taken.get() == value
        overtaken = value % 2 == 1
        if not overtaken:
            finish_computation()
    if overtaken:
        finish_computation()
    gate.close()
    thread.join()
    assert stale == 0
    assert drawn_values[-1] == n - 1
    assert drawn_values == list(range(0, n, 2))
    assert gate.discarded == n // 2


def test_close_wakes_a_waiting_worker() -> None:
    gate: GenerationGate[int] = GenerationGate()
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(gate.take()))
    thread.start()
    gate.close()
    thread.join()
    assert result == [None]
