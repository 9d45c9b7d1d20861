"""The Automation API call each operation makes on a stack, and what it returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi.automation as auto

from stackflow.engine.automation.changes import counts
from stackflow.engine.base import ChangeCounts, Operation


def run_command(
    stack: auto.Stack,
    operation: Operation,
    options: dict[str, Any],
    plan: Path | None,
    refresh: bool,
) -> tuple[ChangeCounts, auto.OutputMap | None]:
    """Run `operation` on `stack` with the SDK's `options` (callbacks, program, policy packs);
    its change counts, and an update's outputs (None for the other operations).

    `plan`: a preview saves Pulumi's update plan there; an up applies under it. `refresh`: a
    preview reads the cloud first.

    Raises:
        CommandError: the CLI failed (the engine classifies it).
    """
    if plan is not None:
        plan.parent.mkdir(parents=True, exist_ok=True)
    planned = str(plan) if plan else None
    if operation is Operation.UP:
        up = stack.up(**options, plan=planned)
        return counts(up.summary.resource_changes), up.outputs
    if operation is Operation.PREVIEW:
        preview = stack.preview(**options, plan=planned, refresh=refresh or None)
        return counts(preview.change_summary), None
    if operation is Operation.REFRESH:
        return counts(stack.refresh(**options).summary.resource_changes), None
    if operation is Operation.DRIFT:
        # A refresh preview: what refresh would adopt is the drift; nothing is written.
        return counts(stack.preview_refresh(**options).change_summary), None
    return counts(stack.destroy(**options).summary.resource_changes), None
