"""The question a scene answers (a target, start joints, the snapshots of the policies trained live) and its one
owner.

``QuestionBoard`` holds the current ``Question``. It is changed only by ``ask`` and by adopting a trainer snapshot,
both under ``QuestionBoard.lock``; that lock is also the lock of every ``GenerationGate`` the board feeds, and
``GenerationGate.publish`` draws under it. So a change of the question, the new generations it gives the gates and
the pending marks drawn for it are one atomic step, and a drawn answer is always an answer to the question that
is current while it is drawn. Readers that only need a consistent value read ``current`` without the lock: it is
an immutable object, replaced whole.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from torch import nn

from app.shell.generations import GenerationGate

Place = tuple[tuple[float, float, float], tuple[float, ...]]  # (p, q0): what the searches' answers depend on
LEARNED_KEY = "learned"  # the method key of the policy trained live, unless the scene names another


class Source(enum.Enum):
    """Who changed the question; the control that moved is never written back while it moves."""

    GIZMO = "gizmo"  # the target dragged in the 3D scene
    INPUTS = "inputs"  # the numbers typed into the panel (target, q0)
    PROGRAM = "program"  # buttons (random target / q0, ready pose) and the Python API
    TRAINER = "trainer"  # a new policy snapshot


@dataclass(frozen=True)
class Question:
    """One question: target ``p`` (m, root frame), start joints ``q0`` (rad; empty where the scene has none) and the
    snapshots of the policies trained live to ask (``versions``: ``(method key, snapshot version)`` pairs, sorted; the
    snapshots themselves in ``policies``, compared through their versions)."""

    p: tuple[float, float, float]
    q0: tuple[float, ...]
    versions: tuple[tuple[str, int], ...] = ()
    policies: Mapping[str, nn.Module] = field(default_factory=dict, compare=False, repr=False)

    @property
    def place(self) -> Place:
        return self.p, self.q0

    @property
    def policy(self) -> nn.Module | None:
        """The snapshot of the policy under ``LEARNED_KEY``."""
        return self.policies.get(LEARNED_KEY)

    def with_snapshot(self, key: str, version: int, policy: nn.Module) -> Question:
        versions = dict(self.versions) | {key: version}
        return replace(self, versions=tuple(sorted(versions.items())), policies={**self.policies, key: policy})


Listener = Callable[[Question | None, Question, Source], None]  # (old, new, source) under the board's lock


class QuestionBoard:
    """The single source of the current question.

    Args:
        question: the first question.
        on_change: called with ``(old, new, source)`` under the lock, before any answer to ``new`` can be drawn
            (``old`` is None for the first question, which ``begin`` announces)
            to update the controls and mark answers pending; it must not block on other threads. If it raises, the
            question has still changed and the exception reaches the caller of ``ask``.

    Attributes:
        lock: the one lock of the question and of both gates (re-entrant).
        fast: requests for the methods answered at once (a rule or a network plus one IK check).
        search: requests for the methods that search (their answers depend on ``place`` only).
    """

    def __init__(self, question: Question, on_change: Listener) -> None:
        self.lock = threading.Condition(threading.RLock())
        self.fast: GenerationGate[Question] = GenerationGate(self.lock)
        self.search: GenerationGate[Place] = GenerationGate(self.lock)
        self._current = question
        versions = dict(question.versions)
        self._offered: dict[str, tuple[int, nn.Module]] = {k: (versions[k], p) for k, p in question.policies.items()}
        self._offered_p: tuple[float, float, float] | None = None  # a dragged target waiting for an idle worker
        self._on_change = on_change

    @property
    def current(self) -> Question:
        return self._current

    @property
    def newest_policy(self) -> nn.Module | None:
        """The newest snapshot offered under ``LEARNED_KEY``, adopted or not yet."""
        offered = self._offered.get(LEARNED_KEY)
        return None if offered is None else offered[1]

    @property
    def newest_offer(self) -> tuple[int, nn.Module] | None:
        """``(version, snapshot)`` of the newest offer under ``LEARNED_KEY`` (a trainer snapshot, or a run's model
        at a negative version), adopted or not yet."""
        return self._offered.get(LEARNED_KEY)

    def begin(self) -> None:
        """Announce the first question to the listener and both gates (once the workers are listening)."""
        with self.lock:
            question = self._current
            self.fast.submit(question)
            self.search.submit(question.place)
            self._on_change(None, question, Source.PROGRAM)

    def ask(
        self,
        *,
        p: Sequence[float] | None = None,
        q0: Sequence[float] | None = None,
        source: Source = Source.PROGRAM,
    ) -> Question:
        """Change the target and/or start joints; returns the question now current (unchanged inputs: no request).
        A new target supersedes a dragged one still waiting (``offer_target``)."""
        with self.lock:
            if p is not None:
                self._offered_p = None
            old = self._current
            new = replace(
                old,
                p=old.p if p is None else tuple(float(v) for v in p),
                q0=old.q0 if q0 is None else tuple(float(v) for v in q0),
            )
            if new != old:
                self._change(old, new, source)
            return self._current

    def offer_policy(self, version: int, policy: nn.Module, busy: Callable[[], bool], key: str = LEARNED_KEY) -> None:
        """A new snapshot of the policy of method ``key``. It becomes part of the question at once unless
        ``busy()`` (the fast methods' worker is computing an answer, which a new question would cancel); then
        ``catch_up`` adopts it when that worker is idle. Under a fast trainer the answers for the target would
        otherwise never land."""
        with self.lock:
            self._offered[key] = (version, policy)
            if not busy():
                self._adopt_offered()

    def offer_target(self, p: Sequence[float], busy: Callable[[], bool]) -> None:
        """A target from a drag, adopted like a snapshot: at once when the fast worker is idle, else when it
        becomes idle (the newest offer wins). A drag sends a position every frame, faster than an answer is
        computed; cancelling the answer in flight at every frame would draw nothing until the hand stops."""
        with self.lock:
            self._offered_p = (float(p[0]), float(p[1]), float(p[2]))
            if not busy():
                self._adopt_offered()

    def catch_up(self) -> None:
        """Adopt the newest offered snapshot and dragged target if the question does not carry them yet (the fast
        worker calls this whenever it becomes idle)."""
        with self.lock:
            self._adopt_offered()

    def close(self) -> None:
        self.fast.close()
        self.search.close()

    def _adopt_offered(self) -> None:
        old = new = self._current
        source = Source.TRAINER
        if self._offered_p is not None:
            new, source = replace(new, p=self._offered_p), Source.GIZMO
            self._offered_p = None
        versions = dict(new.versions)
        for key, (version, policy) in self._offered.items():
            if versions.get(key) != version:
                new = new.with_snapshot(key, version, policy)
        if new != old:
            self._change(old, new, source)

    def _change(self, old: Question, new: Question, source: Source) -> None:
        self._current = new
        self.fast.submit(new)
        if new.place != old.place:
            self.search.submit(new.place)
        self._on_change(old, new, source)  # no answer can be drawn before it returns: the lock is held
