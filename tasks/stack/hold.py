"""The stack task's third phase: take the stack, then recover it. The stack's slot (one
operation per environment and stack across runs, `tasks.limits`), this run recorded as a holder
of its lock with the fence that decides whether a lock another host left may be broken
(`stackflow.holders`), and what an interrupted earlier operation left cleared before anything
else runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from stackflow import holders
from stackflow.crashes import ZOMBIE_WINDOW_S, flow_run_state
from stackflow.engine import Operation
from stackflow.engine.base import StackSpec
from stackflow.errors import OperationCancelled
from stackflow.progress import NodeState
from tasks.limits import SlotWaitCancelled, stack_slot
from tasks.stack.call import StackCall


@contextlib.contextmanager
def held(call: StackCall, spec: StackSpec) -> Iterator[holders.StaleLockFence | None]:
    """Hold the stack's slot (waiting while another run holds it) and this run's holder record
    for the block; yields the lock fence (None without records beside the backend).

    Raises:
        OperationCancelled: the run was interrupted before the operation could start.
    """
    ctx = call.ctx
    with contextlib.ExitStack() as taken:
        try:
            slot = stack_slot(
                ctx.settings.state.holders,
                ctx.settings.environment,
                call.node,
                call.freed,
                call.waiting,
                cancelled=lambda: ctx.progress.cancelled,
            )
            taken.enter_context(slot)
        except SlotWaitCancelled:
            call.say(NodeState.NOT_RUN, detail="the run was interrupted while it waited")
            raise OperationCancelled(spec.label, "not started: the run was interrupted") from None
        ctx.check_not_cancelled(call.node)  # interrupted while the slot was taken: start nothing
        call.say(NodeState.RUNNING)
        yield _fence(call, spec, taken)


def recover(call: StackCall, spec: StackSpec, fence: holders.StaleLockFence | None) -> None:
    """Clear what an interrupted operation left on the stack (a stale lock, pending operations),
    then forget the holders the fence found dead. A preview changes nothing: it clears nothing."""
    if call.operation is Operation.PREVIEW:
        return
    ctx, engine = call.ctx, call.ctx.engine
    recovered = engine.recover(spec, call.listener, fence)
    if recovered:
        call.logger.warning("%s: %s", spec.label, recovered.note)
        ctx.healed[call.node] = recovered.note
    if fence is not None:
        fence.settle(lambda: bool((found := engine.state(spec)) and found.locked))


def _fence(
    call: StackCall, spec: StackSpec, taken: contextlib.ExitStack
) -> holders.StaleLockFence | None:
    """Record this run as a holder of the stack (its pulumi pids as they start) until the
    operation ends; the fence reads the other holders' records."""
    ctx, records = call.ctx, call.ctx.records
    if records is None:
        return None
    env, node = spec.environment, spec.node
    key = holders.take(records, env, node, holders.Holder.here(_flow_run_id()))
    taken.callback(holders.release, records, key)
    ctx.engine.watch_locks(spec, lambda pid: holders.add_pulumi_pid(records, key, pid))
    taken.callback(ctx.engine.watch_locks, spec, None)
    return holders.StaleLockFence(
        records,
        env,
        node,
        key,
        flow_run_state,
        ZOMBIE_WINDOW_S,
        call.freed,
        cancelled=lambda: ctx.progress.cancelled,
    )


def _flow_run_id() -> str | None:
    from prefect.runtime import flow_run

    found = flow_run.id
    return str(found) if found else None
