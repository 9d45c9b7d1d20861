"""What a failed engine command becomes: a cancel, a classified error that says where the
passphrase in use came from, or advice for the failures a person must decide about."""

from __future__ import annotations

from stackflow.backends import mask_url
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import StackSpec
from stackflow.engine.classify import classify, diagnose, error_detail
from stackflow.errors import OperationCancelled, PermanentStackError, StackError
from stackflow.redact import Redactor
from stackflow.secretbox import passphrase_source


def explain(
    exc: BaseException,
    spec: StackSpec,
    redactor: Redactor,
    ws: Workspaces,
    *,
    cancelled: bool,
    stale_after: int,
) -> StackError:
    """The StackError a failed command of `spec` raises.

    Args:
        cancelled: the operation was cancelled on request.
        stale_after: the stack's lock was held through this many attempts (0: not so).
    """
    if cancelled:
        return OperationCancelled(
            spec.label,
            redactor(f"operation cancelled on request; the CLI said: {error_detail(exc)}"),
        )
    error = classify(exc, spec.label, redactor)
    if diagnose(exc).category == "passphrase":  # say where the passphrase in use came from
        error = type(error)(
            spec.label, f"{error.reason} (read from {passphrase_source(ws.settings)})"
        )
    if stale_after:
        return PermanentStackError(
            spec.label, redactor(stale_lock_advice(ws, spec, stale_after, error))
        )
    return error


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
