"""The approval gate of an environment that names approvers: the run waits until enough of them
have each signed the very plan shown, with their SSH keys (`stackflow.approvals`).

Each answer arrives as any other (the UI's Resume form or a command line through the Prefect
API) with a `signature` field. Prefect cannot check it before accepting the form, so the flow
checks it right after: a signature that does not count (another plan or run, a key not in the
allowed signers, a principal not among the approvers, a second approval by the same person, the
requester where not allowed) is recorded with why, and the run pauses again, still waiting.
A reject from anyone who reaches the gate ends the run, recorded with its signer if signed.
"""

from __future__ import annotations

import time
from uuid import UUID

from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import create_flow_run_input, read_flow_run_input
from prefect.logging import get_run_logger
from prefect.runtime import flow_run

from flows.approval import (
    POLL_S,
    SUPERSEDED_KEY,
    VIA_SYNC,
    VIA_UI,
    ApprovalInput,
    Decision,
    emit_approval_event,
    now_utc,
    plan_counts,
)
from flows.trail import signed_answer
from stackflow.approvals.payload import Request, plan_digest
from stackflow.approvals.rules import Tally
from stackflow.approvals.signatures import SignatureError, SigningUnavailable, verify
from stackflow.approvals.trusted import SignedRules
from stackflow.plan import DeployPlan, markdown_cell
from stackflow.progress import ApprovalDecided, ApprovalRequested, ProgressHub
from stackflow.settings import Settings

REQUEST_KEY = "stackflow-approval-request"  # + "-<round>": the request `approve` signs
# + "-<round>-<attempt>", as the pause's key: what the flow made of that answer, for `approve`
VERDICT_KEY = "stackflow-approval-verdict"


def request_of(plan: DeployPlan, flow_run_id: str) -> Request:
    """What an approval of `plan` in this run signs."""
    return Request(plan.environment, flow_run_id, plan_digest(plan), plan.commit)


def await_signed_decision(
    settings: Settings,
    rules: SignedRules,
    plan: DeployPlan,
    progress: ProgressHub,
    ui_url: str | None,
) -> Decision:
    """Pause until `rules.needed` approvers (one more for an unknown requester who may not
    approve) have signed this plan, someone rejects it, or the timeout passes."""
    logger = get_run_logger()
    run_id = str(flow_run.id)
    timeout_s = settings.approval.timeout_s
    request = request_of(plan, run_id)
    create_flow_run_input(f"{REQUEST_KEY}-{plan.round}", request.as_dict(), UUID(run_id))
    emit_approval_event(
        plan, "stackflow.approval.requested", {"round": plan.round, **plan_counts(plan)}
    )
    progress.publish(
        ApprovalRequested(plan.environment, run_id, plan, timeout_s, ui_url, signed=True)
    )
    tally, refused = rules.tally(), list[str]()
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        attempt += 1
        left = int(deadline - time.monotonic())
        logger.info("%s: waiting for signed approval: %s", plan.environment, tally.still())
        form = ApprovalInput.with_initial_data(
            description=_description(plan, request, tally, refused)
        )
        try:
            if left < 1:
                raise FlowPauseTimeout("no time left")
            answer = pause_flow_run(
                wait_for_input=form,
                timeout=left,
                poll_interval=POLL_S,
                key=f"approval-{plan.round}-{attempt}",
            )
        except FlowPauseTimeout:
            why = f"no decision within {timeout_s}s ({tally.still()})"
            decision = Decision(False, why, now_utc(), "timeout", True, plan.round)
            return _decided(plan, progress, decision, tally, refused)
        via = progress.answer_for(run_id) or VIA_UI
        principal, why_not = _check(answer.signature or "", request, rules)
        if answer.decision == "reject":
            superseded = read_flow_run_input(SUPERSEDED_KEY, UUID(run_id)) is not None
            reason = answer.reason.strip()
            decision = Decision(
                False,
                reason,
                now_utc(),
                VIA_SYNC if superseded else via,
                False,
                plan.round,
                superseded,
                signers=(principal,) if principal else (),
            )
            return _decided(plan, progress, decision, tally, refused)
        if principal is not None and not why_not:
            why_not = tally.refusal(principal) or ""
        signed_answer(settings, plan, via, principal, why_not, plan.commit)
        if why_not:
            refused.append(why_not)
            _verdict(run_id, plan, attempt, why_not, tally)
            logger.warning("%s: a signed approval was refused: %s", plan.environment, why_not)
            continue
        assert principal is not None
        tally.count(principal)
        _verdict(run_id, plan, attempt, "", tally)
        logger.info("%s: approval signed by %s counted", plan.environment, principal)
        if tally.missing == 0:
            decision = Decision(True, answer.reason.strip(), now_utc(), via, False, plan.round)
            return _decided(plan, progress, decision, tally, refused)


def _verdict(run_id: str, plan: DeployPlan, attempt: int, why_not: str, tally: Tally) -> None:
    """What the flow made of the answer to pause `approval-<round>-<attempt>`: counted, or
    refused and why (`approve` reads it, whichever door the answer came through)."""
    key = f"{VERDICT_KEY}-{plan.round}-{attempt}"
    verdict = {"counted": not why_not, "why": why_not, "still": tally.still()}
    create_flow_run_input(key, verdict, UUID(run_id))


def _check(signature: str, request: Request, rules: SignedRules) -> tuple[str | None, str]:
    """(the verified principal, "") or (None, why the signature was not verified)."""
    if not signature.strip():
        return None, "the approval carries no signature (this environment names approvers)"
    try:
        return verify(request.payload(), signature, rules.allowed_signers), ""
    except (SignatureError, SigningUnavailable) as exc:
        return None, str(exc)


def _decided(
    plan: DeployPlan, progress: ProgressHub, decision: Decision, tally: Tally, refused: list[str]
) -> Decision:
    from dataclasses import replace

    signers = tuple(tally.approved_by) if decision.approved else decision.signers
    decision = replace(decision, signers=signers, refused=tuple(refused))
    progress.publish(
        ApprovalDecided(plan.environment, decision.approved, decision.reason, decision.via)
    )
    emit_approval_event(plan, "stackflow.approval.decided", decision.as_dict())
    get_run_logger().info("approval of %s: %s", plan.environment, decision.line())
    return decision


def _description(plan: DeployPlan, request: Request, tally: Tally, refused: list[str]) -> str:
    """The form's text: what is still needed, the request to sign, what was refused, the plan."""
    parts = [
        "## Signed approval\n",
        f"**{markdown_cell(tally.still())}**\n",
        "Approving needs the `signature` field: your SSH signature of this request, made with "
        f"`python flows/run.py approve --env {plan.environment} --run {request.flow_run_id} "
        "--print-signature`.\n",
        "```\n" + request.payload().decode() + "```\n",
    ]
    if refused:
        parts.append(
            "Refused so far:\n\n" + "\n".join(f"- {markdown_cell(w)}" for w in refused) + "\n"
        )
    return "\n".join([*parts, plan.markdown()])  # what is needed first, then the plan
