"""The Prefect task that runs one operation on one stack through the engine.

Idempotent by construction, which is what makes its retries safe: the stack is created or
selected, an unchanged stack is skipped by fingerprint, and an interrupted earlier operation is
recovered before anything else. Only transient errors are retried.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.logging import get_run_logger
from prefect.runtime import task_run
from prefect.tasks import Task, exponential_backoff
from pydantic import BaseModel

from stackflow import fingerprint
from stackflow.engine import Engine, Listener, Operation, OperationResult, OutputValue, is_transient
from stackflow.engine.base import ChangeCounts, ResourceChange, ResourceEvent
from stackflow.errors import StackError
from stackflow.fingerprint import FingerprintStore
from stackflow.graph import StackGraph, bare_spec, parse_outputs, placeholder_outputs
from stackflow.redact import Redactor
from stackflow.settings import Settings
from tasks.limits import stack_slot


@dataclass
class RunContext:
    """What every task of one pipeline run shares: settings, the engine, the redactor."""

    settings: Settings
    engine: Engine
    graph: StackGraph
    redactor: Redactor
    fingerprints: FingerprintStore
    engine_calls: list[str] = field(
        default_factory=list
    )  # "op:stack", for the summary and benchmarks
    # Per node, what the summary tells beyond the result: each retried attempt's reason, and what
    # an interrupted earlier operation left behind that this run cleared (a lock, pending ops).
    retries: dict[str, list[str]] = field(default_factory=dict)
    healed: dict[str, str] = field(default_factory=dict)


@dataclass
class StackOutcome:
    """What happened to one node in a run."""

    node: str
    operation: str
    status: (
        str  # updated, unchanged, previewed, refreshed, destroyed, drift, no-drift, skipped, read
    )
    changes: ChangeCounts = field(default_factory=ChangeCounts)
    duration_s: float = 0.0
    outputs: dict[str, OutputValue] = field(default_factory=dict)
    typed: BaseModel | None = None
    note: str = ""
    placeholder: bool = False  # outputs stand in for a stack that is not deployed yet
    resources: tuple[ResourceChange, ...] = ()  # per resource, what preview would change
    retries: list[str] = field(default_factory=list)  # the reason of each retried attempt
    healed: str = ""  # what this run cleared that an interrupted operation left behind

    def shown_outputs(self) -> dict[str, Any]:
        return {k: v.shown() for k, v in self.outputs.items()}


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
    def on_event(event: ResourceEvent) -> None:
        if event.status == "done" and event.change not in ("same", "refresh"):
            logger.debug("%s %s %s: %s", node, event.type, event.name, event.change)

    return Listener(on_output=logger.info, on_event=on_event, redactor=ctx.redactor)


def _record(ctx: RunContext, operation: Operation, node: str) -> None:
    ctx.engine_calls.append(f"{operation.value}:{node}")


@task(
    name="stack",
    task_run_name="{operation}-{node}",
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_jitter_factor=0.5,
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
) -> StackOutcome:
    """Preview, update, refresh, check drift of or destroy one stack.

    Args:
        upstream: typed outputs of the stacks this one reads, by node name.
        force: run `up` even when the fingerprint says nothing changed.
    Raises:
        TransientStackError: retried by Prefect (lock held, throttling, network).
        PermanentStackError: fails the run at once, naming the stack.
    """
    logger = get_run_logger()
    settings, engine = ctx.settings, ctx.engine
    graph_node = ctx.graph[node]
    if operation in (Operation.UP, Operation.PREVIEW):
        typed_upstream = {k: v.typed for k, v in upstream.items() if v.typed is not None}
        spec, args = ctx.graph.spec(node, settings, typed_upstream)
    else:  # refresh, drift and destroy do not run the program: no upstream needed
        spec = bare_spec(settings, node)
    listener = _listener(ctx, node, logger)
    placeholders = [k for k, v in upstream.items() if v.placeholder]

    fp = ""
    drifted = operation is Operation.UP and ctx.fingerprints.drifted(spec)
    if operation is Operation.UP:
        fp = fingerprint.compute(spec, args, graph_node.sources, engine.name, engine.versions())
        cached = None if force or drifted else ctx.fingerprints.load(spec, fp)
        if cached is not None:
            logger.info(
                "%s unchanged since its last successful up: skipped, no engine call", spec.label
            )
            return StackOutcome(
                node,
                operation.value,
                "unchanged",
                outputs=cached,
                typed=parse_outputs(graph_node, cached),
            )

    with stack_slot(settings.state_dir, settings.environment, node, logger.info):
        if operation is not Operation.PREVIEW and engine.recover(spec, listener):
            logger.warning("%s: recovered what an interrupted operation left behind", spec.label)
            ctx.healed[node] = (
                "cleared what an interrupted operation left (lock, pending operations)"
            )
        try:
            if drifted:
                # Drift found earlier: adopt what the cloud holds, so the update puts it back.
                logger.info("%s drifted since its last up: refreshing it first", spec.label)
                _record(ctx, Operation.REFRESH, node)
                engine.run(Operation.REFRESH, spec, listener)
            _record(ctx, operation, node)
            result: OperationResult = engine.run(operation, spec, listener)
        except StackError as exc:
            logger.error(
                "%s%s", ctx.redactor(str(exc)), " (will retry)" if is_transient(exc) else ""
            )
            if is_transient(exc) and task_run.run_count <= settings.stack_retries:
                # a retry follows this attempt (Prefect counts attempts from 1)
                ctx.retries.setdefault(node, []).append(ctx.redactor(exc.reason))
            raise

    status = {
        Operation.UP: "updated" if result.changes.changed else "unchanged",
        Operation.PREVIEW: "previewed",
        Operation.REFRESH: "refreshed",
        Operation.DRIFT: "drift" if result.changes.changed else "no-drift",
        Operation.DESTROY: "destroyed",
    }[operation]
    typed = None
    if operation is Operation.UP:
        ctx.fingerprints.save(spec, fp, result.outputs)
        ctx.fingerprints.clear_drift(spec)
        typed = parse_outputs(graph_node, result.outputs)
    elif operation is Operation.DESTROY:
        ctx.fingerprints.forget(spec)
        ctx.fingerprints.clear_drift(spec)
    elif operation is Operation.DRIFT and result.changes.changed:
        ctx.fingerprints.mark_drifted(spec)
    elif operation is Operation.REFRESH and result.changes.changed:
        ctx.fingerprints.forget(
            spec
        )  # state now holds the cloud's values: the next up corrects them
    placeholder = False
    if operation is Operation.PREVIEW:
        # Downstream previews read what is deployed; a stack not deployed yet hands on placeholders.
        stored = engine.outputs(spec)
        placeholder = not stored
        typed = (
            placeholder_outputs(graph_node, settings)
            if placeholder
            else parse_outputs(graph_node, stored)
        )
    note = (
        f"previewed against placeholder outputs of {', '.join(placeholders)}"
        if placeholders
        else ""
    )
    outputs = dict(result.outputs) if operation is not Operation.PREVIEW else {}
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
        resources=result.resource_changes if operation is Operation.PREVIEW else (),
        retries=list(ctx.retries.get(node, [])),
        healed=ctx.healed.get(node, ""),
    )
