"""The stack task's fourth phase: the operation itself, through the engine. A drifted stack is
refreshed before its up; a gated up applies under the plan its approval binds; an up that started
before its early upstream nodes stops if they did not complete. How an attempt failed is said to
the live view (retrying, cancelled, failed, or stopped by an upstream node) before it is raised."""

from __future__ import annotations

import time
from pathlib import Path

from stackflow.drift import DriftMark
from stackflow.engine import Operation, OperationResult, is_transient
from stackflow.errors import OperationCancelled, StackError
from stackflow.progress import NodeState
from tasks.approved import approved_plan
from tasks.early import EarlyStart
from tasks.stack.call import StackCall
from tasks.stack.inputs import Inputs


def operate(call: StackCall, inputs: Inputs) -> OperationResult:
    """Run the operation on the stack.

    Raises:
        TransientStackError, PermanentStackError, OperationCancelled: as the engine's `run`.
        PlanChanged: (gated up) the stack would do something the approval did not show.
        UpstreamStopped, UpstreamTaskError: an early upstream node did not complete.
    """
    try:
        return _run(call, inputs)
    except StackError as exc:
        said = _failed(call, inputs.started, exc)
        if said is exc:
            raise
        raise said from None


def _run(call: StackCall, inputs: Inputs) -> OperationResult:
    ctx, spec, operation = call.ctx, inputs.spec, call.operation
    drifted = inputs.drift is DriftMark.DRIFTED
    if drifted and operation is Operation.UP:
        # Drift found earlier: adopt what the cloud holds, so the update puts it back.
        call.logger.info("%s drifted since its last up: refreshing it first", spec.label)
        ctx.engine_calls.append(f"{Operation.REFRESH.value}:{call.node}")
        ctx.engine.run(Operation.REFRESH, spec, call.listener)
    plan = _plan(call, inputs)
    if inputs.started is not None and (never := inputs.started.stopped(False)):
        raise never  # its early upstream ended first, without completing
    if operation is Operation.UP and ctx.ahead:
        ctx.engine.prepare(spec)  # its own stack first: it is on the critical path
        ctx.prepare_ahead(call.node)
    ctx.engine_calls.append(f"{operation.value}:{call.node}")
    return ctx.engine.run(
        operation,
        spec,
        call.listener,
        plan=plan,
        refresh=call.planning and drifted,
        stamp=inputs.stamp(),
    )


def _plan(call: StackCall, inputs: Inputs) -> Path | None:
    """The update plan a gated plan's preview saves, or a gated up applies under."""
    gate = call.gate
    if gate is None:
        return None
    if call.operation is Operation.UP:
        return approved_plan(call.ctx, inputs.spec, inputs.fingerprint, gate, call.listener)
    return gate.plan_file if call.planning else None


def _failed(call: StackCall, started: EarlyStart | None, exc: StackError) -> BaseException:
    """Say how this attempt ended; what to raise: an early start whose upstream did not complete
    stopped (or never began) for that reason, anything else as it is."""
    ctx, settings = call.ctx, call.ctx.settings
    cancelled = isinstance(exc, OperationCancelled)  # interrupted: cancelled, as it says
    if started is not None and not cancelled and (stopped := started.stopped(True)):
        # its early upstream did not complete, or its real arguments could not be built
        call.say(NodeState.NOT_RUN, detail=ctx.redactor(str(stopped)))
        return stopped
    reason = ctx.redactor(exc.reason)
    retry = (
        is_transient(exc) and call.attempt <= settings.stack_retries and not ctx.progress.cancelled
    )
    call.logger.error("%s%s", ctx.redactor(str(exc)), " (will retry)" if retry else "")
    if retry:  # a retry follows this attempt
        ctx.retries.setdefault(call.node, []).append(reason)
        delays = ctx.retry_delays
        delay = delays[call.attempt - 1] if call.attempt <= len(delays) else 0.0
        call.say(NodeState.RETRYING, detail=reason, next_attempt_at=time.time() + delay)
    elif cancelled:
        call.say(NodeState.CANCELLED, detail="interrupted")
    else:
        call.say(NodeState.FAILED, detail=reason)
    return exc
