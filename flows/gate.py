"""The approval gate's rounds for `up` of a protected environment: plan (every targeted stack
previewed, saving Pulumi's update plan; the pending migrations read), wait for a decision
(flows.approval), then apply exactly what was approved, asking again when something changed
meanwhile."""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact
from prefect.logging import get_run_logger

from flows.approval import Decision, await_decision
from flows.signed import await_signed_decision
from flows.summary import (
    ApprovalExpired,
    ApprovalRejected,
    ApprovalSuperseded,
    PipelineSummary,
    publish,
)
from flows.trail import decided
from flows.walk import Walk, announce_phase, describe, walk_graph
from stackflow.approvals.trusted import signed_rules
from stackflow.dag import Node, NodeKind
from stackflow.engine import Operation
from stackflow.migrator.errors import MigrationError, TransientDatabaseError
from stackflow.migrator.pins import pin_changes
from stackflow.outcome import NodeOutcome, PreviewResult, Status, UpResult
from stackflow.plan import DeployPlan, PlanStatus, StackPlan, migrations_dict
from tasks.context import RunContext
from tasks.stack.skip import UNCHANGED

MAX_APPROVAL_ROUNDS = 5  # a plan that keeps changing while people approve it needs a person to look


def gated_up(
    ctx: RunContext,
    nodes: list[str],
    summary: PipelineSummary,
    force: bool = False,
    turn: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
    phase: Callable[[str], None] = lambda _name: None,
) -> Walk:
    """`up` of a protected environment: plan, wait for approval, apply exactly what was approved.

    The plan is every targeted stack's preview (saving Pulumi's update plan) and the pending
    migrations with their findings. Nothing to change: no approval, the up runs (and skips). On
    approval the migrations are checked again (a file added or edited meanwhile asks again), then
    each stack is updated under its plan and the migrations run pinned to the approved checksums;
    a stack or file that changed meanwhile stops the run there, and what remains is planned and
    approved again. Rejected or not decided in time: nothing is applied.

    `phase(name)` tells `status` when the run waits for a decision and when it runs again.
    `turn()` holds the environment against other runs that change it while a round applies;
    planning and waiting for a person hold nothing (an approval may wait for hours; what changed
    meanwhile is caught when the round applies under its saved plans).

    Raises:
        ApprovalRejected, ApprovalExpired: with the summary (nothing applied in that round).
        PipelineFailed: the plan could not be built, or approvals kept being invalidated.
    """
    logger = get_run_logger()
    settings = ctx.settings
    signed = signed_rules(settings)  # before planning: a machine that cannot check says so now
    started = time.monotonic()
    root = settings.state.plans(settings.environment) / uuid.uuid4().hex[:12]
    earlier: list[NodeOutcome] = []
    why_again = ""
    try:
        for round_ in range(1, MAX_APPROVAL_ROUNDS + 1):
            plan_dir = root / f"round-{round_}"
            # 0700: its update plans hold ciphertexts, ARNs and addresses, for this user only
            plan_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
            announce_phase(
                ctx, summary, "plan", [n for n in nodes if ctx.graph[n].kind is NodeKind.STACK]
            )
            built = _build_plan(ctx, nodes, plan_dir, round_, why_again, force)
            if isinstance(built, Walk):
                built.outcomes = _merged(earlier, built.outcomes)
                return built  # the plan could not be built: its failure says why
            if built.empty:
                logger.info("%s: nothing to change, no approval needed", settings.environment)
                announce_phase(ctx, summary, "up", nodes)
                with turn():
                    walk = walk_graph(ctx, nodes, Operation.UP, force)
                walk.outcomes = _merged(earlier, walk.outcomes)
                return walk
            create_markdown_artifact(
                markdown=built.markdown(),
                key=f"plan-{settings.environment}",
                description=f"stackflow plan of {settings.environment} awaiting approval"
                + (f" ({settings.target_label})" if settings.target_label != "AWS" else ""),
            )
            phase("waiting for approval")
            try:
                decision = (
                    await_decision(built, settings.approval.timeout_s, ctx.progress, summary.ui_url)
                    if signed is None
                    else await_signed_decision(
                        settings, signed, built, ctx.progress, summary.ui_url
                    )
                )
            finally:
                phase("running")
            summary.approvals.append(decision)
            decided(settings, built, decision, ctx.commit)
            if not decision.approved:
                summary.outcomes = _merged(earlier, [_unapplied(n, decision) for n in nodes])
                summary.stopped = decision.line()
                summary.engine_calls = list(ctx.engine_calls)
                summary.duration_s = time.monotonic() - started
                publish(summary)
                error: type[ApprovalRejected | ApprovalExpired] = (
                    ApprovalExpired
                    if decision.expired
                    else ApprovalSuperseded
                    if decision.superseded
                    else ApprovalRejected
                )
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
            announce_phase(ctx, summary, "up", nodes)
            with turn():
                walk = walk_graph(ctx, nodes, Operation.UP, force, built, plan_dir)
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
    nodes: list[str],
    plan_dir: Path,
    round_: int,
    why_again: str,
    force: bool,
) -> DeployPlan | Walk:
    """Preview every targeted stack (saving its update plan) and plan the migrations; a Walk
    when a preview failed (the plan cannot be shown, so nothing can be approved)."""
    stacks = [n for n in nodes if ctx.graph[n].kind is NodeKind.STACK]
    walk = walk_graph(ctx, stacks, Operation.PREVIEW, force, plan_dir=plan_dir)
    if walk.failed or walk.interrupted:
        return walk
    by_node = {o.node: o for o in walk.outcomes}
    plans = tuple(_stack_plan(o) for o in walk.outcomes)
    migrations = None
    for planner in planners(ctx, nodes):
        try:
            migrations = planner.plan(ctx, by_node) if planner.plan else None
        except (MigrationError, TransientDatabaseError) as exc:
            why = ctx.redactor(describe(exc))
            return Walk(walk.outcomes, failed=f"{planner.name}: {why} (planning)")
    settings = ctx.settings
    policies = settings.policies
    return DeployPlan(
        settings.environment,
        settings.target_label,
        plans,
        migrations,
        round_,
        why_again,
        commit=ctx.commit,
        unprotect=tuple(settings.lowered_protection()),
        unprotect_reason=settings.approval.unprotect or "",
        policies=policies.as_dict() if policies else None,
    )


def planners(ctx: RunContext, nodes: list[str]) -> list[Node]:
    """The targeted steps that can say, read-only, what they would do (the migrations)."""
    return [ctx.graph[n] for n in nodes if ctx.graph[n].plan is not None]


def previewed_migrations(ctx: RunContext, walk: Walk, planner: Node) -> dict[str, Any]:
    """What a step would do after this preview (read-only), or why it cannot be told."""
    assert planner.plan is not None
    try:
        report = planner.plan(ctx, {o.node: o for o in walk.outcomes})
    except (MigrationError, TransientDatabaseError) as exc:
        return migrations_dict(None, f"not read: {ctx.redactor(describe(exc))}") or {}
    return migrations_dict(report) or {}


def _moved_since(ctx: RunContext, plan: DeployPlan) -> str:
    """What changed in the migrations since `plan` was shown ("" if nothing): a file added,
    edited or applied by someone else while the approval waited."""
    if plan.migrations is None:
        return ""
    planner = next((n for n in ctx.graph.nodes.values() if n.plan is not None), None)
    if planner is None or planner.plan is None:
        return ""
    try:
        now = planner.plan(ctx, {})
    except (MigrationError, TransientDatabaseError) as exc:
        return f"the migrations could not be checked again ({ctx.redactor(describe(exc))})"
    names = {p.key: p.name for p in now.pending}
    parts = pin_changes(plan.pinned, now.pinned, {}, names)  # applied meanwhile: changed too
    if not parts:
        return ""
    return "the pending migrations changed while the approval waited (" + "; ".join(parts) + ")"


def _stack_plan(outcome: NodeOutcome) -> StackPlan:
    """What a stack's preview (or its skip, unchanged) puts in the plan an approval binds."""
    found, note = outcome.result, outcome.note
    if outcome.status is Status.UNCHANGED:
        status, note = PlanStatus.UNCHANGED, note or UNCHANGED
    else:
        status = PlanStatus.CHANGES if outcome.changes.changed else PlanStatus.NO_CHANGES
    return StackPlan(
        outcome.node,
        status,
        outcome.changes,
        outcome.resources,
        found.plan_file if isinstance(found, PreviewResult) else None,
        found.fingerprint if isinstance(found, PreviewResult | UpResult) else "",
        note,
        outcome.violations,
    )


_QUIET = frozenset({Status.UNCHANGED, Status.SKIPPED, Status.NOT_RUN})  # found nothing to do


def _merged(earlier: list[NodeOutcome], later: list[NodeOutcome]) -> list[NodeOutcome]:
    """A node's outcome across approval rounds: the later one, unless it found nothing to do
    where an earlier round had done something."""
    before = {o.node: o for o in earlier}
    merged = []
    for o in later:
        prior = before.get(o.node)
        if prior is not None and o.status in _QUIET and prior.status is not Status.STOPPED:
            o = prior
        merged.append(o)
    return merged


def _unapplied(node: str, decision: Decision) -> NodeOutcome:
    note = f"plan {_verb(decision)}: nothing applied"
    return NodeOutcome(node, Operation.UP, Status.NOT_RUN, note=note)


def _verb(decision: Decision) -> str:
    return "not decided in time" if decision.expired else decision.word
