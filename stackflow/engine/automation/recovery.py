"""What an interrupted update leaves behind, and recovering from it: a lock its dead `pulumi`
process held, and the pending operations in the stack's state.

A pending create is an update cut off between the cloud's create and Pulumi's record of its id:
the cloud may hold the resource while no state does. Each one is looked up in the cloud the engine
deploys to (`stackflow.engine.pending`): one found is imported into the state with its id, one the
cloud never made is cleared, and an ambiguous one is cleared and said. Clearing them all (what
`refresh --clear-pending-creates` does) left the resource outside any state: the next update made
a second one, or failed on its fixed name every time after.

The import is a state edit: the stack is exported (secrets stay encrypted), each found create moves
from `pending_operations` into `resources` with its id, and the result is imported; a refresh then
reads every resource, the imported ones included, from the cloud (and, as before, settles pending
updates and deletes). The CLI's own `refresh --import-pending-creates URN ID` does not do it in
v3.259.0: it turns the operation into a pending import, which the refresh then drops from the
state, so the resource was cleared, not imported.

Runs while this run holds the stack's concurrency slot, so no other run of ours is updating it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import pulumi.automation as auto

from stackflow.engine.automation.audited import lock_broken, pending_settled
from stackflow.engine.automation.command import run_stack_command
from stackflow.engine.automation.program import in_process, pulumi_program
from stackflow.engine.automation.stackstate import read_state
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import Fence, Listener, StackSpec
from stackflow.engine.checkpoints import LockHolder, holdings
from stackflow.engine.pending import (
    CloudClients,
    LookupFailed,
    PendingCreate,
    Recovery,
    Verdict,
    look_up,
)
from stackflow.errors import PermanentStackError, TransientStackError
from stackflow.processes import pid_alive

RunningOn = Callable[[StackSpec, Any], AbstractContextManager[None]]


def recover(
    ws: Workspaces,
    spec: StackSpec,
    listener: Listener,
    running_on: RunningOn,
    fence: Fence | None = None,
) -> Recovery:
    """Clear a dead run's lock; import the pending creates the cloud made and clear the rest;
    refresh the stack when it had pending operations.

    Raises:
        TransientStackError: the cloud did not answer a lookup (nothing was imported or cleared).
        PermanentStackError: the cloud refused a lookup (credentials, permissions).
    """
    where = place(ws)
    unlocked = clear_stale_locks(ws, spec, listener, fence)
    if ws.reads_checkpoints:  # the checkpoint says, read with no process
        state = read_state(ws, spec)
        if state is None or not state.pending:
            return Recovery(unlocked, where=where)
    stack = ws.stack(spec, create=False)
    if stack is None:
        return Recovery(unlocked, where=where)
    exported = export_state(stack)
    deployment: dict[str, Any] = exported.get("deployment") or {}
    pending: list[dict[str, Any]] = list(deployment.get("pending_operations") or [])
    if not pending:
        return Recovery(unlocked, where=where)
    creates = [PendingCreate.from_operation(op) for op in pending if op.get("type") == "creating"]
    listener.line(
        f"stack {spec.label} has {len(pending)} pending operations left by an interrupted "
        + (f"update; looking its pending creates up in {where}" if creates else "update")
    )
    verdicts = _judge(ws, spec, creates, deployment)
    for verdict in verdicts:
        listener.line(f"stack {spec.label}: {verdict.line(where)}")
    if creates:
        _adopt(ws, spec, stack, exported, verdicts)
    ws.set_config(stack, spec)
    with running_on(spec, stack):  # reads the imported resources; settles the other operations
        stack.refresh(
            clear_pending_creates=True,
            on_output=listener.line,
            program=pulumi_program(in_process(spec.program)),
        )
    pending_settled(ws.settings, spec, verdicts, len(pending) - len(creates), where)
    return Recovery(unlocked, tuple(verdicts), len(pending) - len(creates), where)


def _judge(
    ws: Workspaces,
    spec: StackSpec,
    creates: Sequence[PendingCreate],
    deployment: Mapping[str, Any],
) -> list[Verdict]:
    """Each pending create's verdict, from the cloud the stack deploys to."""
    if not creates:
        return []
    held = holdings(deployment)
    if not ws.pulumi_cloud:  # Pulumi Cloud's other stacks are behind its API: this one's alone
        held |= ws.checkpoints().holdings()
    try:
        clients = cloud_clients(ws, spec)
        return [look_up(create, clients, held) for create in creates]
    except LookupFailed as exc:
        kind = TransientStackError if exc.transient else PermanentStackError
        raise kind(
            spec.label,
            f"{exc}; its pending creates were left as they are (the cloud may hold them), so "
            "nothing was created twice: run it again once the cloud answers",
        ) from None


def cloud_clients(ws: Workspaces, spec: StackSpec) -> CloudClients:
    """boto3 against the cloud the stack deploys to: its region, the local cloud's server or
    AWS with the stack's profile."""
    settings = ws.settings
    config = spec.config
    region = config["aws:region"].value if "aws:region" in config else settings.aws.region
    if ws.local:
        return CloudClients(region, endpoint=ws.local_cloud(), where=place(ws))
    profile = config["aws:profile"].value if "aws:profile" in config else settings.aws.profile
    return CloudClients(region, profile=profile, where=place(ws))


def place(ws: Workspaces) -> str:
    """The cloud in a sentence: "the local cloud" or "AWS"."""
    return "the local cloud" if ws.local else "AWS"


def export_state(stack: auto.Stack) -> dict[str, Any]:
    """The stack's state as `pulumi stack export` writes it, its secrets still encrypted."""
    result = run_stack_command(stack, ["stack", "export"])
    found: dict[str, Any] = json.loads(result.stdout or "{}")
    return found


def _adopt(
    ws: Workspaces,
    spec: StackSpec,
    stack: auto.Stack,
    exported: Mapping[str, Any],
    verdicts: Sequence[Verdict],
) -> None:
    """Import the state with each found create among its resources (with its id) and no pending
    operations left (`stack import` drops them all: the refresh that follows settles the rest)."""
    found = {v.pending.urn: v.found for v in verdicts if v.found is not None}
    deployment = dict(exported.get("deployment") or {})
    adopted = []
    for operation in deployment.get("pending_operations") or []:
        resource = dict(operation.get("resource") or {})
        if operation.get("type") == "creating" and resource.get("urn") in found:
            resource["id"] = found[resource["urn"]]
            # What the create was given stands in for its outputs until the refresh reads them.
            resource["outputs"] = dict(resource.get("outputs") or resource.get("inputs") or {})
            adopted.append(resource)
    resources = [dict(r) for r in deployment.get("resources") or []]
    for resource in resources:
        if resource.get("urn") in found:  # the create replaced it: it goes at the next update
            resource["delete"] = True
    # Every resource a create waits for is in the state already, and nothing was created after
    # it that depends on it: at the end, the order stays valid.
    deployment["resources"] = [*resources, *adopted]
    deployment["pending_operations"] = []
    import_state(ws, spec, stack, {**exported, "deployment": deployment})


def import_state(
    ws: Workspaces, spec: StackSpec, stack: auto.Stack, exported: Mapping[str, Any]
) -> None:
    """`pulumi stack import` of `exported` (an export's shape, secrets encrypted), through a
    0600 file in the stack's workspace that is removed afterwards."""
    folder = ws.work_dir(spec)
    descriptor, name = tempfile.mkstemp(prefix=".recovered-", suffix=".json", dir=folder)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:  # 0600, like mkstemp made it
            json.dump(exported, file)
        run_stack_command(stack, ["stack", "import", "--file", name])
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def clear_stale_locks(
    ws: Workspaces, spec: StackSpec, listener: Listener, fence: Fence | None = None
) -> bool:
    """Break the locks a dead run left: one this machine's dead `pulumi` holds, or one `fence`
    says its holder's flow run has ended (see `stackflow.holders`). Nothing else removes them,
    and every later operation on the stack fails on them. A live process's lock is left alone.

    Returns True if any was broken.
    """
    if ws.pulumi_cloud:
        return False  # Pulumi Cloud ends stale updates itself: see the stale-lock advice
    name = ws.short_name(spec)
    stale: list[tuple[LockHolder, str]] = []
    for lock in ws.checkpoints().locks(spec.pulumi_project, name):
        if lock.host == socket.gethostname() and lock.pid is not None and not pid_alive(lock.pid):
            stale.append((lock, f"pulumi pid {lock.pid} on {lock.host}, which is gone"))
        elif fence is not None:
            why = fence(lock)
            if why:
                stale.append((lock, why))
    if not stale:
        return False
    broken = [ws.backend.break_lock(ws.backend_url, lock.key) for lock, _ in stale]
    if not all(broken):  # where the kind does not, `pulumi cancel` deletes the stack's locks
        stack = ws.stack(spec, create=False)
        if stack is not None:
            stack.cancel()
    for _lock, why in stale:
        listener.line(f"stack {spec.label}: removed the lock of an interrupted update ({why})")
        lock_broken(ws.settings, spec, why)
    return True
