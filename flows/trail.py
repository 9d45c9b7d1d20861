"""What a run writes to the audit log (`stackflow.audit`) and tells people: one function per kind
of decision or change, each appending its entry and, where a team may want to hear of it, emitting
the environment event a notification automation matches (`stackflow.notifications`).

Each event is emitted once per run (per round, for an approval), never once per stack or per
retry: a run that fails at two stacks, or finds drift in three, sends one message."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from flows.approval import plan_summary
from flows.events import emit_environment_event
from stackflow.audit import Action, record, refusal
from stackflow.audit.who import authored, current_actor, decider
from stackflow.engine import Operation
from stackflow.errors import ConfirmationRequired, StackflowError, StepRefused
from stackflow.gitops.sync import Result
from stackflow.notifications import (
    DRIFT_FOUND,
    ENVIRONMENT_GONE,
    RUN_FAILED,
    SYNC_REFUSED,
    payload_text,
)
from stackflow.outcome import Status
from stackflow.status.history import RunResult

if TYPE_CHECKING:
    from flows.approval import Decision
    from flows.summary import PipelineSummary
    from stackflow.plan import DeployPlan
    from stackflow.settings import Settings

CHANGING = (Operation.UP, Operation.REFRESH, Operation.DESTROY)  # runs the log records
EXPIRED = "expired: "  # how a destroy's reason starts when cleanup destroys an expired environment


def run_started(
    settings: Settings, operation: Operation, commit: str | None, stacks: list[str]
) -> None:
    """An up, refresh or destroy of the environment starts: who, where, which commit."""
    if operation not in CHANGING:
        return
    from flows.summary import flow_run_url

    record(
        settings,
        Action.RUN_STARTED,
        environment=settings.environment,
        commit=commit,
        details={
            "operation": operation.value,
            "stacks": stacks,
            "target": settings.target_label,
            "backend": _masked_backend(settings),
            "ui_url": flow_run_url(),
        },
    )


def run_ended(settings: Settings, summary: PipelineSummary) -> None:
    """A run ended (published): one event if it failed or found drift, and for a run that
    changes things, how it ended in the log."""
    failed = [o.node for o in summary.outcomes if o.status is Status.FAILED]
    drifted = [o.node for o in summary.outcomes if o.status is Status.DRIFT]
    common = {
        "operation": summary.operation,
        "target": summary.target,
        "commit": summary.commit,
        "ui_url": summary.ui_url,
    }
    if summary.failed and not summary.stopped:
        error = payload_text(str(summary.failed).splitlines()[0])
        emit_environment_event(
            RUN_FAILED, summary.environment, {**common, "stacks": failed, "error": error}
        )
    elif drifted:
        emit_environment_event(DRIFT_FOUND, summary.environment, {**common, "stacks": drifted})
    if Operation(summary.operation) not in CHANGING:
        return
    result = (
        RunResult.FAILED
        if summary.failed
        else RunResult.STOPPED
        if summary.stopped
        else RunResult.SUCCEEDED
    )
    record(
        settings,
        Action.RUN_FINISHED,
        environment=summary.environment,
        commit=summary.commit,
        details={
            "operation": summary.operation,
            "result": result.value,
            "why": summary.failed or summary.stopped or "",
            "stacks": {o.node: o.status.value for o in summary.outcomes},
            "ui_url": summary.ui_url,
        },
    )


def decided(settings: Settings, plan: DeployPlan, decision: Decision, commit: str | None) -> None:
    """An approval was decided: approved or rejected (by whom, how), or not in time."""
    action = (
        Action.APPROVED
        if decision.approved
        else Action.APPROVAL_EXPIRED
        if decision.expired
        else Action.REJECTED
    )
    actor = decider(decision.via)
    if decision.signers:  # the verified principals whose signatures made the decision
        actor = replace(actor, signer=", ".join(decision.signers), verified=True)
    record(
        settings,
        action,
        environment=plan.environment,
        actor=actor,
        commit=commit,
        details={
            "round": decision.round,
            "reason": decision.reason,
            "decided_at": decision.decided_at,
            "plan": plan_summary(plan),
            "target": plan.target,
        },
    )


def signed_answer(
    settings: Settings,
    plan: DeployPlan,
    via: str,
    signer: str | None,
    why_refused: str | None,
    commit: str | None,
) -> None:
    """One signed answer at the gate: counted (its verified signer), or refused and why (the
    signer when the signature itself was good)."""
    actor = replace(decider(via), signer=signer, verified=signer is not None)
    record(
        settings,
        Action.APPROVAL_REFUSED if why_refused else Action.APPROVAL_SIGNED,
        environment=plan.environment,
        actor=actor,
        commit=commit,
        details={"round": plan.round, "why": why_refused or "", "plan": plan_summary(plan)},
    )


def refused(environment: str, cloud: str | None, operation: str, error: BaseException) -> None:
    """A flow run was refused before it changed anything (a bad setting, a protected
    environment unconfirmed, a step's check): recorded when its settings can be read (they say
    where the log is)."""
    if not _is_refusal(error):
        return
    from stackflow.settings import get_settings

    try:
        settings = get_settings(environment, cloud, strict=False)
    except StackflowError:
        return  # the settings themselves were refused: nothing says where the log is
    refusal(settings, operation, error)


def _is_refusal(error: BaseException) -> bool:
    return isinstance(error, StackflowError) and isinstance(
        error, ValueError | ConfirmationRequired | StepRefused
    )


def environment_expired(settings: Settings, name: str, ttl_hours: float | None) -> None:
    """Cleanup found an ephemeral environment past its TTL and destroys it."""
    record(
        settings,
        Action.ENVIRONMENT_EXPIRED,
        environment=name,
        details={"ttl_hours": ttl_hours},
    )


def environment_destroyed(settings: Settings, why: str) -> None:
    """Every stack of the environment was destroyed and it is forgotten; `why` says why when it
    was not someone's destroy (an expired TTL, a review branch gone)."""
    from flows.summary import flow_run_url

    who = current_actor(settings.project_dir)
    why = why or f"destroyed by {who.name} through {who.via}"
    record(
        settings,
        Action.ENVIRONMENT_DESTROYED,
        environment=settings.environment,
        details={"why": why},
    )
    emit_environment_event(
        ENVIRONMENT_GONE,
        settings.environment,
        {
            "what": "expired and was destroyed" if why.startswith(EXPIRED) else "was destroyed",
            "why": payload_text(why),
            "target": settings.target_label,
            "ui_url": flow_run_url(),
        },
    )


def sync_reported(settings: Settings, outcome: dict[str, Any]) -> None:
    """A sync's outcome was reported: a refused commit is recorded, under its author's name
    (unverified), and announced."""
    if outcome.get("result") != Result.REFUSED:
        return
    commit = str(outcome["commit"])
    actor = authored(settings.state.checkout(commit)) or current_actor(settings.project_dir)
    why = str(outcome.get("message") or "")
    record(
        settings,
        Action.SYNC_REFUSED,
        environment=settings.environment,
        actor=actor,
        commit=commit,
        details={"branch": outcome.get("branch"), "why": why},
    )
    emit_environment_event(
        SYNC_REFUSED,
        settings.environment,
        {"commit": commit, "branch": outcome.get("branch"), "why": payload_text(why)},
    )


def _masked_backend(settings: Settings) -> str:
    from stackflow.backends import mask_url

    return mask_url(settings.resolved_backend_url)
