"""The one interface flows use to act on a stack, and the typed values that cross it.

The implementation is `stackflow.engine.automation` (the Pulumi CLI through the Automation API);
it is not imported here, so code that only needs these types does not pay for `pulumi.automation`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from stackflow.engine.events import ResourceStatus
from stackflow.engine.hosted import HostedProgram
from stackflow.redact import MASK, Redactor

if TYPE_CHECKING:
    from stackflow.engine.pending.report import Recovery
    from stackflow.policy.packs import PolicySet
    from stackflow.policy.violation import Violation

ProgramFn = Callable[[], Mapping[str, Any]]
"""A Pulumi program: declares resources when called and returns its exports (name -> Output)."""

INTERNAL_OUTPUT = "_stackflow"
"""The output every `up` records for stackflow itself (its stamp); never one of a stack's own."""

UNKNOWN_WIRE = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""Pulumi's wire value for a value known only after the update ("known after apply")."""

KNOWN_AFTER_APPLY = "(known after apply)"
"""How a shown property value says a preview does not know it yet."""


class Operation(StrEnum):
    """What an engine can do to a stack."""

    PREVIEW = "preview"
    UP = "up"
    REFRESH = "refresh"
    DRIFT = "drift"  # a refresh preview: what refresh would change, changing nothing
    DESTROY = "destroy"


@dataclass(frozen=True)
class ConfigValue:
    """One stack config value; secret ones are stored encrypted by the engine."""

    value: str
    secret: bool = False

    def __repr__(self) -> str:
        return f"ConfigValue({MASK if self.secret else self.value!r}, secret={self.secret})"


@dataclass(frozen=True)
class StackSpec:
    """A stack to act on: Pulumi project and stack names, its program and its config.

    `node` is the graph's name for it (networking, database, app); Pulumi's project is
    `<project>-<node>` and its stack name is the environment. A Pulumi project of its own (a
    project node, or one `rehearse` runs) keeps the name its Pulumi.yaml gives (`pulumi_name`),
    so its program's `pulumi.Config()` and `get_project()` read what they would under `pulumi up`;
    its program is a `HostedProgram`, run in a process of its own.

    `partial_config`: the config sets these keys and keeps the others the stack has (an operation
    that does not run the program of a project node, whose config is its own).
    """

    project: str
    environment: str
    node: str
    program: ProgramFn | HostedProgram = field(compare=False, repr=False)
    config: Mapping[str, ConfigValue] = field(default_factory=dict, compare=False)
    pulumi_name: str = ""
    partial_config: bool = False
    # the policy packs its previews and updates run (None: none); part of its fingerprint
    policies: PolicySet | None = field(default=None, compare=False, repr=False)

    @property
    def pulumi_project(self) -> str:
        return self.pulumi_name or f"{self.project}-{self.node}"

    @property
    def label(self) -> str:
        """How people name it: environment/node (a rehearsed project, which is its own node
        outside any graph: project/stack)."""
        if self.pulumi_name and self.pulumi_name == self.node:
            return f"{self.pulumi_name}/{self.environment}"
        return f"{self.environment}/{self.node}"


@dataclass(frozen=True)
class OutputValue:
    """A stack output that knows whether it is secret; its repr never shows a secret."""

    value: Any
    secret: bool = False

    def __repr__(self) -> str:
        return f"OutputValue({MASK if self.secret else self.value!r})"

    def shown(self) -> Any:
        """The value as it may be displayed: secrets masked."""
        return MASK if self.secret else self.value


@dataclass(frozen=True)
class ChangeCounts:
    """Resources per kind of change that an operation made (or, for preview, would make)."""

    create: int = 0
    update: int = 0
    delete: int = 0
    replace: int = 0
    same: int = 0

    @property
    def changed(self) -> int:
        return self.create + self.update + self.delete + self.replace

    def __add__(self, other: ChangeCounts) -> ChangeCounts:
        return ChangeCounts(
            self.create + other.create,
            self.update + other.update,
            self.delete + other.delete,
            self.replace + other.replace,
            self.same + other.same,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "create": self.create,
            "update": self.update,
            "delete": self.delete,
            "replace": self.replace,
            "same": self.same,
        }


@dataclass(frozen=True)
class PropertyChange:
    """One property of a resource that an operation changes; values are already masked."""

    name: str  # a property path, as Pulumi names it: "tags.Name", "ingress[0].cidrBlocks"
    kind: str  # add, update or delete
    forces_replacement: bool = False
    old: Any = None
    new: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "forces_replacement": self.forces_replacement,
            "old": self.old,
            "new": self.new,
        }


@dataclass(frozen=True)
class ResourceChange:
    """What an operation does (or, for preview, would do) to one resource, and why."""

    urn: str
    type: str
    name: str
    change: str  # create, update, replace or delete
    properties: tuple[PropertyChange, ...] = ()

    @property
    def replaced_by(self) -> list[str]:
        """The properties that force a replacement."""
        return [p.name for p in self.properties if p.forces_replacement]

    def as_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "change": self.change,
            "replaced_by": self.replaced_by,
            "properties": [p.as_dict() for p in self.properties],
        }

    def drift_dict(self) -> dict[str, Any]:
        """As drift reports it: the resource changed in the cloud (`changed`) or is gone from it
        (`deleted`), and per property the value the state holds and the value found."""
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "drift": "deleted" if self.change == "delete" else "changed",
            "properties": [
                {"name": p.name, "stored": p.old, "found": p.new} for p in self.properties
            ],
        }


@dataclass(frozen=True)
class OperationResult:
    """What one operation on one stack did."""

    stack: str
    operation: Operation
    changes: ChangeCounts
    outputs: Mapping[str, OutputValue]
    duration_s: float
    engine: str
    # per resource: what a preview would change (an up: what it changed), or what drift found
    resource_changes: tuple[ResourceChange, ...] = ()
    # a preview: the stack's outputs as its update would leave them; a value known only after
    # the update is UNKNOWN_WIRE (or holds it), a secret one the preview hides has value None
    projected: Mapping[str, OutputValue] = field(default_factory=dict)
    violations: tuple[Violation, ...] = ()  # what the policy packs reported (advisory ones)
    healed: str = ""  # what the operation healed on its way (a lost create's resource adopted)

    def shown_outputs(self) -> dict[str, Any]:
        return {k: v.shown() for k, v in self.outputs.items()}


@dataclass(frozen=True)
class ResourceEvent:
    """Progress of one resource during an operation."""

    stack: str
    operation: Operation
    urn: str
    type: str
    name: str
    change: str  # create, update, delete, replace, same, refresh
    status: ResourceStatus


@dataclass(frozen=True)
class StackState:
    """What a stack's latest checkpoint in the backend says, read without any `pulumi` process.

    `outputs` are raw: a secret one is Pulumi's ciphertext envelope, never a value.
    """

    updated: str  # the checkpoint's manifest time: which update wrote it
    outputs: Mapping[str, Any]
    resources: int  # resources in the state, the root stack resource included
    pending: int  # operations an interrupted update left pending
    locked: bool  # an update holds the stack's lock right now
    salt: str | None = None  # the passphrase provider's salt state (None: another provider)

    @property
    def stamp(self) -> Mapping[str, Any] | None:
        """What stackflow's last `up` recorded (None: never stamped, or another tool's update)."""
        found = self.outputs.get(INTERNAL_OUTPUT)
        return found if isinstance(found, Mapping) else None


Fence = Callable[[Any], str]
"""Why a lock (a `checkpoints.LockHolder`) another host's process holds may be broken; "" if not."""

OutputListener = Callable[[str], None]
EventListener = Callable[[ResourceEvent], None]
DeclaredListener = Callable[[int], None]


def _ignore(_: object) -> None:
    return None


@dataclass
class Listener:
    """Where an operation's log lines and resource events go; lines are redacted before delivery."""

    on_output: OutputListener = _ignore
    on_event: EventListener = _ignore
    redactor: Redactor = field(default_factory=Redactor)
    on_declared: DeclaredListener = _ignore  # how many resources the program declared

    def line(self, text: str) -> None:
        for part in text.splitlines() or [""]:
            self.on_output(self.redactor(part))

    def event(self, event: ResourceEvent) -> None:
        self.on_event(event)

    def declared(self, count: int) -> None:
        self.on_declared(count)


@runtime_checkable
class Engine(Protocol):
    """Acts on stacks. Implementations are safe to call from several threads on different stacks."""

    name: str

    def run(
        self,
        operation: Operation,
        spec: StackSpec,
        listener: Listener,
        plan: Path | None = None,
        refresh: bool = False,
        stamp: Mapping[str, Any] | None = None,
    ) -> OperationResult:
        """Preview, update, refresh, check drift of, or destroy one stack.

        `stamp`: what an `up` records for stackflow in the stack's checkpoint (its fingerprint),
        atomically with the update.

        `plan`: a preview saves Pulumi's update plan there; an up applies under that plan and
        stops if the stack would do anything the plan does not allow (PlanChanged).
        `refresh`: a preview reads the cloud first (a drifted stack), as its up will.

        Raises:
            TransientStackError: worth retrying (lock held, throttled, network).
            PermanentStackError: a retry will not help; the message names the stack.
            OperationCancelled: `cancel` was called while it ran.
        """
        ...

    def prepare(self, spec: StackSpec) -> None:
        """Create the stack if it does not exist yet, with its config, ahead of its first
        operation (which then finds it ready): nothing when it exists, and no `pulumi` process
        then.

        Raises:
            TransientStackError, PermanentStackError: as `run`.
        """
        ...

    def survey(self, spec: StackSpec, listener: Listener) -> OperationResult:
        """Preview one stack; on the local cloud, naming every resource type and function it does
        not serve (UnservedTypes), not only the first; nothing is created."""
        ...

    def outputs(self, spec: StackSpec) -> dict[str, OutputValue]:
        """The stack's outputs from its last update ({} if it was never deployed)."""
        ...

    def exists(self, spec: StackSpec) -> bool:
        """Whether the stack has been deployed and holds resources."""
        ...

    def state(self, spec: StackSpec) -> StackState | None:
        """The stack's latest checkpoint, read straight from the backend (no `pulumi` process);
        None when the backend has no state for it."""
        ...

    def recover(self, spec: StackSpec, listener: Listener, fence: Fence | None = None) -> Recovery:
        """Clear what an interrupted operation left behind (a stale lock, pending operations),
        importing the pending creates the cloud made; `fence(lock)` says why a lock another
        host's process holds may be broken ("" if not).

        Returns what it did (true if anything), and says it through the listener.
        """
        ...

    def watch_locks(self, spec: StackSpec, on_pid: Callable[[int], None] | None) -> None:
        """Tell `on_pid` the pid of each engine process that takes the stack's lock."""
        ...

    def cancel(self, spec: StackSpec, interrupt: bool = True) -> None:
        """Stop the operation running on this stack, if any.

        `interrupt=False`: the engine's processes already got the interrupt (a terminal's Ctrl-C
        reaches the whole foreground process group); only record that it was asked for.
        """
        ...

    def remove(self, spec: StackSpec) -> None:
        """Remove an empty stack (after destroy) from the backend."""
        ...

    def versions(self) -> dict[str, str]:
        """Tool and plugin versions; part of every stack's fingerprint."""
        ...


def is_transient(exc: BaseException) -> bool:
    """The retry predicate: True only for errors a retry may fix."""
    from stackflow.errors import TransientDatabaseError, TransientStackError

    return isinstance(exc, TransientStackError | TransientDatabaseError)


class Stopwatch:
    """Monotonic elapsed seconds."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start
