"""One walk over the stack graph inside a flow run: a task per node (stacks through the engine,
the migrate and verify steps), each given its upstream nodes' futures so independent nodes run at
the same time, and their outcomes collected in graph order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect.exceptions import UpstreamTaskError
from prefect.futures import PrefectFuture
from prefect.utilities.annotations import quote

from flows.summary import PipelineSummary
from stackflow.dag import NodeKind, StackGraph
from stackflow.drift import DriftMarks
from stackflow.engine import Operation, get_engine
from stackflow.environment_records import records_of
from stackflow.errors import (
    OperationCancelled,
    PlanChanged,
    PolicyViolated,
    StackError,
    StackflowError,
)
from stackflow.graphs import graph_of
from stackflow.infrastructure import named
from stackflow.migrator.errors import MigrationPlanChanged
from stackflow.outcome import NodeOutcome, Status
from stackflow.plan import DeployPlan
from stackflow.progress import NodeState, RunStarted
from stackflow.records import Records
from stackflow.redact import Redactor
from stackflow.retry import stack_policy
from stackflow.secretbox import state_passphrase
from stackflow.settings import Settings
from tasks.approved import Gate
from tasks.context import RunContext
from tasks.early import UpstreamStopped


def retry_delays(settings: Settings) -> list[float]:
    """Seconds before each retry of a stack operation, drawn once per run (see RetryPolicy)."""
    return stack_policy(settings.stack_retries, settings.retry_delay_s).draw()


def build_context(
    settings: Settings,
    graph: StackGraph | None = None,
    records: Records | None = None,
    adopts: bool = True,
) -> RunContext:
    """What every task of one run shares: settings, the engine (`adopts`: see `get_engine`), the
    graph, the redactor, the records beside the backend."""
    engine = get_engine(settings, adopts)
    passphrase = state_passphrase(settings)
    redactor = Redactor(settings.secret_values())
    if passphrase:
        redactor.add(passphrase)
    records = records if records is not None else records_of(settings)
    return RunContext(
        settings,
        engine,
        graph or graph_of(settings),
        redactor,
        DriftMarks(records, settings.cloud),
        records=records,
        passphrase=passphrase,
        retry_delays=retry_delays(settings),
    )


@dataclass
class Walk:
    """What one walk over the graph did: an outcome per node, and why it stopped early."""

    outcomes: list[NodeOutcome] = field(default_factory=list)
    failed: str | None = None  # the first failure, naming its node
    invalidated: str = ""  # an approved plan no longer matched (ask again)
    interrupted: bool = False


def walk_graph(
    ctx: RunContext,
    nodes: list[str],
    operation: Operation,
    force: bool = False,
    plan: DeployPlan | None = None,
    plan_dir: Path | None = None,
) -> Walk:
    """Submit one task per node in `nodes`, each with its upstream futures (independent nodes run
    at once), and collect their outcomes in graph order.

    A gated up: `plan` is what was approved (apply under it); a gated plan: `plan_dir` receives
    each stack preview's update plan.
    """
    graph, settings = ctx.graph, ctx.settings
    policy = stack_policy(settings.stack_retries, settings.retry_delay_s)
    if operation is Operation.UP and plan is None and plan_dir is None:
        # what a stack that runs may create ahead of time downstream of it (tasks.stacks)
        ctx.ahead = {n for n in nodes if graph[n].kind is NodeKind.STACK and graph[n].upstream}
    futures: dict[str, PrefectFuture[NodeOutcome]] = {}
    known: dict[str, NodeOutcome] = {}
    forward = operation is not Operation.DESTROY
    for name in nodes if forward else nodes[::-1]:
        node = graph[name]
        if node.kind is NodeKind.STACK:
            task = node.task.with_options(**policy.task_options(ctx.retry_delays))
        else:
            task = node.task
        gate = None
        if plan_dir is not None and node.kind is NodeKind.STACK:
            approved = plan.stack(name) if plan is not None else None
            suffix = "resolved" if plan is not None else "plan"
            gate = Gate(plan_dir / f"{name}.{suffix}.json", approved)
        if operation in (Operation.REFRESH, Operation.DRIFT):
            futures[name] = task.submit(ctx, name, operation, upstream={})  # all at once
        elif forward:
            deps: dict[str, Any] = {}
            for up in node.upstream:
                if up in futures:
                    deps[up] = futures[up]
                elif graph[up].kind is NodeKind.STACK:
                    known.setdefault(up, ctx.stored_outcome(up, operation))
                    deps[up] = known[up]
            if node.kind is NodeKind.STEP:
                futures[name] = task.submit(ctx, name, deps, plan=plan)
                continue
            early: dict[str, Any] = {}
            if operation is Operation.UP and gate is None:
                # handed on unresolved: the task may start before they end (tasks.early)
                early = {
                    u: deps.pop(u) for u in node.early if isinstance(deps.get(u), PrefectFuture)
                }
            futures[name] = task.submit(
                ctx,
                name,
                operation,
                upstream=deps,
                force=force,
                gate=gate,
                **({"early": quote(early)} if early else {}),
            )
        else:
            after = [futures[d] for d in graph.downstream(name) if d in futures]
            futures[name] = task.submit(
                ctx, name, operation, upstream={}, wait_for=after, return_state=False
            )

    walk = Walk()
    for name in nodes:
        walk.outcomes.append(_collect(ctx, walk, name, operation, futures[name]))
    if ctx.progress.cancelled:
        walk.interrupted = True
    return walk


def _collect(
    ctx: RunContext, walk: Walk, name: str, operation: Operation, future: PrefectFuture[NodeOutcome]
) -> NodeOutcome:
    """A node's outcome: its task's, or how it ended without one (what `walk` records why)."""
    try:
        return future.result()
    except (PlanChanged, MigrationPlanChanged) as exc:
        reason = ctx.redactor(str(exc))
        walk.invalidated = walk.invalidated or reason
        return ctx.ended(name, operation, Status.STOPPED, reason)
    except UpstreamStopped as exc:
        # started beside an upstream node that did not complete (tasks.early)
        return ctx.ended(name, operation, Status.STOPPED, ctx.redactor(exc.reason))
    except OperationCancelled as exc:
        walk.interrupted = True
        if exc.reason.startswith("not started"):
            return ctx.ended(name, operation, Status.NOT_RUN, "the run was interrupted first")
        note = (
            ctx.redactor(exc.reason.split("; ", 1)[0])  # a stall: what bound it hit
            if exc.reason.startswith("stopped: ")
            else "interrupted: Pulumi cancelled the update after the operations in flight"
        )
        return ctx.ended(name, operation, Status.CANCELLED, note)
    except StackError as exc:
        walk.failed = walk.failed or ctx.redactor(str(exc))
        found = exc.violations if isinstance(exc, PolicyViolated) else ()
        return ctx.ended(name, operation, Status.FAILED, ctx.redactor(exc.reason), found)
    except Exception as exc:
        upstream_failed = isinstance(exc, UpstreamTaskError) or (
            future.state.is_pending() and future.state.name == "NotReady"
        )
        if upstream_failed or walk.failed or walk.invalidated or walk.interrupted:
            why = (
                "the run was interrupted first"
                if walk.interrupted or ctx.progress.cancelled
                else "an upstream node did not complete"
            )
            ctx.publish(name, NodeState.NOT_RUN, detail=why)
            return ctx.ended(name, operation, Status.NOT_RUN, why)
        reason = ctx.redactor(describe(exc))
        walk.failed = f"{name}: {reason}"
        return ctx.ended(name, operation, Status.FAILED, reason)


def describe(exc: BaseException) -> str:
    """An exception as one message; one of ours says what it is, anything else is named (a bug
    surfaces as `TypeError: ...`, never as an empty reason)."""
    text = str(exc)
    if isinstance(exc, StackflowError) and text:
        return text
    fault = named(exc)  # a full disk, a read-only file system: named, with what to do
    if fault is not None:
        return f"{fault}; what to do: {fault.what_to_do}"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def steps_of(graph: StackGraph, operation: Operation, nodes: list[str]) -> list[str]:
    """The nodes an operation runs: steps belong to deploys only."""
    if operation is Operation.UP:
        return nodes
    return [n for n in nodes if graph[n].kind is NodeKind.STACK]


def announce_phase(ctx: RunContext, summary: PipelineSummary, phase: str, nodes: list[str]) -> None:
    """Tell the live view a phase begins (a gated up has two: plan, then up)."""
    from prefect.runtime import flow_run

    ctx.progress.publish(
        RunStarted(
            summary.environment,
            phase,
            tuple(nodes),
            summary.target,
            summary.ui_url,
            str(flow_run.id) if flow_run.id else None,
        )
    )
