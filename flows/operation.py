"""One operation over the stack graph inside the current flow run: the request, the checks made
before anything starts (scope, the state folder, the cloud, a known environment, protection), the
walk (or, for `up` of a protected environment, the approval gate's rounds), what it records for
the next run and for `status`, and the summary it ends with. The flows (flows/pipeline.py) are
its doors."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from flows.deployed import ensure_known, ensure_state_kept, holds_resources, serve_local_cloud
from flows.gate import gated_up, planners, previewed_migrations
from flows.pages import publish_status, record_run_history
from flows.policies import checked_up, ready_policies, refused_by_policy
from flows.scope import check_scope
from flows.summary import (
    DriftDetected,
    PipelineFailed,
    PipelineSummary,
    RunInterrupted,
    current_flow_run_id,
    flow_run_url,
    publish,
)
from flows.trail import environment_destroyed, run_ended, run_started
from flows.walk import announce_phase, build_context, steps_of, walk_graph
from stackflow.engine import Operation
from stackflow.environment_records import (
    forget,
    guard_environment,
    record_attempt,
    record_outcome,
    records_of,
)
from stackflow.errors import StackflowError, StepRefused
from stackflow.gitops.git import check_exact_commit, project_commit
from stackflow.outcome import Status
from stackflow.progress import NodeState
from stackflow.settings import Settings, get_settings, validate_environment_name
from stackflow.status.history import forget_history
from stackflow.status.records import (
    end_run,
    forget_environment,
    record_outcomes,
    record_run,
)
from tasks.context import RunContext
from tasks.limits import SlotWaitCancelled, environment_slot

EnvironmentName = Annotated[
    str,
    AfterValidator(validate_environment_name),
    Field(
        description="Environment: lowercase, DNS-safe, <= 20 characters (dev, staging, prod, pr-123)."
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
    recreate: bool = Field(
        False,
        description="`up` of stacks whose state is gone from the backend although they were "
        "deployed: deploy them anew (whatever is left in the cloud stays; nothing is adopted).",
    )


def run_pipeline(
    request: PipelineRequest, settings: Settings | None = None, why: str = ""
) -> PipelineSummary:
    """Run one operation over the graph inside the current flow run.

    In a protected environment ([approval] required in its file; default: the prod kind) an
    `up` first builds the combined plan and waits for its approval (see `flows.gate.gated_up`).
    `why`: why a destroy runs when it is not someone's (an expired TTL), for the audit log.

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
    records = records_of(settings)
    settings = guard_environment(
        settings, records
    )  # the cloud, and the protection its last up recorded
    if op is Operation.DESTROY:
        settings.confirm_destroy(request.confirm)
    if op is Operation.UP:
        require_exact_commit(settings)
    serve_local_cloud(settings)  # before a skipped stack's downstream steps reach it
    ctx = build_context(settings, records=records, adopts=not request.recreate)
    selected = ctx.graph.select(request.stacks)
    if op in (Operation.DRIFT, Operation.DESTROY, Operation.REFRESH):
        ensure_known(ctx, records)
    if op is Operation.UP and not request.recreate:
        ensure_state_kept(settings, ctx.engine, ctx.graph, records, selected)
    if op is Operation.DESTROY:
        for name in selected:
            guard = ctx.graph[name].destroy_guard
            if guard is not None:
                guard(settings)
    nodes = steps_of(ctx.graph, op, selected)
    if op is Operation.UP:
        check_steps(ctx, nodes)
    policies = ready_policies(ctx, op)  # a pack that cannot run stops the run before it starts
    ctx.commit = project_commit(settings.project_dir)
    run_id = current_flow_run_id()
    summary = PipelineSummary(
        settings.environment,
        op,
        ctx.engine.name,
        target=settings.target_label,
        ui_url=flow_run_url(),
        settings=settings.source.as_dict(),
        commit=ctx.commit,
        graph=ctx.graph,
        policies=policies,
    )
    started = time.monotonic()
    created_record = False
    if op is Operation.UP:
        # before anything is created: an environment whose first deploy fails half-way is
        # still known (and an ephemeral one cleaned up once its TTL has passed)
        created_record = record_attempt(records, settings)
    changing = op in (Operation.UP, Operation.REFRESH, Operation.DESTROY)
    stacks = [n for n in nodes if n in ctx.graph.stacks]
    run_started(settings, op, ctx.commit, stacks)

    def turn() -> contextlib.AbstractContextManager[None]:
        return _whole_environment(ctx, op, nodes)

    def phase(name: str) -> None:  # what `status` shows while the run goes on
        if changing:
            record_run(records, settings.environment, run_id, op.value, name, stacks, ctx.commit)

    phase("running")
    try:
        with ctx.progress.cancellable(ctx.cancel):
            if op is Operation.UP and settings.approval_required:
                # the environment's turn only while applying: never while a person decides
                ended = gated_up(ctx, nodes, summary, request.force, turn, phase)
            elif op is Operation.UP and policies:
                ended = checked_up(ctx, nodes, summary, request.force, turn)
            else:
                announce_phase(ctx, summary, op.value, nodes)
                with turn():
                    ended = walk_graph(ctx, nodes, op, request.force)
                planner = next(iter(planners(ctx, selected)), None)
                if op is Operation.PREVIEW and planner is not None and not ended.failed:
                    summary.migrations = previewed_migrations(ctx, ended, planner)
    finally:
        if changing:
            end_run(records, settings.environment, run_id)
    if op is not Operation.PREVIEW:
        done = [o for o in ended.outcomes if o.node in stacks]
        record_outcomes(records, settings.environment, done, ctx.commit, run_id)
    summary.outcomes = ended.outcomes
    summary.failed = ended.failed or (ended.invalidated or None)
    summary.engine_calls = list(ctx.engine_calls)
    summary.duration_s = time.monotonic() - started
    if ended.interrupted and not summary.failed:
        summary.stopped = "interrupted: running operations were cancelled; nothing new started"
    if op is not Operation.PREVIEW:
        with contextlib.suppress(StackflowError):  # a report: never what decides the run
            record_run_history(records, summary, run_id, stacks)
    publish(summary)
    run_ended(settings, summary)
    if op is Operation.UP:
        succeeded = not (summary.failed or summary.stopped)
        if not succeeded and created_record and not holds_resources(ctx):
            forget(records, settings.environment)  # a first deploy that created nothing
        else:
            record_outcome(records, settings, succeeded=succeeded)
    if op is Operation.DESTROY and not request.stacks and not (summary.failed or summary.stopped):
        forget(records, settings.environment)  # gone: it may be deployed anywhere next
        forget_environment(records, settings.environment)
        forget_history(records, settings.environment)
        environment_destroyed(settings, why)
    if op is not Operation.PREVIEW:
        with contextlib.suppress(StackflowError):  # a report: never what decides the run
            publish_status(records, ctx.graph.stacks, settings.environment)
    if summary.stopped:
        raise RunInterrupted(summary.stopped, summary.as_dict())
    if summary.failed and (refused := refused_by_policy(summary)):
        raise refused
    if summary.failed:
        raise PipelineFailed(summary.failed, summary.as_dict())
    drifted = [o.node for o in summary.outcomes if o.status is Status.DRIFT]
    if drifted:
        raise DriftDetected(
            f"drift detected in {settings.environment}: {', '.join(drifted)}", summary.as_dict()
        )
    return summary


def require_exact_commit(settings: Settings) -> None:
    """A protected environment (or one whose file sets `exact_commit`) deploys an exact commit:
    a checkout with uncommitted edits is refused, naming them.

    Raises:
        UncommittedChanges: naming the changed files.
    """
    why = settings.exact_commit
    if why:
        check_exact_commit(settings.project_dir, settings.environment, why)


def check_steps(ctx: RunContext, nodes: list[str]) -> None:
    """Each step's check of its own input (its files), before the run changes anything: a bad
    migration file stops an `up` before any stack starts, also one that would start early.

    Raises:
        StepRefused: naming the step, then what its check said.
    """
    for name in nodes:
        check = ctx.graph[name].check
        if check is None:
            continue
        try:
            check(ctx.settings)
        except StackflowError as exc:
            raise StepRefused(f"{name}: {exc}") from None


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
