"""A stack's state as the skip path reads it: from the backend's own objects on a self-managed
backend (no `pulumi` process), through one `stack export` on Pulumi Cloud."""

from __future__ import annotations

from typing import Any

from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import StackSpec, StackState
from stackflow.engine.checkpoints import stack_state


def read_state(ws: Workspaces, spec: StackSpec) -> StackState | None:
    """The stack's latest checkpoint and whether it is locked, read from a file, S3 or
    PostgreSQL backend (see `checkpoints.stack_state`); None when it holds no update of it."""
    return stack_state(
        ws.checkpoints, spec.pulumi_project, ws.short_name(spec), spec.label, ws.redactor
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
