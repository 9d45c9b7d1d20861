"""A stack's state as the skip path reads it: from the backend's own objects on a self-managed
backend (no `pulumi` process), through one `stack export` on Pulumi Cloud."""

from __future__ import annotations

from typing import Any

from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import StackSpec, StackState
from stackflow.engine.checkpoints import CheckpointError
from stackflow.engine.stateblobs import StateBackendUnavailable
from stackflow.errors import PermanentStackError, TransientStackError


def read_state(ws: Workspaces, spec: StackSpec) -> StackState | None:
    """The stack's latest checkpoint and whether it is locked, read from a file, S3 or
    PostgreSQL backend; None when the backend holds no update of it.

    Raises:
        PermanentStackError: the checkpoint is damaged (names the stack and where).
        TransientStackError: the backend did not answer.
    """
    name = ws.stack_name(spec).rsplit("/", 1)[-1]
    try:
        reader = ws.checkpoints()
        checkpoint = reader.checkpoint(spec.pulumi_project, name)
        if checkpoint is None or checkpoint.manifest_time is None:
            return None
        locked = bool(reader.locks(spec.pulumi_project, name))
    except CheckpointError as exc:
        raise PermanentStackError(spec.label, ws.redactor(str(exc))) from None
    except StateBackendUnavailable as exc:
        raise TransientStackError(spec.label, ws.redactor(str(exc))) from None
    return StackState(
        updated=checkpoint.manifest_time,
        outputs=checkpoint.outputs,
        resources=checkpoint.resource_count,
        pending=len(checkpoint.pending_operations),
        locked=locked,
    )


def exported_state(ws: Workspaces, spec: StackSpec) -> StackState | None:
    """Pulumi Cloud keeps state behind its API: there the CLI exports it (one process)."""
    stack = ws.stack(spec, create=False)
    if stack is None:
        return None
    deployment = stack.export_stack().deployment or {}
    resources = deployment.get("resources") or []
    root: dict[str, Any] = next(
        (r for r in resources if r.get("type") == "pulumi:pulumi:Stack"), {}
    )
    return StackState(
        updated=str((deployment.get("manifest") or {}).get("time", "")),
        outputs=root.get("outputs") or {},
        resources=len(resources),
        pending=len(deployment.get("pending_operations") or []),
        locked=False,  # Pulumi Cloud refuses a second update itself
    )
