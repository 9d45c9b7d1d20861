"""The Prefect task that runs one operation on one stack through the engine.

Idempotent by construction, which is what makes its retries safe: the stack is created or
selected, an unchanged stack is skipped by fingerprint, and an interrupted earlier operation is
recovered before anything else. Only transient errors are retried.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.logging import get_run_logger
from prefect.runtime import task_run
from prefect.tasks import Task

from stackflow import fingerprint, holders
from stackflow.crashes import ZOMBIE_WINDOW_S, flow_run_state
from stackflow.dag import parse_outputs, project_outputs
from stackflow.drift import DRIFTED, REFRESHED
from stackflow.engine import Listener, Operation, OperationResult, is_transient
from stackflow.engine.base import ResourceEvent, StackSpec
from stackflow.errors import OperationCancelled, StackError
from stackflow.progress import (
    NodeState,
    ResourceProgress,
    ResourcesDeclared,
)
from tasks.approved import Gate, approved_plan
from tasks.context import RunContext, StackOutcome
from tasks.early import EarlyStart, EarlyUpstream
from tasks.early import begin as begin_early
from tasks.early import wait as wait_early
from tasks.limits import SlotWaitCancelled, stack_slot
from tasks.projects import not_previewable, project_read


def retry_if_transient(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect retry condition: continue to the retry policy only for transient errors."""
    try:
        state.result(raise_on_failure=True)
    except Exception as exc:  # the task's own exception, re-raised by Prefect
        return is_transient(exc)
    return False


def _listener(
    ctx: RunContext, node: str, logger: logging.Logger | logging.LoggerAdapter[Any]
) -> Listener:
    environment = ctx.settings.environment

    begun = ctx.begun(node)

    def on_event(event: ResourceEvent) -> None:
        begun.set()  # the engine reads and writes its state: a stack may start beside it
        if event.status == "done" and event.change not in ("same", "refresh"):
            logger.debug("%s %s %s: %s", node, event.type, event.name, event.change)
        ctx.progress.publish(
            ResourceProgress(
                environment,
                node,
                event.urn,
                event.type,
                event.name,
                event.change,
                event.status,
            )
        )

    def on_declared(count: int) -> None:
        ctx.progress.publish(ResourcesDeclared(environment, node, count))

    return Listener(
        on_output=logger.info, on_event=on_event, redactor=ctx.redactor, on_declared=on_declared
    )


def _read(upstream: dict[str, StackOutcome], operation: Operation) -> dict[str, Any]:
    """The outputs an operation reads from each upstream stack (steps hand on none)."""
    read = {k: v.read_by(operation) for k, v in upstream.items()}
    return {k: v for k, v in read.items() if v is not None}


def _record(ctx: RunContext, operation: Operation, node: str) -> None:
    ctx.engine_calls.append(f"{operation.value}:{node}")


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
    upstream: dict[str, StackOutcome],
    force: bool = False,
    gate: Gate | None = None,
    early: EarlyUpstream | None = None,
) -> StackOutcome:
    """Preview, update, refresh, check drift of or destroy one stack.

    Args:
        upstream: typed outputs of the stacks this one reads, by node name.
        force: run `up` even when the fingerprint says nothing changed.
        gate: the approval this operation plans for (PREVIEW) or applies (UP); see `Gate`.
        early: (UP) the futures of upstream nodes it may start before (tasks.early).
    Raises:
        TransientStackError: retried by Prefect (lock held, throttling, network).
        PermanentStackError: fails the run at once, naming the stack.
        PlanChanged: (gated UP) the stack would do something the approval did not show.
    """
    logger = get_run_logger()
    settings, engine = ctx.settings, ctx.engine
    graph_node = ctx.graph[node]
    attempt = task_run.run_count  # Prefect counts attempts from 1
    ctx.check_not_cancelled(node)
    ctx.publish(node, NodeState.RUNNING, attempt=attempt)
    started: EarlyStart | None = None
    seen = project_read(upstream, operation) if graph_node.project is not None else None
    if seen is not None and seen.absent and operation is Operation.PREVIEW:
        return not_previewable(ctx, graph_node, seen)
    if seen is not None and operation in (Operation.UP, Operation.PREVIEW):
        spec, args = ctx.graph.spec(node, settings, seen.outputs, seen.secrets)
    elif operation in (Operation.UP, Operation.PREVIEW):
        read = _read(upstream, operation)
        if early:
            started = begin_early(ctx, node, read, early, force, logger)
            if started is None:
                ctx.publish(node, NodeState.WAITING, detail=f"for {', '.join(early)}")
                upstream = {**upstream, **wait_early(early)}
                ctx.publish(node, NodeState.RUNNING, attempt=attempt)
                read = _read(upstream, operation)
        spec, args = (
            (started.spec, started.args) if started else ctx.graph.spec(node, settings, read)
        )
    else:  # refresh, drift and destroy do not run the program: no upstream needed
        spec = ctx.graph.bare_spec(settings, node)
    listener = _listener(ctx, node, logger)
    # What the upstream previews say will move: this preview shows what follows from it.
    moves = {
        k: v.projected.describe()
        for k, v in upstream.items()
        if v.projected and v.projected.moves and seen is None
    }

    fp = ""
    planning = operation is Operation.PREVIEW and gate is not None
    mark = ctx.drift.marked(spec) if operation is Operation.UP or planning else None
    drifted = mark == DRIFTED
    if started is None and operation in (Operation.UP, Operation.PREVIEW):
        # a preview plans the stamp an up records (an early start's comes when its inputs do)
        fp = fingerprint.compute(spec, args, graph_node.sources, engine.name, engine.versions())
    if operation is Operation.UP or planning:
        # A plan's fingerprint covers what the upstream previews project: when an upstream
        # output moves, so does this stack's fingerprint, and it is previewed, not skipped.
        cached = None
        if not (force or mark or started):
            state = engine.state(spec)  # one read of the backend, no pulumi process
            cached = fingerprint.unchanged_outputs(state, fp, ctx.passphrase)
            why = fingerprint.why_not_unchanged(state, fp)
            if cached is None and not why:  # unchanged, but its secrets are the engine's to read
                cached = engine.outputs(spec)
            if why:
                logger.info("%s runs: %s", spec.label, why)
        if cached is not None:
            logger.info(
                "%s unchanged since its last successful up: skipped, no engine call", spec.label
            )
            ctx.publish(
                node,
                NodeState.SKIPPED,
                status="unchanged",
                detail="unchanged since its last successful up",
            )
            return StackOutcome(
                node,
                operation.value,
                "unchanged",
                outputs=cached,
                typed=parse_outputs(graph_node, cached),
                fingerprint=fp,
            )

    def freed(message: str) -> None:  # what the slot freed that a dead run held
        logger.info("%s", message)
        ctx.publish(node, NodeState.RUNNING, detail=message, attempt=attempt)

    def waiting(why: str) -> None:
        logger.info("waiting: %s", why)
        ctx.publish(node, NodeState.WAITING, detail=why, attempt=attempt)

    # Read first: the redactor learns the stack's secrets before its preview shows any value.
    stored = engine.outputs(spec) if operation is Operation.PREVIEW else {}
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(
                stack_slot(
                    settings.state.holders,
                    settings.environment,
                    node,
                    freed,
                    waiting,
                    cancelled=lambda: ctx.progress.cancelled,
                )
            )
        except SlotWaitCancelled:
            ctx.publish(node, NodeState.NOT_RUN, detail="the run was interrupted while it waited")
            raise OperationCancelled(spec.label, "not started: the run was interrupted") from None
        ctx.check_not_cancelled(node)  # interrupted while the slot was taken: start nothing
        ctx.publish(node, NodeState.RUNNING, attempt=attempt)
        fence = _hold(ctx, spec, held, freed)
        recovered = (
            engine.recover(spec, listener, fence) if operation is not Operation.PREVIEW else None
        )
        if recovered:
            logger.warning("%s: %s", spec.label, recovered.note)
            ctx.healed[node] = recovered.note
        if fence is not None and operation is not Operation.PREVIEW:
            fence.settle(lambda: bool((found := engine.state(spec)) and found.locked))
        try:
            if drifted and operation is Operation.UP:
                # Drift found earlier: adopt what the cloud holds, so the update puts it back.
                logger.info("%s drifted since its last up: refreshing it first", spec.label)
                _record(ctx, Operation.REFRESH, node)
                engine.run(Operation.REFRESH, spec, listener)
            plan: Path | None = None
            if operation is Operation.UP and gate is not None:
                plan = approved_plan(ctx, spec, fp, gate, listener)
            elif planning:
                assert gate is not None
                plan = gate.plan_file
            if started is not None and (never := started.stopped(False)):
                raise never  # its early upstream ended first, without completing
            if operation is Operation.UP and ctx.ahead:
                engine.prepare(spec)  # its own stack first: it is on the critical path
                ctx.prepare_ahead(node)
            _record(ctx, operation, node)
            result: OperationResult = engine.run(
                operation,
                spec,
                listener,
                plan=plan,
                refresh=planning and drifted,
                stamp=fingerprint.stamp(started.fingerprint if started else fp)
                if fp or started
                else None,
            )
        except StackError as exc:
            cancelled = isinstance(exc, OperationCancelled)  # interrupted: cancelled, as it says
            if started is not None and not cancelled and (stopped := started.stopped(True)):
                # its early upstream did not complete, or its real arguments could not be built
                ctx.publish(node, NodeState.NOT_RUN, detail=ctx.redactor(str(stopped)))
                raise stopped from None
            reason = ctx.redactor(exc.reason)
            retry = (
                is_transient(exc)
                and attempt <= settings.stack_retries
                and not ctx.progress.cancelled
            )
            logger.error("%s%s", ctx.redactor(str(exc)), " (will retry)" if retry else "")
            if retry:  # a retry follows this attempt
                ctx.retries.setdefault(node, []).append(reason)
                delay = ctx.retry_delays[attempt - 1] if attempt <= len(ctx.retry_delays) else 0.0
                ctx.publish(
                    node,
                    NodeState.RETRYING,
                    detail=reason,
                    attempt=attempt,
                    next_attempt_at=time.time() + delay,
                )
            elif isinstance(exc, OperationCancelled):
                ctx.publish(node, NodeState.CANCELLED, detail="interrupted", attempt=attempt)
            else:
                ctx.publish(node, NodeState.FAILED, detail=reason, attempt=attempt)
            raise

    status = {
        Operation.UP: "updated" if result.changes.changed else "unchanged",
        Operation.PREVIEW: "previewed",
        Operation.REFRESH: "refreshed",
        Operation.DRIFT: "drift" if result.changes.changed else "no-drift",
        Operation.DESTROY: "destroyed",
    }[operation]
    typed = None
    if started is not None:
        fp = started.fingerprint.result()  # resolved before the update could end
    if operation is Operation.UP:
        ctx.drift.clear(spec)
        typed = parse_outputs(graph_node, result.outputs)
    elif operation is Operation.DESTROY:
        ctx.drift.clear(spec)
    elif operation is Operation.DRIFT and result.changes.changed:
        ctx.drift.mark(spec)  # the next up refreshes first, then puts the code's values back
    elif operation is Operation.REFRESH and result.changes.changed:
        # the state now holds the cloud's values while the stamp still matches: the next up
        # must run (it may not skip) to put the code's values back
        ctx.drift.mark(spec, REFRESHED)
    placeholder, projected = False, None
    if operation is Operation.PREVIEW:
        # Downstream previews read what this preview projects; the migrations' plan reads the
        # database deployed now (a stack not deployed yet hands on its projection).
        placeholder = not stored
        projected = project_outputs(graph_node, settings, stored, result.projected)
        typed = projected.outputs if placeholder else parse_outputs(graph_node, stored)
    note = (
        "upstream previews: " + "; ".join(f"{k}: {why}" for k, why in moves.items())
        if moves
        else seen.note
        if seen is not None and operation is Operation.PREVIEW
        else ""
    )
    outputs = dict(result.outputs) if operation is not Operation.PREVIEW else {}
    ctx.publish(node, NodeState.DONE, status=status, changes=result.changes, attempt=attempt)
    return StackOutcome(
        node,
        operation.value,
        status,
        result.changes,
        result.duration_s,
        outputs,
        typed,
        note,
        placeholder,
        projected,
        resources=result.resource_changes
        if operation in (Operation.PREVIEW, Operation.DRIFT)
        else (),
        retries=list(ctx.retries.get(node, [])),
        healed=ctx.healed.get(node, ""),
        fingerprint=fp,
        plan_file=plan if planning else None,
        violations=result.violations,
    )


def _hold(
    ctx: RunContext, spec: StackSpec, held: contextlib.ExitStack, say: Callable[[str], None]
) -> holders.StaleLockFence | None:
    """Record this run as a holder of the stack (its pulumi pids as they start) until the
    operation ends; the fence that decides, from the other holders' records, whether a lock
    another host left may be broken (see `stackflow.holders`)."""
    records = ctx.records
    if records is None:
        return None
    env, node = spec.environment, spec.node
    key = holders.take(records, env, node, holders.Holder.here(_flow_run_id()))
    held.callback(holders.release, records, key)
    ctx.engine.watch_locks(spec, lambda pid: holders.add_pulumi_pid(records, key, pid))
    held.callback(ctx.engine.watch_locks, spec, None)
    return holders.StaleLockFence(
        records,
        env,
        node,
        key,
        flow_run_state,
        ZOMBIE_WINDOW_S,
        say,
        cancelled=lambda: ctx.progress.cancelled,
    )


def _flow_run_id() -> str | None:
    from prefect.runtime import flow_run

    found = flow_run.id
    return str(found) if found else None
