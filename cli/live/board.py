"""The board: what a run's progress events say about each stack and step, as state and as words.

Thread-safe; built from progress events (`apply`). The plain lines, the heartbeat and the live
view's rows are all read from it, so both views say the same thing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from stackflow.engine.base import ChangeCounts, Operation
from stackflow.engine.events import ResourceStatus
from stackflow.outcome import Status, describe_changes
from stackflow.progress import (
    FINAL_STATES,
    NodeChanged,
    NodeState,
    ProgressEvent,
    ResourceProgress,
    ResourcesDeclared,
    RunStarted,
    elapsed,
)

_VERB = {
    "create": "creating",
    "update": "updating",
    "replace": "replacing",
    "delete": "deleting",
    "refresh": "reading",
}


def _counted(resource_type: str) -> bool:
    """Resources a program declares (the engine's own stack and providers are not)."""
    return not resource_type.startswith(("pulumi:providers:", "pulumi:pulumi:Stack"))


@dataclass(frozen=True)
class Row:
    """One node as the live view shows it."""

    name: str
    state: NodeState
    word: str  # the state, or how it ended (its final status)
    clock: str  # how long it has run, "" before it starts
    note: str  # the last column: resources done, attempt, changes, detail
    current: str  # the resource operation in progress, under a running node


@dataclass
class _Node:
    state: NodeState = NodeState.WAITING
    started: float | None = None  # monotonic, when it first ran
    ended: float | None = None
    status: Status | None = None
    detail: str = ""
    changes: ChangeCounts | None = None
    attempt: int = 1
    next_attempt_at: float | None = None
    total: int | None = None  # resources the program declared
    # URNs done: a refresh and then an update, or a replace's steps, are one resource, not two
    finished: set[str] = field(default_factory=set)
    active: dict[str, tuple[str, float]] = field(default_factory=dict)  # urn -> (label, since)
    last_line: float = 0.0  # monotonic, when a plain line last spoke of it

    @property
    def done(self) -> int:
        return len(self.finished)


class Board:
    """The state of the runs this command shows, built from progress events; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.nodes: dict[str, _Node] = {}
        self.title = ""
        self.flow_run_id: str | None = None  # the run shown (to end it if the CLI must stop)
        self.started = time.monotonic()
        self.would = False  # the phase only looks (plan, preview): counts are what it would do

    def apply(self, event: ProgressEvent) -> list[str]:
        """Take in `event`; the plain lines it deserves (none for a resource's progress)."""
        with self._lock:
            return self._apply(event)

    def _apply(self, event: ProgressEvent) -> list[str]:
        if isinstance(event, RunStarted):
            self.nodes = {name: _Node() for name in event.nodes}
            self.started = time.monotonic()
            self.title = f"{event.operation} {event.environment}  [{event.target}]"
            self.flow_run_id = event.flow_run_id
            # the last word: `rehearse preview` only looks too
            self.would = event.operation.split()[-1] in ("plan", Operation.PREVIEW, Operation.DRIFT)
            return [f"{self.title}: {', '.join(event.nodes)}"]
        if isinstance(event, ResourcesDeclared):
            node = self.nodes.setdefault(event.node, _Node())
            node.total = event.total
            return []
        if isinstance(event, ResourceProgress):
            node = self.nodes.setdefault(event.node, _Node())
            if (
                event.status == ResourceStatus.STARTED
                and event.change in _VERB
                and _counted(event.type)
            ):
                label = f"{_VERB[event.change]} {event.type} {event.name}"
                node.active[event.urn] = (label, time.monotonic())
            elif event.status in (ResourceStatus.DONE, ResourceStatus.FAILED):
                node.active.pop(event.urn, None)
                if event.status == ResourceStatus.DONE and _counted(event.type):
                    node.finished.add(event.urn)
            return []
        if isinstance(event, NodeChanged):
            return self._node_changed(event)
        return []

    def _node_changed(self, event: NodeChanged) -> list[str]:
        node = self.nodes.setdefault(event.node, _Node())
        now = time.monotonic()
        if event.state is NodeState.RUNNING and node.started is None:
            node.started = now
        if event.state is NodeState.RUNNING and node.state is NodeState.RETRYING:
            node.finished, node.active = set(), {}  # a new attempt counts again
        if event.state in FINAL_STATES:
            node.ended = now
            node.active = {}
        repeated = event.state is node.state and event.detail == node.detail
        node.state, node.detail, node.attempt = event.state, event.detail, event.attempt
        node.status = event.status or node.status
        node.changes = event.changes if event.changes is not None else node.changes
        node.next_attempt_at = event.next_attempt_at
        if repeated:
            return []
        node.last_line = now
        return [f"{event.node}: {self._words(event.node, node)}"]

    def _words(self, name: str, node: _Node) -> str:
        """A node's state as one line of words (plain mode; the live view's note column)."""
        state = node.state
        took = f" in {elapsed(self._took(node))}" if node.started is not None else ""
        if state is NodeState.RUNNING:
            again = f" (attempt {node.attempt})" if node.attempt > 1 else ""
            return f"running{again}" + (f": {node.detail}" if node.detail else "")
        if state is NodeState.WAITING:
            return "waiting" + (f": {node.detail}" if node.detail else "")
        if state is NodeState.RETRYING:
            when = ""
            if node.next_attempt_at is not None:
                moment = datetime.fromtimestamp(node.next_attempt_at).strftime("%H:%M:%S")
                when = f"; attempt {node.attempt + 1} at {moment}"
                when += f" (in {elapsed(node.next_attempt_at - time.time())})"
            return f"attempt {node.attempt} failed: {headline(node.detail)}{when}"
        if state is NodeState.DONE:
            what = (
                describe_changes(node.changes, self.would)
                if node.changes is not None
                else node.detail
            )
            return f"{node.status or state}" + (f" ({what})" if what else "") + took
        if state is NodeState.SKIPPED:
            return f"{node.status or state}" + (f": {node.detail}" if node.detail else "")
        if state is NodeState.FAILED:
            return f"{state}{took}: {headline(node.detail)}"
        return f"{state.value}" + (f": {_short(node.detail)}" if node.detail else "")

    @staticmethod
    def _took(node: _Node) -> float:
        assert node.started is not None
        return (node.ended or time.monotonic()) - node.started

    def heartbeat(self, every: float) -> list[str]:
        """A line for each node that has run without a line for `every` seconds."""
        with self._lock:
            now, lines = time.monotonic(), []
            for name, node in self.nodes.items():
                if node.state not in (NodeState.RUNNING, NodeState.WAITING, NodeState.RETRYING):
                    continue
                if node.state is NodeState.WAITING and node.started is None:
                    continue  # waiting for its upstream: the upstream's line says enough
                if now - node.last_line < every:
                    continue
                node.last_line = now
                lines.append(f"{name}: still {self._progress(node)}")
            return lines

    def _progress(self, node: _Node) -> str:
        """`running 1m10s, 3/7 resources; creating aws:rds/instance:Instance db (58s)`."""
        text = f"{node.state.value} {elapsed(self._took(node))}" if node.started else "waiting"
        if node.total is not None:
            text += f", {node.done}/{node.total} resources"
        elif node.done:
            text += f", {node.done} resources done"
        current = self._current(node)
        return text + (f"; {current}" if current else "")

    @staticmethod
    def _current(node: _Node) -> str:
        if not node.active:
            return ""
        label, since = max(node.active.values(), key=lambda item: item[1])
        more = f" and {len(node.active) - 1} more" if len(node.active) > 1 else ""
        return f"{label} ({elapsed(time.monotonic() - since)}){more}"

    def rows(self) -> tuple[str, list[Row]]:
        """The live view's title (with the run's elapsed time) and one row per node."""
        with self._lock:
            title = f"{self.title}   {elapsed(time.monotonic() - self.started)}"
            return title, [self._row(name, node) for name, node in self.nodes.items()]

    def _row(self, name: str, node: _Node) -> Row:
        state = node.state
        return Row(
            name=name,
            state=state,
            word=(node.status if state in FINAL_STATES and node.status else state).value,
            clock=elapsed(self._took(node)) if node.started is not None else "",
            note=_short(self._note(node), 100),
            current=self._current(node) if state is NodeState.RUNNING else "",
        )

    def _note(self, node: _Node) -> str:
        """The live view's last column for a node."""
        state = node.state
        if state is NodeState.RUNNING:
            count = (
                f"{node.done}/{node.total} resources"
                if node.total is not None
                else f"{node.done} resources done"
                if node.done
                else ""
            )
            again = f"attempt {node.attempt}" if node.attempt > 1 else ""
            return ", ".join(part for part in (count, again, node.detail) if part)
        if state is NodeState.DONE:
            if node.changes is not None:
                return describe_changes(node.changes, self.would)
            return node.detail
        if state is NodeState.RETRYING:
            return self._words("", node)
        return node.detail


def headline(reason: str) -> str:
    """A failure's reason without the engine's lines it quotes: `AWS throttled the requests
    (Throttling on EC2 CreateVpc)` (the summary and the log keep the rest)."""
    flat = " ".join(reason.split())
    cut = flat.find("): ")
    return _short(flat[: cut + 1] if cut > 0 else flat)


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
