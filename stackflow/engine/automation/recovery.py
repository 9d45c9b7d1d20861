"""What an interrupted update leaves behind, and clearing it: a lock its dead `pulumi` process
held, and the pending operations in the stack's state.

Runs while this run holds the stack's concurrency slot, so no other run of ours is updating it.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from stackflow.engine.automation.program import pulumi_program
from stackflow.engine.automation.stackstate import read_state
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import Fence, Listener, StackSpec
from stackflow.engine.checkpoints import LockHolder
from stackflow.processes import pid_alive

RunningOn = Callable[[StackSpec, Any], AbstractContextManager[None]]


def recover(
    ws: Workspaces,
    spec: StackSpec,
    listener: Listener,
    running_on: RunningOn,
    fence: Fence | None = None,
) -> bool:
    """Clear a dead run's lock and the stack's pending operations.

    Returns True if there was anything (pending operations are cleared with
    `refresh --clear-pending-creates`).
    """
    unlocked = clear_stale_locks(ws, spec, listener, fence)
    if ws.reads_checkpoints:  # the checkpoint says, read with no process
        state = read_state(ws, spec)
        if state is None or not state.pending:
            return unlocked
    stack = ws.stack(spec, create=False)
    if stack is None:
        return unlocked
    # The export holds plaintext secrets: only its pending operations are looked at.
    deployment = stack.export_stack().deployment or {}
    pending = deployment.get("pending_operations") or []
    if not pending:
        return unlocked
    listener.line(
        f"stack {spec.label} has {len(pending)} pending operations left by an interrupted "
        "update; clearing them with a refresh --clear-pending-creates"
    )
    ws.set_config(stack, spec)
    with running_on(spec, stack):
        stack.refresh(
            clear_pending_creates=True,
            on_output=listener.line,
            program=pulumi_program(spec.program),
        )
    return True


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
    folder = ws.backend_folder
    if folder is not None:  # a file backend: delete exactly the stale lock files
        for lock, _ in stale:
            path = folder / lock.key
            path.unlink(missing_ok=True)
            path.with_name(path.name + ".attrs").unlink(missing_ok=True)
    else:  # on PostgreSQL and S3, `pulumi cancel` deletes the stack's lock objects (stops nothing)
        stack = ws.stack(spec, create=False)
        if stack is not None:
            stack.cancel()
    for _lock, why in stale:
        listener.line(f"stack {spec.label}: removed the lock of an interrupted update ({why})")
    return True
