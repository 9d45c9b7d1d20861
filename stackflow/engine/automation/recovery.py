"""What an interrupted update leaves behind, and clearing it: a lock its dead `pulumi` process
held, and the pending operations in the stack's state.

Runs while this run holds the stack's concurrency slot, so no other run of ours is updating it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from stackflow.engine.automation.program import pulumi_program
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import Listener, StackSpec
from stackflow.processes import pid_alive

RunningOn = Callable[[StackSpec, Any], AbstractContextManager[None]]


def recover(ws: Workspaces, spec: StackSpec, listener: Listener, running_on: RunningOn) -> bool:
    """Clear a dead process's lock (file backend) and the stack's pending operations.

    Returns True if there was anything (pending operations are cleared with
    `refresh --clear-pending-creates`).
    """
    unlocked = clear_stale_locks(ws, spec, listener)
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
    stack.set_all_config(ws.config(spec))
    with running_on(spec, stack):
        stack.refresh(
            clear_pending_creates=True,
            on_output=listener.line,
            program=pulumi_program(spec.program),
        )
    return True


def clear_stale_locks(ws: Workspaces, spec: StackSpec, listener: Listener) -> bool:
    """Delete the lock files a killed `pulumi` left on a file backend: those whose process is
    gone from this machine. Nothing else removes them, and every later operation on the stack
    fails on them. A live process's lock, or another machine's, is left alone.

    Returns True if any was deleted.
    """
    folder = ws.backend_folder
    if folder is None:
        return False  # other backends: the stale-lock advice after the retries says what to do
    locks = folder / ".pulumi" / "locks"
    folders = (
        locks / "organization" / spec.pulumi_project / spec.environment,
        locks / spec.environment,
    )
    removed = False
    for path in sorted(p for d in folders for p in d.glob("*.json")):
        try:
            holder = json.loads(path.read_text())
            pid, host = int(holder["pid"]), str(holder["hostname"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # gone meanwhile, or not a lock we can read: left to the advice
        if host != socket.gethostname() or pid_alive(pid):
            continue
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".attrs").unlink(missing_ok=True)
        listener.line(
            f"stack {spec.label}: removed the lock of an interrupted update (pulumi pid {pid} "
            f"on {host}, which is gone)"
        )
        removed = True
    return removed
