"""The stack task's second phase: skip an `up` (or a gated plan's preview) whose inputs match
what the stack's last successful up recorded, with no `pulumi` process (`stackflow.fingerprint`).
A plan's fingerprint covers what the upstream previews project: when an upstream output moves,
so does the stack's fingerprint, and it is previewed, not skipped. A project node's preview
before its upstream stacks exist is not made either (`tasks.projects.not_previewable`)."""

from __future__ import annotations

from stackflow import fingerprint
from stackflow.dag import parse_outputs
from stackflow.engine import Operation
from stackflow.outcome import NodeOutcome, Status, UpResult
from stackflow.progress import NodeState
from tasks.projects import not_previewable
from tasks.stack.call import StackCall
from tasks.stack.inputs import Inputs

UNCHANGED = "unchanged since its last successful up"


def skipped(call: StackCall, inputs: Inputs, force: bool) -> NodeOutcome | None:
    """The outcome of an operation that is not made, or None when it runs: it is forced, drift
    was found, it started early (its inputs are still to come), or its checkpoint does not prove
    it unchanged (the log says why)."""
    if inputs.absent:
        return not_previewable(call.ctx, call.ctx.graph[call.node], inputs.absent)
    if not (call.operation is Operation.UP or call.planning):
        return None
    if force or inputs.drift or inputs.started:
        return None
    ctx, spec = call.ctx, inputs.spec
    state = ctx.engine.state(spec)  # one read of the backend, no pulumi process
    judged = fingerprint.judge(state, inputs.fingerprint, ctx.passphrase)
    if judged.why:
        call.logger.info("%s runs: %s", spec.label, judged.why)
        return None
    outputs = judged.outputs
    if outputs is None:  # unchanged, but its secrets are the engine's to read
        outputs = ctx.engine.outputs(spec)
    call.logger.info("%s %s: skipped, no engine call", spec.label, UNCHANGED)
    call.say(NodeState.SKIPPED, status=Status.UNCHANGED, detail=UNCHANGED)
    typed = parse_outputs(ctx.graph[call.node], outputs)
    return NodeOutcome(
        call.node,
        call.operation,
        Status.UNCHANGED,
        result=UpResult(outputs, typed, inputs.fingerprint),
    )
