"""The stack task's last phase: what the operation did, as the stack's outcome. Its status, the
drift marks it sets or clears (the next up's skip decision reads them), the result of its kind of
operation, and the live view told that it is done."""

from __future__ import annotations

from stackflow.dag import parse_outputs, project_outputs
from stackflow.drift import DriftMark
from stackflow.engine import Operation, OperationResult, OutputValue
from stackflow.engine.base import ChangeCounts, StackSpec
from stackflow.outcome import (
    DriftResult,
    NodeOutcome,
    PreviewResult,
    RefreshResult,
    StackResult,
    UpResult,
    completed,
)
from stackflow.progress import NodeState
from tasks.stack.call import StackCall
from tasks.stack.inputs import Inputs


def deployed(call: StackCall, spec: StackSpec) -> dict[str, OutputValue]:
    """A preview's stack outputs deployed now, read before it runs: the redactor learns the
    stack's secrets before its preview shows any value ({} for other operations)."""
    return call.ctx.engine.outputs(spec) if call.operation is Operation.PREVIEW else {}


def report(
    call: StackCall, inputs: Inputs, done: OperationResult, stored: dict[str, OutputValue]
) -> NodeOutcome:
    """The stack's outcome, its drift marks set or cleared, and the live view told."""
    operation, changes = call.operation, done.changes
    status = completed(operation, changes)
    if done.healed:  # what the engine healed on the way (a lost create's resource adopted)
        ctx = call.ctx
        ctx.healed[call.node] = "; ".join(n for n in (ctx.healed.get(call.node), done.healed) if n)
    _mark(call, inputs.spec, changes)
    outcome = NodeOutcome(
        call.node,
        operation,
        status,
        changes,
        done.duration_s,
        note=inputs.note,
        retries=tuple(call.ctx.retries.get(call.node, ())),
        healed=call.ctx.healed.get(call.node, ""),
        violations=done.violations,
        result=_result(call, inputs, done, stored),
    )
    call.say(NodeState.DONE, status=status, changes=changes)
    return outcome


def _mark(call: StackCall, spec: StackSpec, changes: ChangeCounts) -> None:
    """An up or a destroy puts the stack right; drift found makes the next up refresh first,
    then put the code's values back; a refresh that took the cloud's values into the state
    while the stamp still matches makes the next up run (it may not skip)."""
    marks, operation = call.ctx.drift, call.operation
    if operation in (Operation.UP, Operation.DESTROY):
        marks.clear(spec)
    elif operation is Operation.DRIFT and changes.changed:
        marks.mark(spec)
    elif operation is Operation.REFRESH and changes.changed:
        marks.mark(spec, DriftMark.REFRESHED)


def _result(
    call: StackCall, inputs: Inputs, done: OperationResult, stored: dict[str, OutputValue]
) -> StackResult | None:
    """What the operation found beyond its counts (a destroy: nothing)."""
    node = call.ctx.graph[call.node]
    if call.operation is Operation.UP:
        started = inputs.started
        # an early start's fingerprint resolved before its update could end
        found = started.fingerprint.result() if started is not None else inputs.fingerprint
        return UpResult(dict(done.outputs), parse_outputs(node, done.outputs), found)
    if call.operation is Operation.PREVIEW:
        # Downstream previews read what this preview projects; the migrations' plan reads the
        # database deployed now (a stack not deployed yet hands on its projection).
        projection = project_outputs(node, call.ctx.settings, stored, done.projected)
        return PreviewResult(
            done.resource_changes,
            projection.outputs,
            parse_outputs(node, stored) if stored else None,
            projection.describe() if projection.moves else "",
            inputs.fingerprint,
            call.gate.plan_file if call.planning and call.gate is not None else None,
        )
    if call.operation is Operation.REFRESH:
        return RefreshResult(dict(done.outputs))
    if call.operation is Operation.DRIFT:
        return DriftResult(done.resource_changes, dict(done.outputs))
    return None
