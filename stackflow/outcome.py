"""How one node of a run ended: `NodeOutcome`, its `Status`, and what its operation left.

Every layer reads this one type: the walk collects it, the approval gate plans from it, the
summary, its JSON and artifact, the `stackflow.stack.*` events and `status`'s records write it,
and the live view shows its status. The operation is the engine's `Operation`; what an operation
found beyond its counts is one result per kind of operation, in the spirit of Pulumi's automation
package (`UpResult`, `PreviewResult`, `RefreshResult`, `DriftResult`), never a bag of optional
fields.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stackflow.engine.base import (
    ChangeCounts,
    Operation,
    OutputValue,
    ResourceChange,
    ResourceEvent,
)
from stackflow.engine.events import ROOT_STACK_TYPE, ResourceStatus
from stackflow.policy.violation import Violation


class Status(StrEnum):
    """How a node's part in a run ended.

    The values are wire words: the summary (its table, JSON and artifact), the events, the
    records `status` reads and the live view carry them as written here, and records written
    before any change must still read. A member may be renamed; a value never changes.
    """

    # a stack's operation completed
    UPDATED = "updated"  # an up changed the stack
    UNCHANGED = "unchanged"  # nothing to change (an up, a skip by fingerprint, a migrate)
    PREVIEWED = "previewed"
    REFRESHED = "refreshed"
    DESTROYED = "destroyed"
    DRIFT = "drift"  # a drift check found the cloud differs from the state
    NO_DRIFT = "no-drift"
    # a step completed
    MIGRATED = "migrated"  # migrations were applied
    HEALTHY = "healthy"  # the app answered its health check
    CHECKED = "checked"  # a step of the project's own checked what it checks
    # nothing ran
    SKIPPED = "skipped"  # a step with nothing to do (no database deployed yet)
    READ = "read"  # a stack outside the targets: its outputs were read from state
    NOT_RUN = "not run"  # an upstream node did not complete, the run stopped first, not approved
    # it ran and did not complete: what it changed before it ended is counted
    STOPPED = "stopped"  # an upstream it started beside, or its approved plan, stopped it
    CANCELLED = "cancelled"  # the run was interrupted while it ran
    FAILED = "failed"

    @property
    def unfinished(self) -> bool:
        """It ran and did not complete (its changes are what it made before it ended)."""
        return self in _UNFINISHED

    @property
    def ran(self) -> bool:
        """Something ran for it in this run (it did not only read, skip or wait)."""
        return self not in _NOT_RUN

    @property
    def needs_attention(self) -> bool:
        """A reader should look: it did not complete, did not run, or found drift."""
        return self.unfinished or self in (Status.DRIFT, Status.NOT_RUN)


_UNFINISHED = frozenset({Status.STOPPED, Status.CANCELLED, Status.FAILED})
_NOT_RUN = frozenset({Status.SKIPPED, Status.READ, Status.NOT_RUN})


def describe_changes(changes: ChangeCounts, would: bool = False) -> str:
    """`3 created, 1 updated` (`3 to create, 1 to update` for what a preview would do), or
    `no changes`."""
    counts = (changes.create, changes.update, changes.replace, changes.delete)
    verbs = ("create", "update", "replace", "delete")
    parts = [
        f"{n} to {verb}" if would else f"{n} {verb}d"
        for n, verb in zip(counts, verbs, strict=True)
        if n
    ]
    return ", ".join(parts) or "no changes"


def completed(operation: Operation, changes: ChangeCounts) -> Status:
    """How an operation that completed on a stack ended, by what it changed."""
    if operation is Operation.UP:
        return Status.UPDATED if changes.changed else Status.UNCHANGED
    if operation is Operation.DRIFT:
        return Status.DRIFT if changes.changed else Status.NO_DRIFT
    return {
        Operation.PREVIEW: Status.PREVIEWED,
        Operation.REFRESH: Status.REFRESHED,
        Operation.DESTROY: Status.DESTROYED,
    }[operation]


@dataclass(frozen=True)
class UpResult:
    """A stack as its last successful up left it: an up's, a skip's or a read's result."""

    outputs: Mapping[str, OutputValue]
    typed: BaseModel | None  # the outputs as the stack's outputs model
    fingerprint: str = ""  # the inputs its stamp records ("" for outputs read from state)


@dataclass(frozen=True)
class PreviewResult:
    """What a preview found: per resource what its update would change, and the outputs it
    would leave, which the previews of the stacks reading them are given."""

    resources: tuple[ResourceChange, ...]
    projected: BaseModel  # the outputs as the update would leave them (unknowns included)
    deployed: BaseModel | None = None  # the outputs deployed now (None: not deployed yet)
    moves: str = ""  # which outputs the update moves, in words ("" when none)
    fingerprint: str = ""  # a gated plan's: the inputs an approval binds
    plan_file: Path | None = None  # a gated plan's: the update plan the preview saved


@dataclass(frozen=True)
class RefreshResult:
    """A refresh: the outputs the stack holds now."""

    outputs: Mapping[str, OutputValue]


@dataclass(frozen=True)
class DriftResult:
    """What a drift check found, per resource: the value stored and the value found; and the
    outputs the stack holds (a drift check changes nothing)."""

    resources: tuple[ResourceChange, ...]
    outputs: Mapping[str, OutputValue] = field(default_factory=dict)


StackResult = UpResult | PreviewResult | RefreshResult | DriftResult
"""What an operation found beyond its counts (a destroy finds nothing more)."""


@dataclass(frozen=True)
class NodeOutcome:
    """What happened to one node (a stack or a step) in a run.

    `changes` counts what the operation changed (a preview: would change); one that ran and did
    not complete counts what it had changed when it ended. `result` holds what the operation
    found beyond that, one type per kind of operation.
    """

    node: str
    operation: Operation  # the run's operation (a step takes part in an up)
    status: Status
    changes: ChangeCounts = field(default_factory=ChangeCounts)
    duration_s: float = 0.0
    note: str = ""
    retries: tuple[str, ...] = ()  # the reason of each retried attempt
    healed: str = ""  # what this run cleared that an interrupted operation left behind
    violations: tuple[Violation, ...] = ()  # what the policy packs reported (a preview, an up)
    result: StackResult | None = field(default=None, repr=False)

    @property
    def typed(self) -> BaseModel | None:
        """The stack's outputs deployed now, as its outputs model; a preview of a stack not
        deployed yet: what its update would leave (see `placeholder`)."""
        found = self.result
        if isinstance(found, UpResult):
            return found.typed
        if isinstance(found, PreviewResult):
            return found.deployed if found.deployed is not None else found.projected
        return None

    @property
    def placeholder(self) -> bool:
        """A preview of a stack not deployed yet: `typed` stands in for outputs to come."""
        return isinstance(self.result, PreviewResult) and self.result.deployed is None

    def read_by(self, operation: Operation) -> BaseModel | None:
        """The outputs a downstream stack's `operation` reads: a preview reads what this stack's
        preview projects (its update's new values, or unknown), an up what is deployed."""
        if operation is Operation.PREVIEW and isinstance(self.result, PreviewResult):
            return self.result.projected
        return self.typed

    @property
    def resources(self) -> tuple[ResourceChange, ...]:
        """Per resource, what a preview would change or what drift found (else none)."""
        if isinstance(self.result, PreviewResult | DriftResult):
            return self.result.resources
        return ()

    @property
    def outputs(self) -> Mapping[str, OutputValue]:
        """The outputs the stack holds after its operation; none for a preview, a destroy, or
        an operation that did not complete."""
        found = self.result
        if isinstance(found, UpResult | RefreshResult | DriftResult):
            return found.outputs
        return {}

    def shown_outputs(self) -> dict[str, Any]:
        """`outputs` as they may be shown (secrets masked)."""
        return {k: v.shown() for k, v in self.outputs.items()}


_CHANGING = frozenset({Operation.UP, Operation.DESTROY})


class ChangeTally:
    """What an operation has changed so far, counted from its resource events as each one
    finishes: the counts of an operation that ends part-way, which no summary of the engine's
    gives. Across attempts, a resource counts once, with the first change made to it (created
    by one attempt and left alone by the next: created). Counted like Pulumi's own summary:
    the stack's root resource is, providers are not. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changes: dict[str, str] = {}  # by URN

    def add(self, event: ResourceEvent) -> None:
        """Count `event` if it finished a resource's step."""
        if event.operation not in _CHANGING:
            return  # a preview's steps (a gated up's check included) change nothing
        if event.change == "refresh" or event.type.startswith("pulumi:providers:"):
            return
        # the root is in the state from the start; its step ends with the program's outputs
        root = event.type == ROOT_STACK_TYPE and event.change != "delete"
        if event.status != (ResourceStatus.STARTED if root else ResourceStatus.DONE):
            return
        with self._lock:
            if self._changes.get(event.urn, "same") == "same":
                self._changes[event.urn] = event.change

    def counts(self) -> ChangeCounts:
        """The counts so far."""
        with self._lock:
            made = list(self._changes.values())
        return ChangeCounts(
            create=made.count("create"),
            update=made.count("update"),
            delete=made.count("delete"),
            replace=made.count("replace"),
            same=made.count("same"),
        )
