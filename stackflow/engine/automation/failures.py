"""Advice for the failures a person must decide about."""

from __future__ import annotations

from stackflow.backends import mask_url
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import StackSpec
from stackflow.errors import StackError


def stale_lock_advice(ws: Workspaces, spec: StackSpec, attempts: int, error: StackError) -> str:
    """What to do about a lock still held after the retries: the next run breaks a dead run's
    lock itself when its holder's record proves it dead (see `stackflow.holders`); otherwise a
    person decides, since nothing here can tell a stale lock from a live update elsewhere."""
    # On a self-managed backend `pulumi cancel` only deletes the stack's lock files (it stops
    # no process), which is what clearing a stale lock needs.
    name = ws.stack_name(spec)
    backend = mask_url(ws.backend_url)  # never a password in an error
    if ws.pulumi_cloud:
        how = f"`pulumi cancel --yes --stack {name}` (Pulumi Cloud then ends the stale update)"
    else:
        how = (
            f"delete the stack's lock file under {backend}/.pulumi/locks/, or run "
            f"`pulumi cancel --yes --stack {name}` in {ws.work_dir(spec)} with "
            f"PULUMI_BACKEND_URL={backend} (on this backend it deletes the lock files)"
        )
    return (
        f"{error.reason} (still locked after {attempts} attempts). If no other update of this "
        f"stack is running, a killed process left the lock behind: clear it with {how}, then "
        "run again; the next run clears what the interrupted update left pending."
    )
