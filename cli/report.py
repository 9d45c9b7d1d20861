"""How a command ends on the screen: the run's summary (a table, or --json), the reason it did not
succeed and what to do, a bug's traceback and where to report it, and the exit code of each."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from stackflow import exits
from stackflow.infrastructure import named


def fail(
    message: str,
    code: int = exits.FAILED,
    hint: str = "",
    *,
    log: Path | None = None,
    as_json: bool = False,
) -> int:
    """The last lines of a command that did not succeed: why (one line), then what to do.

    Args:
        message: why; cut at 600 characters on the screen.
        code: the exit code (stackflow.exits).
        hint: what to do, when there is something to say.
        log: the log that holds all of it, when there is one (the line then names it).
        as_json: also print the outcome as the one JSON object on stdout (--json, when nothing
            else was printed there).

    Returns:
        `code`, for the caller to exit with.
    """
    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()  # so Prefect's workers print nothing after our last line
    if as_json:
        print_outcome(message, code, hint, log)
    sys.stdout.flush()  # the summary (stdout) before the reason (stderr), also when both are piped
    print(f"error: {one_line(message, log=log)}", file=sys.stderr)
    if hint:
        print(f"  what to do: {hint}", file=sys.stderr)
    return code


def print_outcome(
    message: str, code: int, hint: str = "", log: Path | None = None, file: TextIO | None = None
) -> None:
    """A command that did not succeed, as `--json` prints it: one JSON object on stdout (or
    `file`) with the whole message (never cut), the exit code, what to do and the log (null when
    there is none)."""
    outcome = {
        "error": message,
        "exit_code": code,
        "what_to_do": hint or None,
        "log": str(log) if log is not None else None,
    }
    print(json.dumps(outcome, indent=2, sort_keys=True), file=file or sys.stdout, flush=True)


def one_line(text: str, limit: int = 600, log: Path | None = None) -> str:
    """A message on one line (the engine's reasons quote several of Pulumi's lines), at most
    `limit` characters and what was left out: where all of it is (`log`), or how much."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    left_out = (
        f"all of it is in {log}" if log is not None else f"{len(flat) - limit + 1} more characters"
    )
    return flat[: limit - 1] + f"… ({left_out})"


def print_summary(summary: dict[str, Any], as_json: bool = False) -> None:
    """A run's summary: the table, what a preview would change, retries, recoveries, the UI link.

    With `as_json`, one JSON object on stdout instead (secrets are masked in both).
    """
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return
    where = {
        "local cloud": "local cloud: moto on loopback, nothing was deployed to AWS",
        "AWS": "AWS",
    }.get(summary["target"], summary["target"])
    print(f"\n{summary['operation']} {summary['environment']}  [{where}]")
    wide = max([11, *(len(s["stack"]) for s in summary["stacks"])])  # a rehearsed project's name
    header = f"{'stack':<{wide}} {'status':<10} {'+':>3} {'~':>3} {'+-':>3} {'-':>3} {'=':>3} {'secs':>7}  note"
    print(header)
    print("-" * len(header))
    for s in summary["stacks"]:
        c = s["changes"]
        print(
            f"{s['stack']:<{wide}} {s['status']:<10} {c['create']:>3} {c['update']:>3} {c['replace']:>3} "
            f"{c['delete']:>3} {c['same']:>3} {s['duration_s']:>7.2f}  {one_line(s['note'], 110)}"
        )
    for s in summary["stacks"]:
        for i, reason in enumerate(s.get("retries", []), 1):
            print(f"{s['stack']}: attempt {i} failed and was retried: {' '.join(reason.split())}")
        if s.get("healed"):
            print(f"{s['stack']}: {s['healed']}")
    for line in preview_lines(summary):
        print(line)
    from stackflow.policy.report import policy_lines

    found = [(s["stack"], s.get("violations") or []) for s in summary["stacks"]]
    checked = policy_lines(summary["environment"], summary.get("policies"), found)
    if checked:
        print("\n" + "\n".join(checked))
    if summary.get("migrations") is not None:
        from stackflow.plan import migration_lines

        print()
        for line in migration_lines(summary["migrations"], statements=True):
            print(line)
    for approval in summary.get("approvals") or []:
        why = f": {approval['reason']}" if approval.get("reason") else ""
        print(
            f"approval (round {approval['round']}): {approval['decision']} via "
            f"{approval['via']} at {approval['decided_at']}{why}"
        )
    print(
        f"engine operations: {len(summary['engine_calls'])}; wall time {summary['duration_s']:.2f}s"
    )
    if summary.get("commit"):
        print(f"commit: {summary['commit']}")
    if summary.get("ui_url"):
        print(f"Prefect UI: {summary['ui_url']}")


def preview_lines(summary: dict[str, Any]) -> list[str]:
    """Per resource, what a preview would do and which properties change; what drift found,
    with the values stored and found (values masked)."""
    from stackflow.engine.base import Operation
    from stackflow.plan import drift_lines, resource_lines

    drift = summary["operation"] == Operation.DRIFT
    lines: list[str] = []
    for s in summary["stacks"]:
        resources = s.get("resources") or []
        if resources:
            lines.append(f"\n{summary['environment']}/{s['stack']}:" + (" drift" if drift else ""))
            lines.extend(drift_lines(resources) if drift else resource_lines(resources))
    return lines


def report_run(
    state: Any, error: BaseException | None, args: argparse.Namespace, log_file: Path
) -> int:
    """The summary, then the reason and what to do; the exit code of how the run ended.

    Args:
        state: the flow run's final Prefect state (None when `error` is set).
        error: what the flow call raised instead of returning a state, if anything.
        args: the parsed command line (--json).
        log_file: this command's log file, named in the hints.
    """
    from stackflow.localprefect import drain_prefect_queues

    as_json = getattr(args, "json", False)
    log_hint = f"the full log is {log_file} (-v shows it as it comes)"
    summarised = False  # with --json, the summary is the one object: a failure adds none

    def ended(message: str, code: int, hint: str) -> int:
        return fail(message, code, hint, log=log_file, as_json=as_json and not summarised)

    if error is not None:
        lost = prefect_lost(error)
        if lost:
            return ended(lost, exits.FAILED, f"{RECOVERY_HINT}; {log_hint}")
        fault = named(error)
        if fault is not None:
            return ended(str(fault), exits.FAILED, f"{fault.what_to_do}; {log_hint}")
        return bug(error, log_file, as_json=as_json)
    if state.is_completed():
        summary = state.result()
        drain_prefect_queues()
        print_summary(summary, as_json)
        print(f"log: {log_file}", file=sys.stderr)
        return exits.OK
    if state.is_cancelled():
        summary = state.result(raise_on_failure=False)
        drain_prefect_queues()
        if isinstance(summary, dict) and "stacks" in summary:
            print_summary(summary, as_json)
            summarised = True
        message = state.message or state.name
        from flows.pipeline import ApprovalExpired, ApprovalRejected
        from flows.summary import ApprovalSuperseded

        stopped = (ApprovalRejected, ApprovalSuperseded, ApprovalExpired)
        if state.name in {e.state_name for e in stopped}:
            expired = state.name == ApprovalExpired.state_name
            return ended(
                message,
                exits.REJECTED,
                "run `up` again to see a new plan"
                + (
                    "; the wait is `timeout_s` under [approval] in the environment's file"
                    if expired
                    else ""
                ),
            )
        return ended(
            message,
            exits.INTERRUPTED,
            "run the same command again: it clears what the interrupted operations left "
            "(their locks and pending operations) and carries on",
        )
    from flows.pipeline import DriftDetected, PipelineError, PolicyRefused

    try:
        state.result()
    except PipelineError as exc:
        if exc.summary:
            print_summary(exc.summary, as_json)  # what did happen, then the reason last
            summarised = True
        if isinstance(exc, PolicyRefused):
            return ended(
                str(exc),
                exits.USAGE,
                "change what the rule names, or turn the rule off for this environment with "
                'the reason why ([policy] disabled = { <rule> = "<why>" } in its file); see '
                "docs/guides/policies.md",
            )
        if isinstance(exc, DriftDetected):
            env = exc.summary["environment"] if exc.summary else "<env>"
            return ended(
                str(exc),
                exits.DRIFT,
                f"`python flows/run.py up --env {env}` puts the cloud back as the code says; "
                f"`python flows/run.py refresh --env {env}` takes the cloud's values into state",
            )
        return ended(str(exc), exits.FAILED, f"fix what it names, then run it again; {log_hint}")
    except Exception as exc:
        from stackflow.errors import StackflowError

        fault = named(exc)
        if isinstance(exc, StackflowError) or fault is not None:
            said = fault or exc
            hint = getattr(said, "what_to_do", "")
            code = exits.USAGE if isinstance(said, ValueError) else exits.FAILED
            return ended(str(said), code, f"{hint}; {log_hint}" if hint else log_hint)
        lost = prefect_lost(exc)
        if lost:
            return ended(lost, exits.FAILED, f"{RECOVERY_HINT}; {log_hint}")
        return bug(exc, log_file, as_json=as_json)
    return ended(f"flow ended in state {state.type.value}", exits.FAILED, log_hint)


RECOVERY_HINT = (
    "start the server again (team mode on this machine: `python flows/run.py server start "
    "--database postgres` starts its PostgreSQL too) and run the same command: operations that "
    "were running may have finished; the next run clears what they left (locks, pending "
    "operations), and the stack slots they held free themselves when their leases expire (60 s)"
)


def report_lost(log_file: Path, as_json: bool = False) -> int:
    """The run's server stopped answering: say so, naming it, and what to do (exit 1); with
    `as_json`, as the one JSON object too."""
    import os

    from stackflow.backends import mask_url

    api = mask_url(os.environ.get("PREFECT_API_URL") or _api_url())
    return fail(
        f"the Prefect server at {api} stopped answering during the run; its running operations "
        "were cancelled and nothing new started",
        exits.FAILED,
        f"{RECOVERY_HINT}; the full log is {log_file}",
        log=log_file,
        as_json=as_json,
    )


def _api_url() -> str:
    from prefect.settings import get_current_settings

    return str(get_current_settings().api.url or "the configured Prefect API")


def prefect_lost(exc: BaseException) -> str:
    """What to say when the Prefect server stopped answering during a run ("" if that is not
    what happened): an expected outcome (someone stopped it, it crashed), never a bug."""
    import os

    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen)
        if isinstance(seen, httpx.TransportError) or "attempting to connect to ephemeral" in text:
            from stackflow.backends import mask_url

            api = mask_url(os.environ.get("PREFECT_API_URL") or _api_url())
            return (
                f"the Prefect server at {api} stopped answering during the run "
                f"({type(seen).__name__}); the run could not report to it"
            )
        status = getattr(getattr(seen, "response", None), "status_code", 0)
        if type(seen).__name__ == "PrefectHTTPStatusError" and status >= 500:
            from stackflow.backends import mask_url

            api = mask_url(os.environ.get("PREFECT_API_URL") or _api_url())
            return (
                f"the Prefect server at {api} failed during the run (HTTP {status}): it answers, "
                "but its database is gone or restarting (team mode: the project's PostgreSQL); "
                "the run could not report to it"
            )
        seen = seen.__cause__ or seen.__context__
    return ""


def bug(exc: BaseException, log_file: Path | None = None, as_json: bool = False) -> int:
    """An error stackflow did not expect: the traceback, where it happened, how to report it;
    with `as_json`, the one JSON object on stdout too."""
    import traceback

    where = f" and the log {log_file}" if log_file else ""
    message = (
        f"unexpected {type(exc).__name__} inside stackflow: this is a bug. Please report it to "
        f"the stackflow maintainers with the traceback above{where}."
    )
    if as_json:
        print_outcome(message, exits.BUG, log=log_file)
    sys.stdout.flush()
    traceback.print_exception(exc, file=sys.stderr)
    print(f"error: {message}", file=sys.stderr)
    return exits.BUG
