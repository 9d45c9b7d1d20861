"""Live progress of runs in this process, as typed events, and the way to interrupt them.

The pipeline and its tasks publish what happens (a node starts, retries, ends; a resource
operation starts or finishes; an approval is awaited); whoever drives a run in this process (the
command line's live view) subscribes. Runs started elsewhere (the Prefect UI, schedules, a
worker) have no subscriber here, and publishing costs a lock and a loop over nothing.

One hub per process, like `logging`'s registry: tasks run in Prefect's worker threads and the flow
may run in a thread of its own, so the hub is found through `hub()`, never passed as a flow
parameter (parameters are serialised; a hub is not data).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from stackflow.engine.base import ChangeCounts
from stackflow.engine.events import ResourceStatus
from stackflow.outcome import Status


class NodeState(StrEnum):
    """Where one node of a run is."""

    WAITING = "waiting"  # for its upstream nodes, or for another run's hold on the stack
    RUNNING = "running"
    RETRYING = "retrying"  # failed for a transient reason; the next attempt is scheduled
    DONE = "done"
    SKIPPED = "skipped"  # nothing to do (unchanged since its last up, or not needed)
    FAILED = "failed"
    CANCELLED = "cancelled"  # the run was interrupted while it ran
    NOT_RUN = "not run"  # an upstream node failed, or the run was interrupted first


FINAL_STATES = frozenset(
    {NodeState.DONE, NodeState.SKIPPED, NodeState.FAILED, NodeState.CANCELLED, NodeState.NOT_RUN}
)


@dataclass(frozen=True)
class RunStarted:
    """A run began: its nodes, in graph order, all waiting."""

    environment: str
    operation: str
    nodes: tuple[str, ...]
    target: str  # "local cloud" or "AWS"
    ui_url: str | None = None
    flow_run_id: str | None = None


@dataclass(frozen=True)
class NodeChanged:
    """A node moved to `state`. `detail` says why or how (a retry's reason, a step's note)."""

    environment: str
    node: str
    state: NodeState
    detail: str = ""
    status: Status | None = None  # a final state's: how the node ended (updated, unchanged, ...)
    changes: ChangeCounts | None = None
    attempt: int = 1  # the attempt this is about (1 = the first)
    next_attempt_at: float | None = None  # RETRYING: when the next attempt starts (time.time())


@dataclass(frozen=True)
class ResourcesDeclared:
    """A stack's program declared `total` resources: the denominator of done/total."""

    environment: str
    node: str
    total: int


@dataclass(frozen=True)
class ResourceProgress:
    """One resource operation of a stack started, finished or failed."""

    environment: str
    node: str
    urn: str
    type: str
    name: str
    change: str  # create, update, replace, delete, same, refresh
    status: ResourceStatus


@dataclass(frozen=True)
class ApprovalRequested:
    """A run waits for someone to approve or reject `plan` (a `stackflow.plan.DeployPlan`)."""

    environment: str
    flow_run_id: str
    plan: Any
    timeout_s: float
    ui_url: str | None = None
    signed: bool = False  # the environment names approvers: an answer must carry a signature


@dataclass(frozen=True)
class ApprovalDecided:
    """The wait ended: approved or not, why, and through which channel."""

    environment: str
    approved: bool
    reason: str
    via: str


ProgressEvent = (
    RunStarted
    | NodeChanged
    | ResourcesDeclared
    | ResourceProgress
    | ApprovalRequested
    | ApprovalDecided
)
Subscriber = Callable[[ProgressEvent], None]
Canceller = Callable[[bool], None]


@dataclass
class ProgressHub:
    """Subscribers of this process's run events, and interruption of its runs."""

    _subscribers: list[Subscriber] = field(default_factory=list)
    _cancellers: list[Canceller] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cancelled: threading.Event = field(default_factory=threading.Event)
    _answers: dict[str, str] = field(default_factory=dict)  # flow run id -> who answered

    def publish(self, event: ProgressEvent) -> None:
        """Deliver `event` to every subscriber; a subscriber's error never reaches the run."""
        with self._lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            with contextlib.suppress(Exception):
                subscriber(event)

    @contextlib.contextmanager
    def subscribed(self, subscriber: Subscriber) -> Iterator[None]:
        """Deliver events to `subscriber` inside the block."""
        with self._lock:
            self._subscribers.append(subscriber)
        try:
            yield
        finally:
            with self._lock:
                self._subscribers.remove(subscriber)

    # -- interruption --

    @contextlib.contextmanager
    def cancellable(self, canceller: Canceller) -> Iterator[None]:
        """While inside, `cancel()` calls `canceller(interrupt)` (a run stops what it runs)."""
        with self._lock:
            self._cancellers.append(canceller)
        try:
            yield
        finally:
            with self._lock:
                self._cancellers.remove(canceller)

    def cancel(self, interrupt: bool = True) -> None:
        """Interrupt every run of this process: nothing new starts, running operations stop.

        Args:
            interrupt: signal the running engine processes. False when a terminal's Ctrl-C has
                already reached them (a second SIGINT would make Pulumi stop at once instead of
                cancelling cleanly).
        """
        self._cancelled.set()
        with self._lock:
            cancellers = list(self._cancellers)
        for canceller in cancellers:
            with contextlib.suppress(Exception):
                canceller(interrupt)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def stop_event(self) -> threading.Event:
        """Set when the runs are interrupted: what a wait of a run's waits on (it ends at once)."""
        return self._cancelled

    def reset(self) -> None:
        """Forget an earlier interruption (a new command in the same process)."""
        self._cancelled.clear()
        with self._lock:
            self._answers.clear()

    # -- approvals answered here --

    def answered_here(self, flow_run_id: str, via: str) -> None:
        """Record that this process answers the approval of `flow_run_id`, and as whom."""
        with self._lock:
            self._answers[flow_run_id] = via

    def answer_for(self, flow_run_id: str) -> str | None:
        """Who in this process answered `flow_run_id`'s approval (None: someone elsewhere)."""
        with self._lock:
            return self._answers.get(flow_run_id)


_HUB: ProgressHub | None = None
_HUB_LOCK = threading.Lock()


def hub() -> ProgressHub:
    """This process's hub (created on first use)."""
    global _HUB
    with _HUB_LOCK:
        if _HUB is None:
            _HUB = ProgressHub()
        return _HUB


def elapsed(seconds: float) -> str:
    """12s, 3m05s, 1h02m: how long something has run, as a person reads it."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
