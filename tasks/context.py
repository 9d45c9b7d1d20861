"""What every task of one pipeline run shares (`RunContext`), and what a node's task returns
(`StackOutcome`)."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stackflow.dag import Projection, StackGraph, parse_outputs, user_outputs
from stackflow.drift import DriftMarks
from stackflow.engine import Engine, Operation, OutputValue
from stackflow.engine.base import ChangeCounts, ResourceChange
from stackflow.errors import OperationCancelled
from stackflow.policy.violation import Violation
from stackflow.progress import NodeChanged, NodeState, ProgressHub, hub
from stackflow.records import Records
from stackflow.redact import Redactor
from stackflow.settings import Settings


@dataclass
class RunContext:
    """What every task of one pipeline run shares: settings, the engine, the redactor."""

    settings: Settings
    engine: Engine
    graph: StackGraph
    redactor: Redactor
    drift: DriftMarks
    records: Records | None = field(default=None, repr=False)  # beside the backend (holders)
    passphrase: str | None = field(default=None, repr=False)  # opens the outputs a skip hands on
    engine_calls: list[str] = field(
        default_factory=list
    )  # "op:stack", for the summary and benchmarks
    # Per node, what the summary tells beyond the result: each retried attempt's reason, and what
    # an interrupted earlier operation left behind that this run cleared (a lock, pending ops).
    retries: dict[str, list[str]] = field(default_factory=dict)
    healed: dict[str, str] = field(default_factory=dict)
    progress: ProgressHub = field(default_factory=hub)  # the live view, when one watches
    # Seconds before retry n+1, jitter drawn once per run: the task knows when its next attempt
    # starts and says so (Prefect's own jitter is drawn where the task cannot see it).
    retry_delays: list[float] = field(default_factory=list)
    commit: str | None = None  # the project's commit this run deploys (None: not from git)
    # Stacks of this walk not created yet that a stack running upstream of them may create
    # ahead of their turn (`prepare_ahead`); empty: none (a gated up, a preview).
    ahead: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # ahead, _begun
    # Per stack: set at the first resource event of its operation in this run (`begun`).
    _begun: dict[str, threading.Event] = field(default_factory=dict, repr=False)

    def publish(self, node: str, state: NodeState, **details: Any) -> None:
        """Tell the live view (if one watches) that `node` moved to `state`."""
        self.progress.publish(NodeChanged(self.settings.environment, node, state, **details))

    def cancel(self, interrupt: bool) -> None:
        """Stop every stack operation this run has in flight (the engine, one per run, knows
        which; see `Engine.cancel`)."""
        for node in self.graph.stacks:
            self.engine.cancel(self.graph.bare_spec(self.settings, node), interrupt=interrupt)

    def begun(self, node: str) -> threading.Event:
        """Set once the stack's operation in this run has reported a resource: its `pulumi` has
        opened and decrypted the state, so what could refuse it at the start (a wrong
        passphrase, a lock) did not. A stack starting beside it waits for this (`tasks.early`)."""
        with self._lock:
            return self._begun.setdefault(node, threading.Event())

    def prepare_ahead(self, node: str) -> None:
        """In the background, create the stacks of this walk downstream of `node` that do not
        exist yet (`stack init`, their config), while `node` deploys: each is ready when its
        turn comes. An existing stack costs one checkpoint read; a failure here is the stack's
        own task's to meet and say."""
        with self._lock:
            later = [
                n for n in self.graph.order() if n in self.ahead and node in self.graph.ancestors(n)
            ]
            self.ahead.difference_update(later)
        if not later:
            return

        def prepare() -> None:
            for name in later:
                if self.progress.cancelled:
                    return
                with contextlib.suppress(Exception):
                    self.engine.prepare(self.graph.bare_spec(self.settings, name))

        threading.Thread(target=prepare, name=f"prepare-after-{node}", daemon=True).start()

    def stored_outcome(self, node: str) -> StackOutcome:
        """A stack outside the targets: its outputs are read from state, not redeployed.

        Raises:
            MissingOutputError: the stack is not deployed (its outputs lack what is needed).
        """
        outputs = user_outputs(self.engine.outputs(self.graph.bare_spec(self.settings, node)))
        for value in outputs.values():
            if value.secret and isinstance(value.value, str):
                self.redactor.add(value.value)
        typed = parse_outputs(self.graph[node], outputs)
        return StackOutcome(
            node,
            "read",
            "read",
            outputs=outputs,
            typed=typed,
            note="outputs read from state (not targeted)",
        )

    def check_not_cancelled(self, node: str) -> None:
        """Raises OperationCancelled when the run was interrupted before `node` started."""
        if self.progress.cancelled:
            self.publish(node, NodeState.NOT_RUN, detail="the run was interrupted first")
            raise OperationCancelled(
                f"{self.settings.environment}/{node}", "not started: the run was interrupted"
            )


@dataclass
class StackOutcome:
    """What happened to one node in a run."""

    node: str
    operation: str
    status: (
        str  # updated, unchanged, previewed, refreshed, destroyed, drift, no-drift, skipped, read
    )
    changes: ChangeCounts = field(default_factory=ChangeCounts)
    duration_s: float = 0.0
    outputs: dict[str, OutputValue] = field(default_factory=dict)
    typed: BaseModel | None = None
    note: str = ""
    placeholder: bool = False  # outputs stand in for a stack that is not deployed yet
    projected: Projection | None = None  # a preview: the outputs its update would leave
    resources: tuple[ResourceChange, ...] = ()  # per resource: what a preview would change,
    # or what drift found
    retries: list[str] = field(default_factory=list)  # the reason of each retried attempt
    healed: str = ""  # what this run cleared that an interrupted operation left behind
    fingerprint: str = ""  # the stack's inputs (up, and a gated plan's previews)
    plan_file: Path | None = None  # the update plan a gated plan's preview saved
    violations: tuple[Violation, ...] = ()  # what the policy packs reported (see stackflow.policy)

    def shown_outputs(self) -> dict[str, Any]:
        return {k: v.shown() for k, v in self.outputs.items()}

    def read_by(self, operation: Operation) -> BaseModel | None:
        """The outputs a downstream stack's `operation` reads: a preview reads what this stack's
        preview projects (its update's new values, or unknown), an up what is deployed."""
        if operation is Operation.PREVIEW and self.projected is not None:
            return self.projected.outputs
        return self.typed
