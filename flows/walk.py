"""One walk over the stack graph inside a flow run: a task per node (stacks through the engine,
the migrate and verify steps), each given its upstream nodes' futures so independent nodes run at
the same time, and their outcomes collected in graph order."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import UpstreamTaskError
from prefect.futures import PrefectFuture
from prefect.tasks import exponential_backoff

from flows.summary import PipelineSummary
from programs.app import AppOutputs
from programs.database import DatabaseOutputs
from stackflow.engine import Operation, get_engine
from stackflow.errors import OperationCancelled, PlanChanged, StackError, StackflowError
from stackflow.fingerprint import FingerprintStore
from stackflow.graph import GRAPH, NodeKind, bare_spec, parse_outputs
from stackflow.migrations.errors import MigrationPlanChanged
from stackflow.migrations.target import MysqlTarget
from stackflow.plan import DeployPlan
from stackflow.progress import NodeState, RunStarted
from stackflow.redact import Redactor
from stackflow.secretbox import state_passphrase
from stackflow.settings import Settings
from tasks.stacks import Gate, RunContext, StackOutcome, stack_operation


def stored_outcome(ctx: RunContext, node: str) -> StackOutcome:
    """A stack outside the targets: its outputs are read from state, not redeployed."""
    outputs = ctx.engine.outputs(bare_spec(ctx.settings, node))
    for value in outputs.values():
        if value.secret and isinstance(value.value, str):
            ctx.redactor.add(value.value)
    typed = parse_outputs(ctx.graph[node], outputs)
    return StackOutcome(
        node,
        "read",
        "read",
        outputs=outputs,
        typed=typed,
        note="outputs read from state (not targeted)",
    )


@task(
    name="migrate",
    task_run_name="migrate-{environment}",
    cache_policy=NO_CACHE,
    persist_result=False,
)
def migrate_step(
    ctx: RunContext,
    environment: str,
    upstream: dict[str, StackOutcome],
    pinned: dict[int, str] | None = None,
) -> StackOutcome:
    """Bring the database schema to the latest version (a nested task with its own retries).

    `pinned`: the migration files an approval covered (version -> checksum); any other pending
    file stops the run (MigrationPlanChanged), and these files' destructive findings count as
    approved.
    """
    from tasks.migrate import migration_retry_policy, run_migrations

    ctx.check_not_cancelled("migrate")
    started = time.monotonic()
    db = upstream["database"].typed
    assert isinstance(db, DatabaseOutputs)
    if upstream["database"].placeholder:
        ctx.publish("migrate", NodeState.SKIPPED, status="skipped", detail="database not deployed")
        return StackOutcome(
            "migrate", "migrate", "skipped", note="database not deployed yet (preview)"
        )
    ctx.publish("migrate", NodeState.RUNNING)
    target = MysqlTarget.from_outputs(db)
    ctx.redactor.add(db.password.get_secret_value())
    settings = ctx.settings.migrations
    policy = migration_retry_policy(settings)
    # Protected comes from the environment's kind, the same answer the CLI's migrate gets.
    protected = ctx.settings.profile.protected
    try:
        report = run_migrations.with_options(**policy.task_options())(
            target, settings, environment, protected, pinned=pinned
        )
    except Exception as exc:
        ctx.publish("migrate", NodeState.FAILED, detail=ctx.redactor(str(exc)))
        raise
    applied = len(report.applied)
    note = f"{applied} applied, {report.already_applied} already applied"
    status = "migrated" if applied else "unchanged"
    ctx.publish("migrate", NodeState.DONE, status=status, detail=note)
    return StackOutcome(
        "migrate",
        "migrate",
        status,
        duration_s=time.monotonic() - started,
        note=note,
    )


@task(
    name="verify", task_run_name="verify-{environment}", cache_policy=NO_CACHE, persist_result=False
)
def verify_step(
    ctx: RunContext, environment: str, upstream: dict[str, StackOutcome]
) -> StackOutcome:
    """Poll the app's health URL until it answers healthy (retrying while it starts)."""
    from tasks.verify import check_url, verify_health

    ctx.check_not_cancelled("verify")
    app = upstream["app"].typed
    assert isinstance(app, AppOutputs)
    ctx.publish("verify", NodeState.RUNNING, detail=f"polling {app.url}")
    started = time.monotonic()
    try:
        check_url(app.url)
        status = verify_health(app.url, ctx.settings.app.health_check_path)
    except Exception as exc:
        ctx.publish("verify", NodeState.FAILED, detail=ctx.redactor(str(exc)))
        raise
    note = f"{app.url}{ctx.settings.app.health_check_path} answered {status}"
    ctx.publish("verify", NodeState.DONE, status="healthy", detail=note)
    return StackOutcome(
        "verify",
        "verify",
        "healthy",
        duration_s=time.monotonic() - started,
        note=note,
    )


def retry_delays(settings: Settings) -> list[float]:
    """Seconds before each retry of a stack operation: doubling from STACKFLOW_RETRY_DELAY_S,
    each drawn between half and one and a half times that (two runs retrying one lock drift
    apart), drawn once per run so a task can say when its next attempt starts."""
    base = exponential_backoff(backoff_factor=settings.retry_delay_s)(
        max(settings.stack_retries, 1)
    )
    return [round(d * random.uniform(0.5, 1.5), 2) for d in base]


def build_context(settings: Settings) -> RunContext:
    engine = get_engine(settings)
    passphrase = state_passphrase(settings)
    redactor = Redactor(settings.secret_values())
    if passphrase:
        redactor.add(passphrase)
    # Fingerprints are per cloud: a stack skipped as unchanged on one cloud says nothing of another.
    scope = settings.cloud
    return RunContext(
        settings,
        engine,
        GRAPH,
        redactor,
        FingerprintStore(settings.state_dir, passphrase, scope=scope),
        retry_delays=retry_delays(settings),
    )


@dataclass
class Walk:
    """What one walk over the graph did: an outcome per node, and why it stopped early."""

    outcomes: list[StackOutcome] = field(default_factory=list)
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
    retries = settings.stack_retries
    stack_task = stack_operation.with_options(retries=retries, retry_delay_seconds=ctx.retry_delays)
    futures: dict[str, PrefectFuture[StackOutcome]] = {}
    known: dict[str, StackOutcome] = {}
    forward = operation is not Operation.DESTROY
    for name in nodes if forward else nodes[::-1]:
        node = graph[name]
        gate = None
        if plan_dir is not None and node.kind is NodeKind.STACK:
            approved = plan.stack(name) if plan is not None else None
            suffix = "resolved" if plan is not None else "plan"
            gate = Gate(plan_dir / f"{name}.{suffix}.json", approved)
        if operation in (Operation.REFRESH, Operation.DRIFT):
            futures[name] = stack_task.submit(ctx, name, operation, upstream={})  # all at once
        elif forward:
            deps: dict[str, Any] = {}
            for up in node.upstream:
                if up in futures:
                    deps[up] = futures[up]
                elif graph[up].kind is NodeKind.STACK:
                    known.setdefault(up, stored_outcome(ctx, up))
                    deps[up] = known[up]
            if node.kind is NodeKind.STEP:
                if name == "migrate":
                    pinned = plan.pinned if plan is not None else None
                    futures[name] = migrate_step.submit(
                        ctx, settings.environment, deps, pinned=pinned
                    )
                else:
                    futures[name] = verify_step.submit(ctx, settings.environment, deps)
                continue
            futures[name] = stack_task.submit(
                ctx, name, operation, upstream=deps, force=force, gate=gate
            )
        else:
            after = [futures[d] for d in graph.downstream(name) if d in futures]
            futures[name] = stack_task.submit(
                ctx, name, operation, upstream={}, wait_for=after, return_state=False
            )

    walk = Walk()
    for name in nodes:
        future = futures[name]
        try:
            walk.outcomes.append(future.result())
            continue
        except (PlanChanged, MigrationPlanChanged) as exc:
            reason = ctx.redactor(str(exc))
            walk.invalidated = walk.invalidated or reason
            walk.outcomes.append(StackOutcome(name, operation.value, "stopped", note=reason))
            continue
        except OperationCancelled as exc:
            walk.interrupted = True
            started = not exc.reason.startswith("not started")
            note = (
                "interrupted: Pulumi cancelled the update after the operations in flight"
                if started
                else "the run was interrupted first"
            )
            status = "cancelled" if started else "not run"
            walk.outcomes.append(StackOutcome(name, operation.value, status, note=note))
            continue
        except StackError as exc:
            walk.failed = walk.failed or ctx.redactor(str(exc))
            walk.outcomes.append(
                StackOutcome(
                    name,
                    operation.value,
                    "failed",
                    note=ctx.redactor(exc.reason),
                    retries=list(ctx.retries.get(name, [])),
                    healed=ctx.healed.get(name, ""),
                )
            )
            continue
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
                walk.outcomes.append(StackOutcome(name, operation.value, "not run", note=why))
                continue
            reason = ctx.redactor(describe(exc))
            walk.failed = f"{name}: {reason}"
            walk.outcomes.append(StackOutcome(name, operation.value, "failed", note=reason))
    if ctx.progress.cancelled:
        walk.interrupted = True
    return walk


def describe(exc: BaseException) -> str:
    """An exception as one message; one of ours says what it is, anything else is named (a bug
    surfaces as `TypeError: ...`, never as an empty reason)."""
    text = str(exc)
    if isinstance(exc, StackflowError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def steps_of(operation: Operation, nodes: list[str]) -> list[str]:
    """The nodes an operation runs: migrations and verification belong to deploys only."""
    if operation is Operation.UP:
        return nodes
    return [n for n in nodes if GRAPH[n].kind is NodeKind.STACK]


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
