"""The Prefect task that runs one operation on one stack through the engine.

Idempotent by construction, which is what makes its retries safe: the stack is created or
selected, an unchanged stack is skipped by fingerprint, and an interrupted earlier operation is
recovered before anything else. Only transient errors are retried. The task is a sequence of
phases, each in a room of its own under `tasks.stack`.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.logging import get_run_logger
from prefect.runtime import task_run
from prefect.tasks import Task

from stackflow.engine import Operation, is_transient
from stackflow.outcome import NodeOutcome
from stackflow.progress import NodeState
from tasks.approved import Gate
from tasks.context import RunContext
from tasks.early import EarlyUpstream
from tasks.stack.call import StackCall
from tasks.stack.hold import held, recover
from tasks.stack.inputs import gather
from tasks.stack.operate import operate
from tasks.stack.report import deployed, report
from tasks.stack.skip import skipped


def retry_if_transient(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect retry condition: continue to the retry policy only for transient errors."""
    try:
        state.result(raise_on_failure=True)
    except Exception as exc:  # the task's own exception, re-raised by Prefect
        return is_transient(exc)
    return False


@task(
    name="stack",
    task_run_name="{operation}-{node}",
    # how many retries and after how long: the run's RetryPolicy (flows.walk applies it, its
    # delays drawn once, so the task can say when its next attempt starts)
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
    persist_result=False,  # outputs may hold secrets: never written to result storage
    log_prints=False,
)
def stack_operation(
    ctx: RunContext,
    node: str,
    operation: Operation,
    upstream: dict[str, NodeOutcome],
    force: bool = False,
    gate: Gate | None = None,
    early: EarlyUpstream | None = None,
) -> NodeOutcome:
    """Preview, update, refresh, check drift of or destroy one stack.

    Args:
        upstream: the outcomes of the stacks this one reads, by node name.
        force: run `up` even when the fingerprint says nothing changed.
        gate: the approval this operation plans for (PREVIEW) or applies (UP); see `Gate`.
        early: (UP) the futures of upstream nodes it may start before (tasks.early).
    Raises:
        TransientStackError: retried by Prefect (lock held, throttling, network).
        PermanentStackError: fails the run at once, naming the stack.
        PlanChanged: (gated UP) the stack would do something the approval did not show.
    """
    call = StackCall(ctx, node, operation, task_run.run_count, get_run_logger(), gate)
    ctx.check_not_cancelled(node)
    call.say(NodeState.RUNNING)
    inputs = gather(call, upstream, early, force)
    outcome = skipped(call, inputs, force)
    if outcome is not None:
        return outcome
    stored = deployed(call, inputs.spec)
    with held(call, inputs.spec) as fence:
        recover(call, inputs.spec, fence)
        done = operate(call, inputs)
    return report(call, inputs, done, stored)
