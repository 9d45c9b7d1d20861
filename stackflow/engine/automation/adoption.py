"""A create whose answer was lost, healed: the resource the cloud made is adopted into the stack's
state, and the update runs again.

A create's answer can be lost with no pending create left behind: the aws plugin killed while it
waits for `CreateDBInstance` (Pulumi records that create as failed), or the cloud cut off right
after it acted. The cloud holds the resource, no state does, and every later update fails on
AWS's `AlreadyExists` for its fixed name, for ever. The CLI cannot adopt in the middle of an
update, so stackflow does it after the update failed:

1. the failed create's URN, type and inputs come from the update's engine events, and AWS's
   error code (an `...AlreadyExists`, a `...Duplicate`) from the diagnostic Pulumi printed for it;
2. the cloud is searched for it as a pending create is (`stackflow.engine.pending`);
3. it is adopted only when exactly one resource matches, no stack's state holds it, and it is
   provably this stack's: its tags name this project, environment and stack
   (`stackflow.engine.pending.owners`), or, for a type without tags, one of its inputs names a
   resource this stack's state already holds (its parent: a route table, a role, a secret);
4. the state gets it with that id (a state edit, as a pending create's import is), a refresh reads
   it from the cloud, and the update runs again; a gated update's approved plan did not show it,
   so the plan is made and asked for again (PlanChanged).

Anything else is refused, naming each resource and why; a rehearsed project's (a user's own
program) is reported, never adopted. `up --recreate` turns adoption off.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pulumi.automation.events import EngineEvent

from stackflow.engine.automation import audited
from stackflow.engine.automation.program import in_process, pulumi_program
from stackflow.engine.automation.recovery import (
    RunningOn,
    cloud_clients,
    export_state,
    import_state,
    place,
)
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import Listener, OperationResult, StackSpec
from stackflow.engine.checkpoints import holdings
from stackflow.engine.diagnosis import aws_errors
from stackflow.engine.envelope import is_secret
from stackflow.engine.pending import CloudClients, LookupFailed, PendingCreate, look_up
from stackflow.engine.pending.cloud import failure
from stackflow.engine.pending.model import tags
from stackflow.engine.pending.owners import tags_of
from stackflow.errors import PermanentStackError, PlanChanged, StackError, TransientStackError

# AWS's codes for "a resource of that name or identity exists already", across its services.
_EXISTS = re.compile(r"AlreadyExists|AlreadyOwnedByYou|ResourceExists|Duplicate|AlreadyAssociated")
MAX_ADOPTIONS = 3  # runs of an update in one operation (two adoptions at most): more is not this
# Pulumi's events show a secret input as this text (in a secret's envelope), never its value.
_SECRET_SHOWN = "[secret]"
OWNER_TAGS = ("project", "environment", "stack")


@dataclass(frozen=True)
class ExistingCreate:
    """A create of an update that AWS refused because the resource exists already."""

    urn: str
    type: str
    inputs: Mapping[str, Any]
    parent: str
    provider: str
    code: str  # AWS's error code

    @property
    def label(self) -> str:
        return f"{self.type} {self.urn.rsplit('::', 1)[-1]}"


class CreateWatch:
    """An update's creates, from its engine events, and those AWS refused as existing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._creates: dict[str, Any] = {}  # urn -> the create step's new state
        self._codes: dict[str, str] = {}  # urn -> AWS's error code

    def __call__(self, event: EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is not None and pre.metadata.op == "create" and pre.metadata.new is not None:
            with self._lock:
                self._creates[pre.metadata.urn] = pre.metadata.new
        said = event.diagnostic_event
        if said is not None and said.urn and said.severity == "error":
            for error in aws_errors(said.message):
                if error.code and _EXISTS.search(error.code):
                    with self._lock:
                        self._codes.setdefault(said.urn, error.code)

    def existing(self) -> list[ExistingCreate]:
        """The creates AWS refused as existing, in the order they began."""
        with self._lock:
            return [
                ExistingCreate(
                    urn,
                    str(new.type),
                    {k: v for k, v in (new.inputs or {}).items() if not _hides_secret(v)},
                    str(new.parent or ""),
                    str(new.provider or ""),
                    self._codes[urn],
                )
                for urn, new in self._creates.items()
                if urn in self._codes
            ]


def _hides_secret(value: Any) -> bool:
    """Whether an input as an event shows it holds a secret anywhere: its value is not there, so
    the state gets no value for it (the update that follows sets it from the program)."""
    if value == _SECRET_SHOWN or is_secret(value):
        return True
    if isinstance(value, Mapping):
        return any(_hides_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(_hides_secret(v) for v in value)
    return False


Attempt = Callable[[CreateWatch], OperationResult]


def adopting(
    ws: Workspaces,
    spec: StackSpec,
    listener: Listener,
    attempt: Attempt,
    running_on: RunningOn,
    gated: bool,
) -> OperationResult:
    """Run `attempt` (an update); when AWS refuses creates because their resources exist, adopt
    them (see the module) and run it again, at most MAX_ADOPTIONS times.

    Raises:
        PlanChanged: (a gated update) resources were adopted: plan and ask again.
        PermanentStackError: the update's own error, with what was refused and why.
        TransientStackError: as the update's, or the cloud did not answer a lookup.
    """
    adopted: list[str] = []
    for round_ in range(1, MAX_ADOPTIONS + 1):
        watch = CreateWatch()
        try:
            result = attempt(watch)
        except PermanentStackError as exc:
            existing = watch.existing()
            if not existing or isinstance(exc, PlanChanged) or round_ == MAX_ADOPTIONS:
                raise
            adopted.append(adopt(ws, spec, existing, listener, running_on, exc))
            if gated:
                raise PlanChanged(
                    spec.label,
                    f"{'; '.join(adopted)}; the approved plan would have created it again, so "
                    "the plan is made and asked for again",
                ) from None
            listener.line(f"stack {spec.label}: running the update again")
            continue
        return replace(result, healed="; ".join(adopted)) if adopted else result
    raise AssertionError("unreachable: the last round returns or raises")


def adopt(
    ws: Workspaces,
    spec: StackSpec,
    existing: Sequence[ExistingCreate],
    listener: Listener,
    running_on: RunningOn,
    refused: StackError,
) -> str:
    """Adopt each of `existing` into the stack's state, or refuse all of them.

    Returns:
        What was adopted, in a sentence for the summary.

    Raises:
        PermanentStackError: `refused`'s reason, then each resource that was not adopted and why
            (nothing was changed).
        TransientStackError: the cloud did not answer a lookup (nothing was changed).
    """
    where = place(ws)
    names = ", ".join(c.label for c in existing)
    if spec.pulumi_name:  # a rehearsed project: the user's own program's resources
        raise PermanentStackError(
            spec.label,
            f"AWS refused to create what exists already: {where} holds {names} "
            f"({', '.join(sorted({c.code for c in existing}))}); stackflow never adopts a "
            "resource of your own program: delete it, or `pulumi import` it into the stack "
            f"(the update said: {refused.reason})",
        )
    stack = ws.stack(spec, create=False)
    if stack is None:
        raise refused
    exported = export_state(stack)
    deployment = dict(exported.get("deployment") or {})
    own = holdings(deployment)
    held = set(own)
    if not ws.pulumi_cloud:  # Pulumi Cloud's other stacks are behind its API: this one's alone
        held |= ws.checkpoints().holdings()
    clients = cloud_clients(ws, spec)
    found: dict[str, str] = {}
    why_not: list[str] = []
    for create in existing:
        try:
            ident, why = judge(create, spec, clients, held, own)
        except LookupFailed as exc:
            kind = TransientStackError if exc.transient else PermanentStackError
            raise kind(
                spec.label, f"{exc}: nothing was adopted (the update said: {refused.reason})"
            ) from None
        if why:
            why_not.append(f"{create.label} ({create.code}): {why}")
        else:
            found[create.urn] = ident
    if why_not:
        raise PermanentStackError(
            spec.label,
            f"AWS refused to create what exists already, and it was not adopted from {where}: "
            f"{'; '.join(why_not)}. Delete what is not this stack's, or `pulumi import` it; "
            f"nothing was changed (the update said: {refused.reason})",
        )
    resources = [dict(r) for r in deployment.get("resources") or []]
    for create in existing:
        values = dict(create.inputs)
        resources.append(
            {
                "urn": create.urn,
                "custom": True,
                "id": found[create.urn],
                "type": create.type,
                "inputs": values,
                "outputs": values,  # until the refresh reads them from the cloud
                "parent": create.parent,
                "provider": create.provider,
            }
        )
    import_state(
        ws, spec, stack, {**exported, "deployment": {**deployment, "resources": resources}}
    )
    audited.adopted(ws.settings, spec, [(c.urn, found[c.urn]) for c in existing])
    said = [
        f"adopted {c.label} as {found[c.urn]}: {where} had made it ({c.code})" for c in existing
    ]
    for line in said:
        listener.line(f"stack {spec.label}: {line}")
    ws.set_config(stack, spec)
    with running_on(spec, stack):  # the adopted resources' outputs, read from the cloud
        stack.refresh(on_output=listener.line, program=pulumi_program(in_process(spec.program)))
    return "; ".join(said)


def judge(
    create: ExistingCreate,
    spec: StackSpec,
    clients: CloudClients,
    held: Collection[tuple[str, str]],
    own: Collection[tuple[str, str]],
) -> tuple[str, str]:
    """(the id to adopt, "") or ("", why it is not adopted).

    Raises:
        LookupFailed: the cloud did not answer.
    """
    verdict = look_up(PendingCreate(create.urn, create.type, create.inputs), clients, held)
    if verdict.found is None:
        if not verdict.looked:
            return "", "stackflow cannot look this type up"
        if verdict.held:
            return "", f"what matches ({', '.join(verdict.held)}) is in a stack's state already"
        if verdict.ambiguous:
            return "", f"{len(verdict.ambiguous)} match ({', '.join(verdict.ambiguous)})"
        return "", "nothing matches its inputs there (another account or region holds it?)"
    ident = verdict.found
    if tags(create.inputs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            found = tags_of(clients, create.type, ident, create.inputs)
        except (BotoCoreError, ClientError) as exc:
            raise failure(exc, create.label, clients.where) from None
        if found is None:
            return "", f"{ident}: stackflow cannot read this type's tags to tell whose it is"
        wanted = {"project": spec.project, "environment": spec.environment, "stack": spec.node}
        other = {k: found.get(k) for k in OWNER_TAGS if found.get(k) != wanted[k]}
        if other:
            shown = ", ".join(f"{k}={v!r}" for k, v in other.items())
            return "", f"{ident} is tagged {shown}: not this project, environment and stack"
        return ident, ""
    ids = {value for _kind, value in own}
    if not any(isinstance(v, str) and v in ids for v in create.inputs.values()):
        return "", (
            f"{ident} has no tags, and none of its inputs names a resource this stack's state "
            "holds (its parent)"
        )
    return ident, ""
