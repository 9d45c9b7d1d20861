"""The pipeline flows: deploy, preview, refresh, destroy and drift over the stack graph.

Each flow validates its parameters into a `PipelineRequest`, walks `GRAPH` submitting one task per
node with its upstream nodes' futures as inputs (so independent nodes run at the same time), and
ends with a summary: a Prefect markdown artifact, Prefect events, and the returned dict the CLI
prints. Settings come from the environment of whoever runs the flow; parameters carry no secrets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any

from prefect import Flow, flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event
from prefect.futures import PrefectFuture
from prefect.tasks import exponential_backoff
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr

from programs.app import AppOutputs
from programs.database import DatabaseOutputs
from stackflow.engine import Operation, get_engine
from stackflow.environments import check_cloud, forget, record_deploy
from stackflow.errors import SettingsError, StackError, StackflowError
from stackflow.fingerprint import FingerprintStore
from stackflow.graph import GRAPH, NodeKind, bare_spec, parse_outputs
from stackflow.redact import Redactor
from stackflow.secretbox import state_passphrase
from stackflow.settings import MysqlTarget, Settings, get_settings, validate_environment_name
from tasks.stacks import RunContext, StackOutcome, stack_operation

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
        }

    def markdown(self) -> str:
        where = (
            " — **local cloud** (moto's AWS APIs on loopback: nothing was deployed to AWS)"
            if self.target == "local cloud"
            else ""
        )
        head = f"# {self.operation} `{self.environment}`{where}\n\n"
        if self.failed:
            head += f"**Failed:** {self.failed}\n\n"
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
            + self.changes_markdown()
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
_ATTENTION = frozenset({"failed", "drift", "not run"})


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
    ctx: RunContext, environment: str, upstream: dict[str, StackOutcome]
) -> StackOutcome:
    """Bring the database schema to the latest version (a nested task with its own retries)."""
    from tasks.migrate import run_migrations

    started = time.monotonic()
    db = upstream["database"].typed
    assert isinstance(db, DatabaseOutputs)
    if upstream["database"].placeholder:
        return StackOutcome(
            "migrate", "migrate", "skipped", note="database not deployed yet (preview)"
        )
    target = MysqlTarget(db.host, db.port, db.user, db.password, db.database)
    ctx.redactor.add(db.password.get_secret_value())
    report = run_migrations.with_options(retries=ctx.settings.migrations.retries)(
        target, ctx.settings.migrations, environment
    )
    applied = len(report.applied)
    note = f"{applied} applied, {report.already_applied} already applied"
    return StackOutcome(
        "migrate",
        "migrate",
        "migrated" if applied else "unchanged",
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

    app = upstream["app"].typed
    assert isinstance(app, AppOutputs)
    check_url(app.url)
    started = time.monotonic()
    status = verify_health(app.url, ctx.settings.app.health_check_path)
    return StackOutcome(
        "verify",
        "verify",
        "healthy",
        duration_s=time.monotonic() - started,
        note=f"{app.url}{ctx.settings.app.health_check_path} answered {status}",
    )


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
    )


def run_pipeline(request: PipelineRequest, settings: Settings | None = None) -> PipelineSummary:
    """Run one operation over the graph inside the current flow run.

    Raises:
        ConfirmationRequired: destroy of a protected environment without `confirm`.
        PipelineFailed: a node failed; names it and the reason.
        DriftDetected: a drift check found differences.
    """
    settings = settings or get_settings(environment=request.environment)
    op = request.operation
    if op is Operation.DESTROY:
        settings.confirm_destroy(request.confirm)
    check_cloud(settings)
    ctx = build_context(settings)
    graph = ctx.graph
    selected = graph.select(request.stacks)
    if op is Operation.DESTROY and "database" in selected:
        settings.confirm_database_deletable()
    retries = settings.stack_retries
    stack_task = stack_operation.with_options(
        retries=retries,
        retry_delay_seconds=exponential_backoff(backoff_factor=settings.retry_delay_s)(
            max(retries, 1)
        )
        if settings.retry_delay_s > 0
        else 0,
    )
    summary = PipelineSummary(
        settings.environment,
        op.value,
        ctx.engine.name,
        target=settings.target_label,
        ui_url=_flow_run_url(),
    )
    started = time.monotonic()

    futures: dict[str, PrefectFuture[StackOutcome]] = {}
    known: dict[str, StackOutcome] = {}
    forward = op is not Operation.DESTROY
    order = graph.order() if forward else graph.reverse()
    for name in order:
        node = graph[name]
        if name not in selected:
            continue
        if node.kind is NodeKind.STEP and op is not Operation.UP:
            continue  # migrations and verification belong to deploys only
        if op in (Operation.REFRESH, Operation.DRIFT):
            futures[name] = stack_task.submit(
                ctx, name, op, upstream={}
            )  # independent: all at once
        elif forward:
            deps: dict[str, Any] = {}
            for up in node.upstream:
                if up in futures:
                    deps[up] = futures[up]
                elif graph[up].kind is NodeKind.STACK:
                    known.setdefault(up, _stored_outcome(ctx, up))
                    deps[up] = known[up]
            if node.kind is NodeKind.STEP:
                step = migrate_step if name == "migrate" else verify_step
                futures[name] = step.submit(ctx, settings.environment, deps)
                continue
            futures[name] = stack_task.submit(ctx, name, op, upstream=deps, force=request.force)
        else:
            after = [futures[d] for d in graph.downstream(name) if d in futures]
            futures[name] = stack_task.submit(
                ctx, name, op, upstream={}, wait_for=after, return_state=False
            )

    for name, future in futures.items():
        try:
            outcome = future.result()
        except StackError as exc:
            summary.failed = summary.failed or ctx.redactor(str(exc))
            summary.outcomes.append(
                StackOutcome(
                    name,
                    op.value,
                    "failed",
                    note=ctx.redactor(exc.reason),
                    retries=list(ctx.retries.get(name, [])),
                    healed=ctx.healed.get(name, ""),
                )
            )
            continue
        except Exception as exc:  # upstream failed, or a step failed
            reason = ctx.redactor(str(exc))
            if summary.failed is None:
                summary.failed = f"{name}: {reason}"
                summary.outcomes.append(StackOutcome(name, op.value, "failed", note=reason))
            else:
                summary.outcomes.append(
                    StackOutcome(name, op.value, "not run", note="an upstream node failed")
                )
            continue
        summary.outcomes.append(outcome)
    summary.engine_calls = list(ctx.engine_calls)
    summary.duration_s = time.monotonic() - started
    _publish(summary, settings)
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
def deploy(
    environment: EnvironmentName = "dev", stacks: Stacks = None, force: bool = False
) -> dict[str, Any]:
    """Bring an environment up: networking, database, migrations, app, verification.

    Args:
        environment: the environment to deploy (dev, staging, prod, pr-123).
        stacks: only these stacks; the rest are read from state.
        force: update stacks even when nothing changed since their last successful update.
    """
    return run_pipeline(_request(environment, Operation.UP, stacks, force=force)).as_dict()


@flow(name="preview", flow_run_name="preview-{environment}", log_prints=False, persist_result=False)
def preview(environment: EnvironmentName = "dev", stacks: Stacks = None) -> dict[str, Any]:
    """Show what a deploy would change, stack by stack, changing nothing.

    Args:
        environment: the environment to preview.
        stacks: only these stacks.
    """
    return run_pipeline(_request(environment, Operation.PREVIEW, stacks)).as_dict()


@flow(name="refresh", flow_run_name="refresh-{environment}", log_prints=False, persist_result=False)
def refresh(environment: EnvironmentName = "dev", stacks: Stacks = None) -> dict[str, Any]:
    """Update each stack's state from what exists in the cloud.

    Args:
        environment: the environment to refresh.
        stacks: only these stacks.
    """
    return run_pipeline(_request(environment, Operation.REFRESH, stacks)).as_dict()


@flow(name="drift", flow_run_name="drift-{environment}", log_prints=False, persist_result=False)
def drift(environment: EnvironmentName = "dev", stacks: Stacks = None) -> dict[str, Any]:
    """Check every stack for drift (a refresh preview); drift fails the run and emits an event.

    Args:
        environment: the environment to check.
        stacks: only these stacks.
    """
    return run_pipeline(_request(environment, Operation.DRIFT, stacks)).as_dict()


@flow(name="destroy", flow_run_name="destroy-{environment}", log_prints=False, persist_result=False)
def destroy(
    environment: EnvironmentName = "dev",
    stacks: Stacks = None,
    confirm: Annotated[bool, Field(description="Required to destroy a prod environment.")] = False,
) -> dict[str, Any]:
    """Destroy an environment's stacks in reverse dependency order.

    Args:
        environment: the environment to destroy.
        stacks: only these stacks.
        confirm: must be true to destroy a protected (prod) environment.
    """
    return run_pipeline(_request(environment, Operation.DESTROY, stacks, confirm=confirm)).as_dict()


FLOWS: dict[str, Flow[..., dict[str, Any]]] = {
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
