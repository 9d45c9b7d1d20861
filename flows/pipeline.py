"""The pipeline flows: deploy, preview, refresh, destroy and drift over the stack graph.

Each flow validates its parameters into a `PipelineRequest`, walks `GRAPH` submitting one task per
node with its upstream nodes' futures as inputs (so independent nodes run at the same time), and
ends with a summary: a Prefect markdown artifact, Prefect events, and the returned dict the CLI
prints. Settings come from the environment of whoever runs the flow; parameters carry no secrets.
"""

from __future__ import annotations

import random
import shutil
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from prefect import Flow, flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event
from prefect.exceptions import UpstreamTaskError
from prefect.futures import PrefectFuture
from prefect.logging import get_run_logger
from prefect.tasks import exponential_backoff
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr

from flows.approval import Decision, await_decision, end_state
from programs.app import AppOutputs
from programs.database import DatabaseOutputs
from stackflow.engine import Operation, get_engine
from stackflow.environments import check_cloud, forget, record_deploy
from stackflow.errors import (
    DatabaseUnreachable,
    MigrationError,
    MissingOutputError,
    OperationCancelled,
    PlanChanged,
    SettingsError,
    StackError,
    StackflowError,
    TransientDatabaseError,
)
from stackflow.fingerprint import FingerprintStore
from stackflow.graph import GRAPH, NodeKind, bare_spec, parse_outputs
from stackflow.migrations import MigrationPlanChanged, offline_plan, pending_plan
from stackflow.plan import DeployPlan, StackPlan, migration_lines, migrations_dict
from stackflow.progress import NodeState, RunStarted
from stackflow.redact import Redactor
from stackflow.secretbox import state_passphrase
from stackflow.settings import MysqlTarget, Settings, get_settings, validate_environment_name
from tasks.stacks import Gate, RunContext, StackOutcome, stack_operation

# The UI renders an enum as a pick list; its members come from the graph, declared once.
StackName = Enum("StackName", {name: name for name in GRAPH.order()}, type=str)  # type: ignore[misc]

EnvironmentName = Annotated[
    str,
    AfterValidator(validate_environment_name),
    Field(
        description="Environment: lowercase, DNS-safe, <= 20 characters (dev, staging, prod, pr-123)."
    ),
]
Stacks = Annotated[
    list[StackName] | None,
    Field(
        description="Run only these stacks; what they need from upstream is read from state. Empty: all."
    ),
]


class PipelineError(StackflowError):
    """A run that ended badly; `summary` is its summary (secrets masked), to show what did happen."""

    def __init__(self, message: str, summary: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.summary = summary

    def __reduce__(self) -> tuple[Any, ...]:  # Prefect may pickle the exception with the state
        return (type(self), (str(self), self.summary))


class DriftDetected(PipelineError):
    """A drift check found stacks whose cloud resources differ from their state."""


class PipelineFailed(PipelineError):
    """A node of the pipeline failed; the message names it and why."""


class RunStopped(PipelineError):
    """A run that ended on purpose with nothing (more) applied; the flow run ends Cancelled under
    `state_name`."""

    state_name = "Cancelled"


class RunInterrupted(RunStopped):
    """The run was interrupted (Ctrl-C at the command line that runs it)."""


class ApprovalRejected(RunStopped):
    """The plan was rejected: nothing was applied."""

    state_name = "Rejected"


class ApprovalExpired(RunStopped):
    """Nobody approved or rejected the plan in time: nothing was applied."""

    state_name = "ApprovalExpired"


MAX_APPROVAL_ROUNDS = 5  # a plan that keeps changing while people approve it needs a person to look


class PipelineRequest(BaseModel):
    """A validated request to run one operation over an environment."""

    model_config = ConfigDict(frozen=True)

    environment: EnvironmentName = "dev"
    operation: Operation = Operation.UP
    stacks: list[str] = Field(default_factory=list, description="Targeted stacks; empty means all.")
    force: bool = Field(
        False, description="Run `up` even on stacks whose fingerprint is unchanged."
    )
    confirm: bool = Field(False, description="Confirm destroying a protected (prod) environment.")


@dataclass
class PipelineSummary:
    """What a run did, per node, with every secret masked."""

    environment: str
    operation: str
    engine: str
    outcomes: list[StackOutcome] = field(default_factory=list)
    failed: str | None = None
    engine_calls: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    target: str = ""  # "local cloud" or "AWS": every report names it
    ui_url: str | None = None  # the flow run's page in the Prefect UI
    approvals: list[Decision] = field(default_factory=list)  # a gated up's decisions, in order
    migrations: dict[str, Any] | None = None  # a preview's pending migrations (migrations_dict)
    stopped: str = ""  # why a run stopped on purpose (rejected, expired, interrupted)

    def as_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "operation": self.operation,
            "engine": self.engine,
            "target": self.target,
            "failed": self.failed,
            "engine_calls": list(self.engine_calls),
            "duration_s": round(self.duration_s, 3),
            "stacks": [
                {
                    "stack": o.node,
                    "operation": o.operation,
                    "status": o.status,
                    "changes": o.changes.as_dict(),
                    "duration_s": round(o.duration_s, 3),
                    "outputs": o.shown_outputs(),
                    "note": o.note,
                    "retries": list(o.retries),
                    "healed": o.healed,
                    "resources": [r.as_dict() for r in o.resources],
                }
                for o in self.outcomes
            ],
            "ui_url": self.ui_url,
            "approvals": [d.as_dict() for d in self.approvals],
            "migrations": self.migrations,
            "stopped": self.stopped,
        }

    def markdown(self) -> str:
        where = (
            " — **local cloud** (moto's AWS APIs on loopback: nothing was deployed to AWS)"
            if self.target == "local cloud"
            else ""
        )
        head = f"# {self.operation} `{self.environment}`{where}\n\n"
        if self.failed:
            head += f"**Failed:** {_cell(self.failed)}\n\n"
        if self.stopped:
            head += f"**Stopped:** {_cell(self.stopped)}\n\n"
        rows = [
            "| stack | operation | status | create | update | replace | delete | same | seconds | note |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for o in self.outcomes:
            c = o.changes
            rows.append(
                f"| {o.node} | {o.operation} | {o.status} | {c.create} | {c.update} | {c.replace} | "
                f"{c.delete} | {c.same} | {o.duration_s:.2f} | {o.note} |"
            )
        outs = []
        for o in self.outcomes:
            shown = o.shown_outputs()
            if shown:
                outs.append(f"\n**{o.node}**\n")
                outs.extend(f"- `{k}`: `{v}`" for k, v in shown.items())
        return (
            head
            + "\n".join(rows)
            + "\n\n## Graph\n\n"
            + self.graph_markdown()
            + self.story_markdown()
            + self.approvals_markdown()
            + self.changes_markdown()
            + self.migrations_markdown()
            + ("\n\n## Outputs\n" + "\n".join(outs) if outs else "")
            + "\n"
        )

    def graph_markdown(self) -> str:
        """The graph with each node's status, as a table: the Prefect UI's markdown renders
        tables, not Mermaid. Nodes are listed by stage (a node's stage follows its upstream's)."""
        status = {o.node: o.status for o in self.outcomes}
        stage: dict[str, int] = {}
        rows = ["| stage | node | status | needs |", "|---|---|---|---|"]
        for name in GRAPH.order():
            node = GRAPH[name]
            stage[name] = 1 + max((stage[u] for u in node.upstream), default=0)
            shown = status.get(name, "not in this run")
            shown = f"**{shown}**" if shown in _ATTENTION else shown
            needs = ", ".join(node.upstream) or "—"
            rows.append(f"| {stage[name]} | **{name}** | {shown} | {needs} |")
        return "\n".join(rows)

    def story_markdown(self) -> str:
        """Retries and recoveries: what the counts alone do not tell."""
        lines = []
        for o in self.outcomes:
            for i, reason in enumerate(o.retries, 1):
                lines.append(f"- **{o.node}**: attempt {i} failed and was retried: {_cell(reason)}")
            if o.healed:
                lines.append(f"- **{o.node}**: {o.healed}")
        return "\n\n## Retries and recoveries\n\n" + "\n".join(lines) if lines else ""

    def migrations_markdown(self) -> str:
        """A preview's pending migrations: files, findings, statements."""
        if self.migrations is None:
            return ""
        lines = migration_lines(self.migrations)
        return "\n\n## Migrations\n\n" + "\n".join(f"    {line}" for line in lines)

    def approvals_markdown(self) -> str:
        """Each approval decision: what, by whom where known, through what, when, why."""
        if not self.approvals:
            return ""
        lines = [f"- {_cell(d.line())}" for d in self.approvals]
        return "\n\n## Approval\n\n" + "\n".join(lines)

    def changes_markdown(self) -> str:
        """Per resource, what a preview would change and which properties (values masked)."""
        rows = []
        for o in self.outcomes:
            for r in o.resources:
                props = ", ".join(
                    f"`{p.name}`" + (" (forces replacement)" if p.forces_replacement else "")
                    for p in r.properties
                )
                rows.append(f"| {o.node} | {r.change} | `{r.type}` | {r.name} | {props or '—'} |")
        if not rows:
            return ""
        head = "| stack | change | type | resource | properties |\n|---|---|---|---|---|\n"
        return "\n\n## Changes\n\n" + head + "\n".join(rows)


# Statuses that need a reader's attention stand out; no emoji (fonts without them draw boxes)
_ATTENTION = frozenset({"failed", "drift", "not run", "cancelled", "stopped"})


def _cell(text: str) -> str:
    """Text that stays inside one markdown table cell or list item."""
    return " ".join(text.split()).replace("|", "\\|")


def _stored_outcome(ctx: RunContext, node: str) -> StackOutcome:
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
    from tasks.migrate import run_migrations

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
    target = MysqlTarget(db.host, db.port, db.user, db.password, db.database)
    ctx.redactor.add(db.password.get_secret_value())
    try:
        report = run_migrations.with_options(retries=ctx.settings.migrations.retries)(
            target, ctx.settings.migrations, environment, pinned=pinned
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


def _walk(
    ctx: RunContext,
    request: PipelineRequest,
    nodes: list[str],
    operation: Operation,
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
    stack_task = stack_operation.with_options(
        retries=retries,
        retry_delay_seconds=ctx.retry_delays if settings.retry_delay_s > 0 else 0,
    )
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
                    known.setdefault(up, _stored_outcome(ctx, up))
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
                ctx, name, operation, upstream=deps, force=request.force, gate=gate
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
            reason = ctx.redactor(_describe(exc))
            walk.failed = f"{name}: {reason}"
            walk.outcomes.append(StackOutcome(name, operation.value, "failed", note=reason))
    if ctx.progress.cancelled:
        walk.interrupted = True
    return walk


def _describe(exc: BaseException) -> str:
    """An exception as one message; one of ours says what it is, anything else is named (a bug
    surfaces as `TypeError: ...`, never as an empty reason)."""
    text = str(exc)
    if isinstance(exc, StackflowError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _steps_of(operation: Operation, nodes: list[str]) -> list[str]:
    """The nodes an operation runs: migrations and verification belong to deploys only."""
    if operation is Operation.UP:
        return nodes
    return [n for n in nodes if GRAPH[n].kind is NodeKind.STACK]


def run_pipeline(request: PipelineRequest, settings: Settings | None = None) -> PipelineSummary:
    """Run one operation over the graph inside the current flow run.

    In a protected environment (STACKFLOW_APPROVAL_REQUIRED, default prod) an `up` first builds
    the combined plan and waits for its approval (see `_gated_up`).

    Raises:
        ConfirmationRequired: destroy of a protected environment without `confirm`.
        PipelineFailed: a node failed; names it and the reason.
        DriftDetected: a drift check found differences.
        ApprovalRejected, ApprovalExpired: the plan was rejected, or not decided in time.
        RunInterrupted: the run was interrupted (Ctrl-C at the command line running it).
    """
    settings = settings or get_settings(environment=request.environment)
    op = request.operation
    if op is Operation.DESTROY:
        settings.confirm_destroy(request.confirm)
    check_cloud(settings)
    ctx = build_context(settings)
    selected = ctx.graph.select(request.stacks)
    if op is Operation.DESTROY and "database" in selected:
        settings.confirm_database_deletable()
    nodes = _steps_of(op, selected)
    summary = PipelineSummary(
        settings.environment,
        op.value,
        ctx.engine.name,
        target=settings.target_label,
        ui_url=_flow_run_url(),
    )
    started = time.monotonic()
    with ctx.progress.cancellable(ctx.cancel):
        if op is Operation.UP and settings.approval_required:
            walk = _gated_up(ctx, request, nodes, summary)
        else:
            _started(ctx, summary, op.value, nodes)
            walk = _walk(ctx, request, nodes, op)
            if op is Operation.PREVIEW and "migrate" in selected and not walk.failed:
                summary.migrations = _previewed_migrations(ctx, walk)
    summary.outcomes = walk.outcomes
    summary.failed = walk.failed or (walk.invalidated or None)
    summary.engine_calls = list(ctx.engine_calls)
    summary.duration_s = time.monotonic() - started
    if walk.interrupted and not summary.failed:
        summary.stopped = "interrupted: running operations were cancelled; nothing new started"
    _publish(summary, settings)
    if summary.stopped:
        raise RunInterrupted(summary.stopped, summary.as_dict())
    if summary.failed:
        raise PipelineFailed(summary.failed, summary.as_dict())
    if op is Operation.UP:
        # a targeted first deploy creates resources too: without a record, an ephemeral
        # environment deployed stack by stack would never be cleaned up
        record_deploy(settings)
    if op is Operation.DESTROY and not request.stacks:
        forget(settings.state_dir, settings.environment)  # gone: it may be deployed anywhere next
    drifted = [o.node for o in summary.outcomes if o.status == "drift"]
    if drifted:
        raise DriftDetected(
            f"drift detected in {settings.environment}: {', '.join(drifted)}", summary.as_dict()
        )
    return summary


def _started(ctx: RunContext, summary: PipelineSummary, phase: str, nodes: list[str]) -> None:
    """Tell the live view a phase begins (a gated up has two: plan, then up)."""
    ctx.progress.publish(
        RunStarted(summary.environment, phase, tuple(nodes), summary.target, summary.ui_url)
    )


# --- the approval gate -------------------------------------------------------------------------


def _gated_up(
    ctx: RunContext, request: PipelineRequest, nodes: list[str], summary: PipelineSummary
) -> Walk:
    """`up` of a protected environment: plan, wait for approval, apply exactly what was approved.

    The plan is every targeted stack's preview (saving Pulumi's update plan) and the pending
    migrations with their findings. Nothing to change: no approval, the up runs (and skips). On
    approval the migrations are checked again (a file added or edited meanwhile asks again), then
    each stack is updated under its plan and the migrations run pinned to the approved checksums;
    a stack or file that changed meanwhile stops the run there, and what remains is planned and
    approved again. Rejected or not decided in time: nothing is applied.

    Raises:
        ApprovalRejected, ApprovalExpired: with the summary (nothing applied in that round).
        PipelineFailed: the plan could not be built, or approvals kept being invalidated.
    """
    logger = get_run_logger()
    settings = ctx.settings
    started = time.monotonic()
    root = settings.state_dir / "plans" / settings.environment / uuid.uuid4().hex[:12]
    earlier: list[StackOutcome] = []
    why_again = ""
    try:
        for round_ in range(1, MAX_APPROVAL_ROUNDS + 1):
            plan_dir = root / f"round-{round_}"
            plan_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
            _started(ctx, summary, "plan", [n for n in nodes if GRAPH[n].kind is NodeKind.STACK])
            built = _build_plan(ctx, request, nodes, plan_dir, round_, why_again)
            if isinstance(built, Walk):
                built.outcomes = _merged(earlier, built.outcomes)
                return built  # the plan could not be built: its failure says why
            if built.empty:
                logger.info("%s: nothing to change, no approval needed", settings.environment)
                _started(ctx, summary, "up", nodes)
                walk = _walk(ctx, request, nodes, Operation.UP)
                walk.outcomes = _merged(earlier, walk.outcomes)
                return walk
            create_markdown_artifact(
                markdown=built.markdown(),
                key=f"plan-{settings.environment}",
                description=f"stackflow plan of {settings.environment} awaiting approval"
                + (f" ({settings.target_label})" if settings.target_label != "AWS" else ""),
            )
            decision = await_decision(
                built, settings.approval.timeout_s, ctx.progress, summary.ui_url
            )
            summary.approvals.append(decision)
            if not decision.approved:
                summary.outcomes = _merged(earlier, [_unapplied(n, decision) for n in nodes])
                summary.stopped = decision.line()
                summary.engine_calls = list(ctx.engine_calls)
                summary.duration_s = time.monotonic() - started
                _publish(summary, settings)
                error = ApprovalExpired if decision.expired else ApprovalRejected
                raise error(
                    f"the plan for {settings.environment} was {_verb(decision)}: nothing was "
                    f"applied ({decision.line()})",
                    summary.as_dict(),
                )
            moved = _moved_since(ctx, built)
            if moved:
                why_again = moved
                logger.warning("%s: %s; planning again", settings.environment, moved)
                continue
            _started(ctx, summary, "up", nodes)
            walk = _walk(ctx, request, nodes, Operation.UP, built, plan_dir)
            walk.outcomes = _merged(earlier, walk.outcomes)
            if not walk.invalidated or walk.failed or walk.interrupted:
                return walk
            why_again = f"changed while it was applied: {walk.invalidated}"
            logger.warning("%s: %s; planning again", settings.environment, why_again)
            earlier = walk.outcomes
        return Walk(
            earlier,
            failed=f"the plan of {settings.environment} changed {MAX_APPROVAL_ROUNDS} times while "
            f"it was approved and applied (last: {why_again}): look at what keeps changing it",
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)  # plans hold ciphertexts and addresses


def _build_plan(
    ctx: RunContext,
    request: PipelineRequest,
    nodes: list[str],
    plan_dir: Path,
    round_: int,
    why_again: str,
) -> DeployPlan | Walk:
    """Preview every targeted stack (saving its update plan) and plan the migrations; a Walk
    when a preview failed (the plan cannot be shown, so nothing can be approved)."""
    stacks = [n for n in nodes if ctx.graph[n].kind is NodeKind.STACK]
    walk = _walk(ctx, request, stacks, Operation.PREVIEW, plan_dir=plan_dir)
    if walk.failed or walk.interrupted:
        return walk
    by_node = {o.node: o for o in walk.outcomes}
    plans = tuple(
        StackPlan(
            o.node,
            "unchanged"
            if o.status == "unchanged"
            else "changes"
            if o.changes.changed
            else "no changes",
            o.changes,
            o.resources,
            o.plan_file,
            o.fingerprint,
            o.note or ("unchanged since its last successful up" if o.status == "unchanged" else ""),
        )
        for o in walk.outcomes
    )
    migrations, note = None, ""
    if "migrate" in nodes:
        try:
            migrations, note = _migration_plan(ctx, by_node.get("database"))
        except (MigrationError, TransientDatabaseError) as exc:
            return Walk(walk.outcomes, failed=f"migrate: {ctx.redactor(_describe(exc))} (planning)")
    return DeployPlan(
        ctx.settings.environment,
        ctx.settings.target_label,
        plans,
        migrations,
        note,
        round_,
        why_again,
    )


def _migration_plan(ctx: RunContext, database: StackOutcome | None) -> tuple[Any, str]:
    """The pending migrations as the approval shows them: read from the environment's database
    (read-only, nothing created), or every file when the database is not deployed yet."""
    settings = ctx.settings
    protected = True  # an approval shows findings whether or not they would block
    if database is None:  # not targeted: its outputs come from state
        try:
            database = _stored_outcome(ctx, "database")
        except MissingOutputError:  # not deployed yet
            database = StackOutcome("database", "read", "read", placeholder=True)
    db = database.typed
    if database.placeholder or not isinstance(db, DatabaseOutputs):
        report = offline_plan(settings.migrations, protected, settings.database.username)
        return report, ""
    ctx.redactor.add(db.password.get_secret_value())
    target = MysqlTarget(db.host, db.port, db.user, db.password, db.database)
    try:
        return pending_plan(target, settings.migrations, protected), ""
    except DatabaseUnreachable as exc:
        raise MigrationError(f"the database cannot be read to plan its migrations: {exc}") from exc


def _previewed_migrations(ctx: RunContext, walk: Walk) -> dict[str, Any]:
    """What `migrate` would apply after this preview (read-only), or why it cannot be told."""
    database = next((o for o in walk.outcomes if o.node == "database"), None)
    try:
        report, _ = _migration_plan(ctx, database)
    except (MigrationError, TransientDatabaseError) as exc:
        return migrations_dict(None, f"not read: {ctx.redactor(_describe(exc))}") or {}
    return migrations_dict(report) or {}


def _moved_since(ctx: RunContext, plan: DeployPlan) -> str:
    """What changed in the migrations since `plan` was shown ("" if nothing): a file added,
    edited or applied by someone else while the approval waited."""
    if plan.migrations is None:
        return ""
    try:
        now, _ = _migration_plan(ctx, None)
    except (MigrationError, TransientDatabaseError) as exc:
        return f"the migrations could not be checked again ({ctx.redactor(_describe(exc))})"
    if now.pinned == plan.pinned:
        return ""
    added = sorted(set(now.pinned) - set(plan.pinned))
    gone = sorted(set(plan.pinned) - set(now.pinned))
    edited = sorted(
        v for v in set(now.pinned) & set(plan.pinned) if now.pinned[v] != plan.pinned[v]
    )
    parts = [
        f"{what}: {', '.join(f'V{v}' for v in versions)}"
        for what, versions in (("added", added), ("no longer pending", gone), ("edited", edited))
        if versions
    ]
    return "the pending migrations changed while the approval waited (" + "; ".join(parts) + ")"


def _merged(earlier: list[StackOutcome], later: list[StackOutcome]) -> list[StackOutcome]:
    """A node's outcome across approval rounds: the later one, unless it found nothing to do
    where an earlier round had done something."""
    before = {o.node: o for o in earlier}
    merged = []
    for o in later:
        prior = before.get(o.node)
        quiet = o.status in ("unchanged", "skipped", "not run")
        merged.append(
            prior if prior is not None and quiet and prior.status not in ("stopped",) else o
        )
    return merged


def _unapplied(node: str, decision: Decision) -> StackOutcome:
    return StackOutcome(node, "up", "not run", note=f"plan {_verb(decision)}: nothing applied")


def _verb(decision: Decision) -> str:
    return (
        "approved"
        if decision.approved
        else "not decided in time"
        if decision.expired
        else "rejected"
    )


def _flow_run_url() -> str | None:
    """This flow run's page in the Prefect UI (None outside a flow run or without a UI)."""
    from prefect.runtime import flow_run
    from prefect.utilities.urls import url_for

    # prefect.runtime's ui_url points at /flow-runs/..., a page this UI version does not have
    run_id = flow_run.id
    return url_for("flow-run", obj_id=run_id) if run_id else None


def _publish(summary: PipelineSummary, settings: Settings) -> None:
    """The summary as a markdown artifact and one Prefect event per stack."""
    create_markdown_artifact(
        markdown=summary.markdown(),
        key=f"{summary.operation}-{summary.environment}",
        description=f"stackflow {summary.operation} of {summary.environment}"
        + (f" ({summary.target})" if summary.target != "AWS" else ""),
    )
    names = {
        "updated": "stack.updated",
        "failed": "stack.failed",
        "drift": "drift.detected",
        "previewed": "stack.previewed",
        "destroyed": "stack.destroyed",
    }
    for o in summary.outcomes:
        event = names.get(o.status)
        if event is None:
            continue
        emit_event(
            event=f"stackflow.{event}",
            resource={
                "prefect.resource.id": f"stackflow.stack.{summary.environment}.{o.node}",
                "prefect.resource.name": f"{summary.environment}/{o.node}",
                "stackflow.environment": summary.environment,
                "stackflow.stack": o.node,
            },
            payload={
                "operation": o.operation,
                "changes": o.changes.as_dict(),
                "target": summary.target,
                "note": o.note,
                "retries": list(o.retries),
                **(
                    {"resources": [r.as_dict() for r in o.resources]}
                    if o.operation == "preview"
                    else {}
                ),
            },
        )


def _run(request: PipelineRequest) -> Any:
    """The flow's result: the summary, or a Cancelled state of its own for a run that stopped on
    purpose (rejected, expired, interrupted) with the summary as its data."""
    try:
        return run_pipeline(request).as_dict()
    except RunStopped as exc:
        return end_state(exc.state_name, str(exc), exc.summary)


def _request(
    environment: str, operation: Operation, stacks: list[Any] | None, **kw: bool
) -> PipelineRequest:
    if stacks is not None and not [s for s in stacks if str(getattr(s, "value", s)).strip()]:
        # "not given" means every stack; an explicit empty list is a mistake, never "all"
        raise SettingsError(
            "stacks: an empty list selects nothing; leave the parameter out (null) to run every "
            f"stack, or name some of: {', '.join(GRAPH.order())}"
        )
    return PipelineRequest(
        environment=environment,
        operation=operation,
        stacks=[getattr(s, "value", s) for s in stacks or []],
        **kw,
    )


@flow(name="deploy", flow_run_name="deploy-{environment}", log_prints=False, persist_result=False)
def deploy(environment: EnvironmentName = "dev", stacks: Stacks = None, force: bool = False) -> Any:
    """Bring an environment up: networking, database, migrations, app, verification.

    Args:
        environment: the environment to deploy (dev, staging, prod, pr-123).
        stacks: only these stacks; the rest are read from state.
        force: update stacks even when nothing changed since their last successful update.
    """
    return _run(_request(environment, Operation.UP, stacks, force=force))


@flow(name="preview", flow_run_name="preview-{environment}", log_prints=False, persist_result=False)
def preview(environment: EnvironmentName = "dev", stacks: Stacks = None) -> Any:
    """Show what a deploy would change, stack by stack, changing nothing.

    Args:
        environment: the environment to preview.
        stacks: only these stacks.
    """
    return _run(_request(environment, Operation.PREVIEW, stacks))


@flow(name="refresh", flow_run_name="refresh-{environment}", log_prints=False, persist_result=False)
def refresh(environment: EnvironmentName = "dev", stacks: Stacks = None) -> Any:
    """Update each stack's state from what exists in the cloud.

    Args:
        environment: the environment to refresh.
        stacks: only these stacks.
    """
    return _run(_request(environment, Operation.REFRESH, stacks))


@flow(name="drift", flow_run_name="drift-{environment}", log_prints=False, persist_result=False)
def drift(environment: EnvironmentName = "dev", stacks: Stacks = None) -> Any:
    """Check every stack for drift (a refresh preview); drift fails the run and emits an event.

    Args:
        environment: the environment to check.
        stacks: only these stacks.
    """
    return _run(_request(environment, Operation.DRIFT, stacks))


@flow(name="destroy", flow_run_name="destroy-{environment}", log_prints=False, persist_result=False)
def destroy(
    environment: EnvironmentName = "dev",
    stacks: Stacks = None,
    confirm: Annotated[bool, Field(description="Required to destroy a prod environment.")] = False,
) -> Any:
    """Destroy an environment's stacks in reverse dependency order.

    Args:
        environment: the environment to destroy.
        stacks: only these stacks.
        confirm: must be true to destroy a protected (prod) environment.
    """
    return _run(_request(environment, Operation.DESTROY, stacks, confirm=confirm))


FLOWS: dict[str, Flow[..., Any]] = {
    "up": deploy,
    "preview": preview,
    "refresh": refresh,
    "drift": drift,
    "destroy": destroy,
}


def database_target(settings: Settings) -> MysqlTarget:
    """The environment's database, from its stack outputs (for `migrate`)."""
    engine = get_engine(settings)
    outputs = engine.outputs(bare_spec(settings, "database"))
    db = parse_outputs(GRAPH["database"], outputs)
    assert isinstance(db, DatabaseOutputs)
    return MysqlTarget(
        db.host, db.port, db.user, SecretStr(db.password.get_secret_value()), db.database
    )
