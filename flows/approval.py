"""The approval gate of a protected environment: the run pauses until someone approves or rejects
the combined plan, in the Prefect UI (a typed form showing the plan) or at the command line that
started it (which answers through the same Prefect API, so every decision is recorded alike).
"""

from __future__ import annotations

import getpass
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from prefect.client.schemas.objects import State
from prefect.exceptions import FlowPauseTimeout, NotPausedError
from prefect.flow_runs import pause_flow_run, resume_flow_run
from prefect.input import RunInput, read_flow_run_input
from prefect.logging import get_run_logger
from prefect.runtime import flow_run
from prefect.states import Cancelled
from pydantic import Field

from flows.events import emit_environment_event
from stackflow.approvals.signatures import MAX_SIGNATURE
from stackflow.outcome import describe_changes
from stackflow.plan import DeployPlan
from stackflow.progress import ApprovalDecided, ApprovalRequested, ProgressHub

POLL_S = 2  # how often the paused run asks Prefect whether it was resumed
VIA_UI = "the Prefect UI or API"
VIA_SYNC = "the sync of a newer commit"
SUPERSEDED_KEY = "stackflow-superseded-by"  # a run input the sync writes before it rejects


class ApprovalInput(RunInput):
    """The form the Prefect UI shows to resume a paused deploy."""

    decision: Literal["approve", "reject"] = Field(
        description="approve: apply exactly the plan shown above. reject: end the run, nothing "
        "applied."
    )
    reason: str = Field(
        "",
        max_length=2000,
        description="Why (recorded with the decision in the run's summary and events).",
    )
    signature: str | None = Field(
        None,  # the UI's form sends null for a text field left empty
        max_length=MAX_SIGNATURE,
        description="Environments with approvers: your SSH signature of this request (the "
        "armored text). Make it with `python flows/run.py approve --env <env> --run <this run's "
        "id> --print-signature`, or approve with that command directly (without "
        "--print-signature). A reject needs none.",
    )


@dataclass(frozen=True)
class Decision:
    """What became of one approval request."""

    approved: bool
    reason: str
    decided_at: str  # ISO 8601, UTC
    # "command line (user@host)" or "command line --yes (user@host)"; "the Prefect UI or API":
    # a self-hosted Prefect server records no user for a resume, so there the channel is all
    via: str
    expired: bool = False
    round: int = 1
    superseded: bool = False  # rejected because a newer commit of its branch took its place
    signers: tuple[str, ...] = ()  # verified principals whose signed approvals counted
    refused: tuple[str, ...] = ()  # why each signed answer that did not count was refused

    @property
    def word(self) -> str:
        if self.approved:
            return "approved"
        return "expired" if self.expired else "superseded" if self.superseded else "rejected"

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.word,
            "reason": self.reason,
            "decided_at": self.decided_at,
            "via": self.via,
            "round": self.round,
            **({"signers": list(self.signers)} if self.signers else {}),
            **({"refused": list(self.refused)} if self.refused else {}),
        }

    def line(self) -> str:
        """One line for the terminal and the artifact."""
        why = f": {self.reason}" if self.reason else ""
        signed = f", signed by {', '.join(self.signers)}" if self.signers else ""
        return f"round {self.round}: {self.word} via {self.via}{signed} at {self.decided_at}{why}"


def command_line_identity(yes: bool = False) -> str:
    """How a decision made at this command line is recorded: the OS user and the host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = "unknown user"
    how = "command line --yes" if yes else "command line"
    return f"{how} ({user}@{socket.gethostname()})"


def await_decision(
    plan: DeployPlan, timeout_s: int, progress: ProgressHub, ui_url: str | None
) -> Decision:
    """Pause this flow run until the plan is approved or rejected, or `timeout_s` passes.

    The plan is the form's description, so the approver reads it where they decide. A command line
    that started this run in this process is told (`ApprovalRequested`) and may answer.
    """
    logger = get_run_logger()
    run_id = str(flow_run.id)
    emit_approval_event(
        plan,
        "stackflow.approval.requested",
        {"round": plan.round, **plan_counts(plan), "ui_url": ui_url},
    )
    progress.publish(ApprovalRequested(plan.environment, run_id, plan, timeout_s, ui_url))
    logger.info(
        "waiting up to %ds for approval of the plan for %s (round %d)%s",
        timeout_s,
        plan.environment,
        plan.round,
        f": {ui_url}" if ui_url else "",
    )
    form = ApprovalInput.with_initial_data(description=plan.markdown())
    try:
        answer = pause_flow_run(
            wait_for_input=form,
            timeout=timeout_s,
            poll_interval=POLL_S,
            key=f"approval-{plan.round}",
        )
    except FlowPauseTimeout:
        decision = Decision(
            False, f"no decision within {timeout_s}s", now_utc(), "timeout", True, plan.round
        )
    else:
        approved = answer.decision == "approve"
        superseded = not approved and read_flow_run_input(SUPERSEDED_KEY, UUID(run_id)) is not None
        decision = Decision(
            approved,
            answer.reason.strip(),
            now_utc(),
            VIA_SYNC if superseded else progress.answer_for(run_id) or VIA_UI,
            False,
            plan.round,
            superseded,
        )
    progress.publish(
        ApprovalDecided(plan.environment, decision.approved, decision.reason, decision.via)
    )
    emit_approval_event(plan, "stackflow.approval.decided", decision.as_dict())
    logger.info("approval of %s: %s", plan.environment, decision.line())
    return decision


def end_state(name: str, message: str, data: Any) -> State[Any]:
    """The flow run's final state for a run that applied nothing on purpose (rejected, expired,
    interrupted): Cancelled under its own name.

    A pause that timed out is failed by the server as soon as the run leaves it, so the state is
    forced first; the flow then returns the same state.
    """
    from prefect.client.orchestration import get_client

    state: State[Any] = Cancelled(name=name, message=message, data=data)
    run_id = flow_run.id
    if run_id:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(
                UUID(str(run_id)), Cancelled(name=name, message=message), force=True
            )
    return state


def supersede_plan(flow_run_id: str, commit: str, reason: str, timeout_s: float = 60.0) -> None:
    """Reject a paused run's plan because a newer commit takes its place: recorded as superseded
    (by the sync), never as a person's rejection in the UI."""
    from prefect.input import create_flow_run_input

    create_flow_run_input(SUPERSEDED_KEY, commit, flow_run_id=UUID(flow_run_id))
    answer(flow_run_id, False, reason, timeout_s)


def answer(
    flow_run_id: str, approve: bool, reason: str, timeout_s: float = 60.0, signature: str = ""
) -> None:
    """Resume a paused run with a decision, as the UI's form does (used by the command line).

    Waits while the run is not paused yet or its form is not saved yet (a fast answer can come
    before either).

    Raises:
        RuntimeError: the run refused the input, or it did not pause within `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    payload = {"decision": "approve" if approve else "reject", "reason": reason}
    if signature:
        payload["signature"] = signature
    while True:
        try:
            resume_flow_run(UUID(flow_run_id), run_input=payload)
            return
        except NotPausedError:
            pass
        except RuntimeError as exc:
            if "schema not found" not in str(exc):
                raise
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"flow run {flow_run_id} did not wait for approval within {timeout_s}s"
            )
        time.sleep(0.3)


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def plan_counts(plan: DeployPlan) -> dict[str, Any]:
    stacks = {s.node: s.changes.as_dict() for s in plan.stacks}
    m = plan.migrations  # planned as protected: `blocking` is every unallowed finding
    return {
        "summary": plan_summary(plan),
        "stacks": stacks,
        "pending_migrations": len(m.pending) if m else 0,
        "destructive_findings": len(m.blocking) if m else 0,
    }


def emit_approval_event(plan: DeployPlan, event: str, payload: dict[str, Any]) -> None:
    emit_environment_event(event, plan.environment, {"target": plan.target, **payload})


def plan_summary(plan: DeployPlan) -> str:
    """The plan in one line: "networking: 3 to create; database: no changes; 1 migration"."""
    parts = [
        f"{s.node}: {describe_changes(s.changes, would=True) if s.changes.changed else s.status}"
        for s in plan.stacks
    ]
    pending = len(plan.migrations.pending) if plan.migrations else 0
    if pending:
        parts.append(f"{pending} pending migration{'s' if pending > 1 else ''}")
    return "; ".join(parts)
