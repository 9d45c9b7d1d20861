"""The pipeline flows: deploy, preview, refresh, destroy and drift over the stack graph.

Each flow validates its parameters into a `PipelineRequest` and runs `run_pipeline`: one walk over
`GRAPH` (flows.walk), or for `up` of a protected environment the approval gate's rounds
(flows.gate), and ends with a summary (flows.summary): a Prefect markdown artifact, Prefect events,
and the returned dict the CLI prints. What the environment deploys comes from its file in the
project (`environments/<name>.toml`), whoever runs the flow; that machine's variables add only
what belongs to it (state folder, credentials). Parameters carry no secrets.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from enum import Enum
from typing import Annotated, Any, Literal

from prefect import Flow, flow
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from flows.approval import end_state
from flows.deployed import ensure_known, holds_resources
from flows.gate import gated_up, planners, previewed_migrations
from flows.scope import check_scope
from flows.summary import (
    ApprovalExpired,
    ApprovalRejected,
    DriftDetected,
    PipelineError,
    PipelineFailed,
    PipelineSummary,
    RunInterrupted,
    RunStopped,
    flow_run_url,
    publish,
)
from flows.walk import announce_phase, build_context, retry_delays, steps_of, walk_graph
from graph import GRAPH
from stackflow.engine import Operation
from stackflow.environments import (
    check_cloud,
    forget,
    record_attempt,
    record_outcome,
    records_of,
)
from stackflow.errors import SettingsError
from stackflow.progress import NodeState
from stackflow.settings import Settings, get_settings, validate_environment_name
from tasks.context import RunContext
from tasks.limits import SlotWaitCancelled, environment_slot

__all__ = [  # what callers import from here, wherever it is defined
    "FLOWS",
    "ApprovalExpired",
    "ApprovalRejected",
    "DriftDetected",
    "PipelineError",
    "PipelineFailed",
    "PipelineRequest",
    "PipelineSummary",
    "RunInterrupted",
    "RunStopped",
    "build_context",
    "deploy",
    "destroy",
    "drift",
    "preview",
    "refresh",
    "retry_delays",
    "run_pipeline",
]

# The UI renders an enum as a pick list; its members come from the graph, declared once.
StackName = Enum("StackName", {name: name for name in GRAPH.order()}, type=str)  # type: ignore[misc]

EnvironmentName = Annotated[
    str,
    AfterValidator(validate_environment_name),
    Field(
        description="Environment: lowercase, DNS-safe, <= 20 characters (dev, staging, prod, pr-123)."
    ),
]
Cloud = Annotated[
    Literal["local", "aws"] | None,
    Field(
        description="Where to deploy: leave it empty for what the environment's file says; "
        "'local' rehearses on the local cloud (moto on loopback)."
    ),
]
Stacks = Annotated[
    list[StackName] | None,
    Field(
        description="Run only these stacks; what they need from upstream is read from state. Empty: all."
    ),
]


class PipelineRequest(BaseModel):
    """A validated request to run one operation over an environment."""

    model_config = ConfigDict(frozen=True)

    environment: EnvironmentName = "dev"
    cloud: Literal["local", "aws"] | None = Field(
        None, description="Where to deploy; None: what the environment's file says."
    )
    operation: Operation = Operation.UP
    stacks: list[str] = Field(default_factory=list, description="Targeted stacks; empty means all.")
    force: bool = Field(
        False, description="Run `up` even on stacks whose fingerprint is unchanged."
    )
    confirm: bool = Field(False, description="Confirm destroying a protected (prod) environment.")


def run_pipeline(request: PipelineRequest, settings: Settings | None = None) -> PipelineSummary:
    """Run one operation over the graph inside the current flow run.

    In a protected environment ([approval] required in its file; default: the prod kind) an
    `up` first builds the combined plan and waits for its approval (see `flows.gate.gated_up`).

    Raises:
        ConfirmationRequired: destroy of a protected environment without `confirm`.
        PipelineFailed: a node failed; names it and the reason.
        DriftDetected: a drift check found differences.
        ApprovalRejected, ApprovalExpired: the plan was rejected, or not decided in time.
        RunInterrupted: the run was interrupted (Ctrl-C at the command line running it).
    """
    check_scope(request.environment)  # a deployment acts on its own environment only
    settings = settings or run_settings(request)
    settings.state.check()  # this machine's state folder: usable, or named with what to do
    op = request.operation
    if op is Operation.DESTROY:
        settings.confirm_destroy(request.confirm)
    records = records_of(settings)
    check_cloud(settings, records)
    ctx = build_context(settings, records=records)
    selected = ctx.graph.select(request.stacks)
    if op in (Operation.DRIFT, Operation.DESTROY, Operation.REFRESH):
        ensure_known(ctx, records)
    if op is Operation.DESTROY:
        for name in selected:
            guard = ctx.graph[name].destroy_guard
            if guard is not None:
                guard(settings)
    nodes = steps_of(ctx.graph, op, selected)
    summary = PipelineSummary(
        settings.environment,
        op.value,
        ctx.engine.name,
        target=settings.target_label,
        ui_url=flow_run_url(),
        settings=settings.source.as_dict(),
    )
    started = time.monotonic()
    created_record = False
    if op is Operation.UP:
        # before anything is created: an environment whose first deploy fails half-way is
        # still known (and an ephemeral one cleaned up once its TTL has passed)
        created_record = record_attempt(records, settings)

    def turn() -> contextlib.AbstractContextManager[None]:
        return _whole_environment(ctx, op, nodes)

    with ctx.progress.cancellable(ctx.cancel):
        if op is Operation.UP and settings.approval_required:
            # the environment's turn only while applying: never while a person decides
            ended = gated_up(ctx, nodes, summary, request.force, turn)
        else:
            announce_phase(ctx, summary, op.value, nodes)
            with turn():
                ended = walk_graph(ctx, nodes, op, request.force)
            planner = next(iter(planners(ctx, selected)), None)
            if op is Operation.PREVIEW and planner is not None and not ended.failed:
                summary.migrations = previewed_migrations(ctx, ended, planner)
    summary.outcomes = ended.outcomes
    summary.failed = ended.failed or (ended.invalidated or None)
    summary.engine_calls = list(ctx.engine_calls)
    summary.duration_s = time.monotonic() - started
    if ended.interrupted and not summary.failed:
        summary.stopped = "interrupted: running operations were cancelled; nothing new started"
    publish(summary)
    if op is Operation.UP:
        succeeded = not (summary.failed or summary.stopped)
        if not succeeded and created_record and not holds_resources(ctx):
            forget(records, settings.environment)  # a first deploy that created nothing
        else:
            record_outcome(records, settings, succeeded=succeeded)
    if summary.stopped:
        raise RunInterrupted(summary.stopped, summary.as_dict())
    if summary.failed:
        raise PipelineFailed(summary.failed, summary.as_dict())
    if op is Operation.DESTROY and not request.stacks:
        forget(records, settings.environment)  # gone: it may be deployed anywhere next
    drifted = [o.node for o in summary.outcomes if o.status == "drift"]
    if drifted:
        raise DriftDetected(
            f"drift detected in {settings.environment}: {', '.join(drifted)}", summary.as_dict()
        )
    return summary


@contextlib.contextmanager
def _whole_environment(ctx: RunContext, op: Operation, nodes: list[str]) -> Iterator[None]:
    """Runs that change an environment take turns for all of it (see `environment_slot`)."""
    if op not in (Operation.UP, Operation.DESTROY, Operation.REFRESH):
        yield
        return
    from prefect.logging import get_run_logger

    logger = get_run_logger()

    def waiting(why: str) -> None:
        logger.info("waiting: %s", why)
        for node in nodes:
            ctx.publish(node, NodeState.WAITING, detail=why)

    try:
        slot = environment_slot(
            ctx.settings.state.holders,
            ctx.settings.environment,
            waiting,
            cancelled=lambda: ctx.progress.cancelled,
        )
        slot.__enter__()
    except SlotWaitCancelled:
        raise RunInterrupted(
            f"interrupted while waiting for another run of {ctx.settings.environment}: "
            "nothing was started"
        ) from None
    try:
        yield
    finally:
        slot.__exit__(None, None, None)


def run_settings(request: PipelineRequest) -> Settings:
    """The settings a flow run acts on: the environment's file in this project, this machine's
    variables. A variable that names an environment setting is ignored (a file decides what an
    environment deploys), and the run's log says so."""
    settings = get_settings(request.environment, request.cloud, strict=False)
    if settings.source.ignored:
        from prefect.logging import get_run_logger

        logger = get_run_logger()
        for line in settings.source.ignored:
            logger.warning("ignored: %s", line)
    return settings


def _run(request: PipelineRequest) -> Any:
    """The flow's result: the summary, or a Cancelled state of its own for a run that stopped on
    purpose (rejected, expired, interrupted) with the summary as its data."""
    try:
        return run_pipeline(request).as_dict()
    except RunStopped as exc:
        return end_state(exc.state_name, str(exc), exc.summary)


def _request(
    environment: str,
    cloud: str | None,
    operation: Operation,
    stacks: list[Any] | None,
    **kw: bool,
) -> PipelineRequest:
    if stacks is not None and not [s for s in stacks if str(getattr(s, "value", s)).strip()]:
        # "not given" means every stack; an explicit empty list is a mistake, never "all"
        raise SettingsError(
            "stacks: an empty list selects nothing; leave the parameter out (null) to run every "
            f"stack, or name some of: {', '.join(GRAPH.order())}"
        )
    return PipelineRequest(
        environment=environment,
        cloud=cloud,
        operation=operation,
        stacks=[getattr(s, "value", s) for s in stacks or []],
        **kw,
    )


@flow(name="deploy", flow_run_name="deploy-{environment}", log_prints=False, persist_result=False)
def deploy(
    environment: EnvironmentName = "dev",
    stacks: Stacks = None,
    force: bool = False,
    cloud: Cloud = None,
) -> Any:
    """Bring an environment up: networking, database, migrations, app, verification.

    Args:
        environment: the environment to deploy (dev, staging, prod, pr-123).
        stacks: only these stacks; the rest are read from state.
        cloud: where to deploy; empty: what the environment's file says.
        force: update stacks even when nothing changed since their last successful update.
    """
    return _run(_request(environment, cloud, Operation.UP, stacks, force=force))


@flow(name="preview", flow_run_name="preview-{environment}", log_prints=False, persist_result=False)
def preview(
    environment: EnvironmentName = "dev", stacks: Stacks = None, cloud: Cloud = None
) -> Any:
    """Show what a deploy would change, stack by stack, changing nothing.

    Args:
        environment: the environment to preview.
        stacks: only these stacks.
    """
    return _run(_request(environment, cloud, Operation.PREVIEW, stacks))


@flow(name="refresh", flow_run_name="refresh-{environment}", log_prints=False, persist_result=False)
def refresh(
    environment: EnvironmentName = "dev", stacks: Stacks = None, cloud: Cloud = None
) -> Any:
    """Update each stack's state from what exists in the cloud.

    Args:
        environment: the environment to refresh.
        stacks: only these stacks.
    """
    return _run(_request(environment, cloud, Operation.REFRESH, stacks))


@flow(name="drift", flow_run_name="drift-{environment}", log_prints=False, persist_result=False)
def drift(environment: EnvironmentName = "dev", stacks: Stacks = None, cloud: Cloud = None) -> Any:
    """Check every stack for drift (a refresh preview); drift fails the run and emits an event.

    Args:
        environment: the environment to check.
        stacks: only these stacks.
    """
    return _run(_request(environment, cloud, Operation.DRIFT, stacks))


@flow(name="destroy", flow_run_name="destroy-{environment}", log_prints=False, persist_result=False)
def destroy(
    environment: EnvironmentName = "dev",
    stacks: Stacks = None,
    confirm: Annotated[bool, Field(description="Required to destroy a prod environment.")] = False,
    cloud: Cloud = None,
) -> Any:
    """Destroy an environment's stacks in reverse dependency order.

    Args:
        environment: the environment to destroy.
        stacks: only these stacks.
        confirm: must be true to destroy a protected (prod) environment.
    """
    return _run(_request(environment, cloud, Operation.DESTROY, stacks, confirm=confirm))


FLOWS: dict[str, Flow[..., Any]] = {
    "up": deploy,
    "preview": preview,
    "refresh": refresh,
    "drift": drift,
    "destroy": destroy,
}
