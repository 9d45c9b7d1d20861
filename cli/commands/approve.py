"""`python flows/run.py approve --env ENV [--run ID] [--reject] [--reason TEXT] [--key PATH]
[--print-signature]`: sign the plan a run of ENV waits on at its approval gate, and answer it.

The run is the newest paused run of ENV (or --run); the request it published names the
environment, the run, the plan's digest and the commit, and that text is what is signed
(`stackflow.approvals`). --print-signature prints the signature for the Prefect UI's form instead
of answering. The run checks the signature itself: what it refused is printed, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.options import Refused
from stackflow import exits

if TYPE_CHECKING:
    from stackflow.settings import Settings

CHECKED_WITHIN_S = 60.0  # the run checks an answer within its poll interval; this is a bound


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add approve's own options to `parser`."""
    parser.add_argument("--run", metavar="FLOW_RUN_ID", help="the run (default: the newest paused)")
    parser.add_argument("--reject", action="store_true", help="reject the plan: nothing applied")
    parser.add_argument("--reason", default="", help="why (recorded with the decision)")
    parser.add_argument(
        "--key",
        type=Path,
        help="the SSH key to sign with (default: STACKFLOW_APPROVAL_SIGNING_KEY)",
    )
    parser.add_argument(
        "--print-signature",
        action="store_true",
        help="print the signature (to paste into the Prefect UI's form) and answer nothing",
    )


def signing_key(settings: Settings, given: Path | None) -> Path:
    """The key to sign with: --key, the machine's setting, or ~/.ssh/id_ed25519.

    Raises:
        Refused: none of them is a file.
    """
    key = given or settings.approval.signing_key or Path.home() / ".ssh" / "id_ed25519"
    if not key.expanduser().is_file():
        raise Refused(
            f"no SSH key to sign the approval with at {key}",
            what_to_do="pass --key PATH or set STACKFLOW_APPROVAL_SIGNING_KEY (ssh-keygen -t "
            "ed25519 makes one; its public key goes in the allowed signers file)",
        )
    return key.expanduser()


def sign_at_gate(request: Any, args: argparse.Namespace, echo: Callable[[str], None]) -> str | None:
    """`up`'s signature of the approval request its run published (an `ApprovalRequested`) when
    the environment names approvers ("" when it names none); None, said through `echo`, when it
    cannot be made here (the run keeps waiting for `approve` or the Prefect UI)."""
    if not getattr(request, "signed", False):
        return ""
    from flows.signed import request_of
    from stackflow.approvals.signatures import sign
    from stackflow.errors import StackflowError
    from stackflow.settings import get_settings

    try:
        settings = get_settings(request.environment, getattr(args, "cloud", None))
        key = signing_key(settings, None)
        return sign(request_of(request.plan, request.flow_run_id).payload(), key)
    except StackflowError as exc:
        echo(
            f"cannot sign the approval here: {exc}; the run keeps waiting: approve it with "
            f"`python flows/run.py approve --env {request.environment} --key PATH`"
        )
        return None


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Sign and answer (or print the signature); the exit code of what the run made of it."""
    from uuid import UUID

    from cli.prefectapi import use_local_prefect
    from flows.approval import answer
    from stackflow.approvals.signatures import SignatureError, SigningUnavailable, sign

    use_local_prefect(settings)
    run_id, pause_key = _waiting_run(settings.environment, args.run)
    request = _request(run_id, pause_key, settings.environment)
    print(f"run {run_id} of {settings.environment} waits at its approval gate:", file=sys.stderr)
    print(request.payload().decode(), end="", file=sys.stderr)
    signature = ""
    if not args.reject or args.key or args.print_signature:
        try:
            signature = sign(request.payload(), signing_key(settings, args.key))
        except (SignatureError, SigningUnavailable) as exc:
            raise Refused(str(exc)) from None
    if args.print_signature:
        print(signature, end="")
        return exits.OK
    answer(run_id, not args.reject, args.reason, signature=signature)
    if args.reject:
        print("rejected: nothing will be applied", file=sys.stderr)
        return exits.OK
    verdict = _verdict(UUID(run_id), pause_key)
    if verdict is None:
        print(
            f"the run took the approval but said nothing of it within {CHECKED_WITHIN_S:.0f}s: "
            f"see run {run_id} in the Prefect UI",
            file=sys.stderr,
        )
        return exits.OK
    if not verdict.get("counted"):
        print(f"error: the run refused this approval: {verdict.get('why')}", file=sys.stderr)
        return exits.USAGE
    print(
        f"approved: the signature was checked and counted; {verdict.get('still')}", file=sys.stderr
    )
    return exits.OK


def _waiting_run(environment: str, given: str | None) -> tuple[str, str]:
    """(run id, pause key) of the run waiting at `environment`'s gate."""

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        if given:
            runs = [_paused_soon(client, given)]
        else:
            paused = FlowRunFilter(state={"type": FlowRunFilterStateType(any_=[StateType.PAUSED])})
            runs = client.read_flow_runs(
                flow_run_filter=paused, sort=FlowRunSort.START_TIME_DESC, limit=50
            )
    for found in runs:
        state = found.state
        if (found.parameters or {}).get("environment") != environment:
            continue
        if state is not None and state.is_paused() and state.state_details.pause_key:
            return str(found.id), str(state.state_details.pause_key)
    raise Refused(
        f"no run of {environment} waits at its approval gate"
        + (f" (run {given} is not a paused run of it)" if given else ""),
        what_to_do="start one with `up` (it pauses for approval), or pass --run",
    )


def _paused_soon(client: Any, given: str) -> Any:
    """The run `given` names, once paused (a run about to pause is waited for, within
    CHECKED_WITHIN_S), or as it is when it ends or does not pause in time.

    Raises:
        Refused: no such run.
    """
    import time
    from uuid import UUID

    deadline = time.monotonic() + CHECKED_WITHIN_S
    while True:
        try:
            found = client.read_flow_run(UUID(given))
        except Exception:  # not a UUID, or no such run: one answer for both
            raise Refused(f"no flow run {given!r} on this Prefect server") from None
        state = found.state
        if state is None or state.is_paused() or state.is_final():
            return found
        if time.monotonic() > deadline:
            return found
        time.sleep(0.5)  # polling the server's state: Prefect has no push for a pause


def _request(run_id: str, pause_key: str, environment: str) -> Any:
    """The request the run published for the round it waits on."""
    from uuid import UUID

    from prefect.input import read_flow_run_input

    from flows.signed import REQUEST_KEY
    from stackflow.approvals.payload import Request

    round_ = pause_key.split("-")[1] if pause_key.count("-") >= 2 else ""
    data = read_flow_run_input(f"{REQUEST_KEY}-{round_}", UUID(run_id)) if round_ else None
    if not isinstance(data, dict):
        raise Refused(
            f"run {run_id} waits for an unsigned approval: {environment} names no approvers "
            "(answer it in the Prefect UI or at the command line that started it)"
        )
    request = Request.from_dict(data)
    if request.environment != environment:
        raise Refused(f"run {run_id} is a run of {request.environment}, not of {environment}")
    return request


def _verdict(run_id: Any, pause_key: str) -> dict[str, Any] | None:
    """What the run made of the answer to its pause `pause_key` (`flows.signed._verdict`), once
    it says; None when it ended or said nothing within CHECKED_WITHIN_S."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.input import read_flow_run_input

    from flows.signed import VERDICT_KEY

    key = VERDICT_KEY + pause_key.removeprefix("approval")  # "-<round>-<attempt>"
    deadline = time.monotonic() + CHECKED_WITHIN_S
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            found = read_flow_run_input(key, run_id)
            if isinstance(found, dict):
                return found
            state = client.read_flow_run(run_id).state
            if state is None or state.is_final():
                return None
            time.sleep(0.5)  # polling the server: Prefect has no push for a run input
    return None
