"""What every task of one pipeline run shares (`RunContext`); a node's task returns its
`stackflow.outcome.NodeOutcome`."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any

from stackflow.dag import StackGraph, parse_outputs, user_outputs
from stackflow.drift import DriftMarks
from stackflow.engine import Engine, Operation
from stackflow.engine.base import ChangeCounts
from stackflow.errors import OperationCancelled
from stackflow.outcome import ChangeTally, NodeOutcome, Status, UpResult
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
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # ahead, per stack
    # Per stack: set at the first resource event of its operation in this run (`begun`).
    _begun: dict[str, threading.Event] = field(default_factory=dict, repr=False)
    _opens: dict[str, bool] = field(default_factory=dict, repr=False)  # salt -> the passphrase's
    # Per stack: what its operation changed in this run, attempts included (`made`).
    _made: dict[str, ChangeTally] = field(default_factory=dict, repr=False)

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
            # a new stack made now would be sealed with the run's passphrase for good: a stack
            # to create is made only once the passphrase is known to be the stacks' (a key
            # derivation, paid only then)
            if any(not self._exists(n) for n in later) and not self._passphrase_opens(node):
                return
            for name in later:
                if self.progress.cancelled:
                    return
                with contextlib.suppress(Exception):
                    self.engine.prepare(self.graph.bare_spec(self.settings, name))

        threading.Thread(target=prepare, name=f"prepare-after-{node}", daemon=True).start()

    def _exists(self, node: str) -> bool:
        """Whether `node`'s stack is in the backend (one checkpoint read; unreadable: no)."""
        try:
            return self.engine.state(self.graph.bare_spec(self.settings, node)) is not None
        except Exception:  # unreadable: as if missing (the passphrase is then checked)
            return False

    def _passphrase_opens(self, node: str) -> bool:
        """Whether this run's passphrase is the one `node`'s stack was made with (True when it
        cannot tell: no stack yet, no passphrase, another secrets provider). A stack created
        ahead takes the run's passphrase as its own: a wrong one would lock it out of the right
        one, so nothing is created ahead before the passphrase is known to be the stacks'."""
        from stackflow.engine.pulumisecrets import passphrase_opens

        try:
            state = self.engine.state(self.graph.bare_spec(self.settings, node))
            if state is None or state.salt is None or not self.passphrase:
                return True
            with self._lock:
                known = self._opens.get(state.salt)
            if known is None:  # a key derivation of a million rounds: once per salt in a run
                known = passphrase_opens(state.salt, self.passphrase)
                with self._lock:
                    self._opens[state.salt] = known
            return known
        except Exception:  # unreadable: the stack's own task meets it and says why
            return False

    def made(self, node: str) -> ChangeTally:
        """What the stack's operation has changed in this run so far, counted as its resources
        finish: what an outcome that ended part-way reports."""
        with self._lock:
            return self._made.setdefault(node, ChangeTally())

    def ended(
        self,
        node: str,
        operation: Operation,
        status: Status,
        note: str,
        violations: tuple[Violation, ...] = (),
    ) -> NodeOutcome:
        """The outcome of a node that did not complete (`status`): what it changed before it
        ended, its retries, what it cleared that an interrupted operation left, and the policy
        violations that stopped it."""
        with self._lock:
            tally = self._made.get(node)
        return NodeOutcome(
            node,
            operation,
            status,
            tally.counts() if tally is not None else ChangeCounts(),
            note=note,
            retries=tuple(self.retries.get(node, ())),
            healed=self.healed.get(node, ""),
            violations=violations,
        )

    def stored_outcome(self, node: str, operation: Operation) -> NodeOutcome:
        """A stack outside the targets of an `operation`: its outputs are read from state, not
        redeployed.

        Raises:
            MissingOutputError: the stack is not deployed (its outputs lack what is needed).
        """
        outputs = user_outputs(self.engine.outputs(self.graph.bare_spec(self.settings, node)))
        for value in outputs.values():
            if value.secret and isinstance(value.value, str):
                self.redactor.add(value.value)
        typed = parse_outputs(self.graph[node], outputs)
        return NodeOutcome(
            node,
            operation,
            Status.READ,
            note="outputs read from state (not targeted)",
            result=UpResult(outputs, typed),
        )

    def check_not_cancelled(self, node: str) -> None:
        """Raises OperationCancelled when the run was interrupted before `node` started."""
        if self.progress.cancelled:
            self.publish(node, NodeState.NOT_RUN, detail="the run was interrupted first")
            raise OperationCancelled(
                f"{self.settings.environment}/{node}", "not started: the run was interrupted"
            )
