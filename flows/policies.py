"""Policy packs in a run: an `up` checked on a full preview before anything is applied, and the
refusal a mandatory rule's violation ends the run with (exit 2 at the command line).

`up` alone runs the packs too, but resource by resource as it applies them: the resources a stack
declares before the one a rule refuses would already be applied. So an environment with packs
previews every targeted stack first (the approval gate's plan does it for a protected one), and
applies only when no mandatory rule refused anything.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Callable
from typing import Any

from prefect.logging import get_run_logger

from flows.summary import PipelineSummary, PolicyRefused
from flows.walk import Walk, announce_phase, walk_graph
from stackflow.dag import NodeKind
from stackflow.engine import Operation
from stackflow.outcome import NodeOutcome, Status
from stackflow.policy.staged import prepare
from stackflow.policy.violation import refusal
from tasks.context import RunContext


def checked_up(
    ctx: RunContext,
    nodes: list[str],
    summary: PipelineSummary,
    force: bool = False,
    turn: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> Walk:
    """`up` of an environment with policy packs and no approval gate: preview every targeted
    stack with its packs (a stack unchanged since its last up, packs included, is skipped), then
    apply, unless a preview failed or a mandatory rule refused a stack (its Walk then)."""
    settings = ctx.settings
    stacks = [n for n in nodes if ctx.graph[n].kind is NodeKind.STACK]
    announce_phase(ctx, summary, "plan", stacks)
    plans = settings.state.plans(settings.environment) / f"check-{uuid.uuid4().hex[:12]}"
    plans.mkdir(parents=True, mode=0o700, exist_ok=True)  # update plans hold ciphertexts
    try:
        checked = walk_graph(ctx, stacks, Operation.PREVIEW, force, plan_dir=plans)
    finally:
        shutil.rmtree(plans, ignore_errors=True)
    if checked.failed or checked.interrupted:
        return checked
    announce_phase(ctx, summary, "up", nodes)
    with turn():
        return walk_graph(ctx, nodes, Operation.UP, force)


def ready_policies(ctx: RunContext, operation: Operation) -> dict[str, Any] | None:
    """Before a preview or an up of an environment with policy packs: each pack's virtualenv
    made, its copy staged and the settings' rule names checked, so a pack that cannot run stops
    the run before anything starts. What the summary shows of them (None: no packs run).

    Raises:
        PolicyPackError: naming the pack or the setting and what is wrong.
    """
    if operation not in (Operation.PREVIEW, Operation.UP):
        return None  # refresh, drift and destroy run no packs: a pack gone may not block them
    policies = ctx.settings.policies
    if policies is None:
        return None
    logger = get_run_logger()
    prepare(policies, ctx.settings.state.policy, lambda line: logger.info("%s", line))
    return policies.as_dict()


def refused_by_policy(summary: PipelineSummary) -> PolicyRefused | None:
    """The refusal a run ends with when a mandatory rule stopped one of its stacks (None: no
    rule did); its message names each stack, resource and rule."""
    refused = [o for o in summary.outcomes if _mandatory(o)]
    if not refused:
        return None
    reasons = "; ".join(refusal(f"{summary.environment}/{o.node}", o.violations) for o in refused)
    ended = (
        "Nothing was applied."
        if all(o.operation is Operation.PREVIEW for o in refused)
        else "The update stopped at the refused resource; what it applied before stays."
    )
    return PolicyRefused(f"{reasons}. {ended}", summary.as_dict())


def _mandatory(outcome: NodeOutcome) -> bool:
    return outcome.status is Status.FAILED and any(v.mandatory for v in outcome.violations)
