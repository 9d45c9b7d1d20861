"""The audit log: every action that changes or decides something, appended beside stackflow's
records and never updated or deleted by stackflow, each entry chained to the one before it by
its hash (`stackflow.audit.chain`), so an edited or removed entry is found.

`record(settings, action, ...)` is the one door every writer uses (the runs, the approval gate,
lock breaking and pending-operation recovery, cleanup, syncs, team operations, policy
overrides); `read_log(settings)` reads the whole log back and checks its chain
(`python flows/run.py audit`). Secrets never enter it: every text of an entry is masked with the
secrets the settings know (and any the caller adds) before it is written.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from stackflow.audit.chain import ChainReport, Entry, Head, encode, verify
from stackflow.audit.opening import open_audit
from stackflow.audit.store import AuditLog, AuditUnavailable
from stackflow.audit.who import Actor, current_actor, decider
from stackflow.backends import open_records
from stackflow.records import Records, RecordsError, update
from stackflow.records.projects import ProjectRecords

if TYPE_CHECKING:
    from stackflow.settings import Settings

__all__ = [
    "HEAD_KEY",
    "Action",
    "Actor",
    "AuditUnavailable",
    "ChainReport",
    "Entry",
    "decider",
    "read_log",
    "record",
    "refusal",
]

HEAD_KEY = "audit/head"  # in the project's records: the last entry's position and hash
MAX_TEXT = 2000  # the longest text an entry keeps of one field (an error, a reason)


class Action(StrEnum):
    """What an entry records."""

    RUN_STARTED = "run.started"  # up, refresh or destroy of an environment began
    RUN_FINISHED = "run.finished"  # ... and ended: succeeded, failed, stopped
    RUN_REFUSED = "run.refused"  # refused before it changed anything
    APPROVED = "approval.approved"
    REJECTED = "approval.rejected"
    APPROVAL_EXPIRED = "approval.expired"  # nobody decided in time
    APPROVAL_SIGNED = "approval.signed"  # one approver's verified signature counted
    APPROVAL_REFUSED = "approval.refused"  # a signed answer that did not count, and why
    LOCK_BROKEN = "lock.broken"  # the lock a dead run left on a stack
    PENDING_IMPORTED = "pending.imported"  # a pending create the cloud had made, into the state
    PENDING_CLEARED = "pending.cleared"  # pending operations cleared from a stack's state
    ENVIRONMENT_EXPIRED = "environment.expired"  # an ephemeral environment's TTL passed
    ENVIRONMENT_DESTROYED = "environment.destroyed"  # every stack of it destroyed, forgotten
    SYNC_REFUSED = "sync.refused"  # a commit a sync would not run
    PASSPHRASE_ROTATED = "passphrase.rotated"
    STATE_IMPORTED = "state.imported"  # a one-machine state folder moved into the team's backend
    STACK_ADOPTED = "stack.adopted"  # a project's deployed stack moved into stackflow's backend
    POLICY_OVERRIDDEN = "policy.overridden"  # a policy's finding let through on purpose


def record(
    settings: Settings,
    action: Action,
    *,
    environment: str | None,
    stack: str | None = None,
    details: Mapping[str, Any] | None = None,
    actor: Actor | None = None,
    commit: str | None = None,
    secrets: Iterable[str] = (),
) -> Head:
    """Append one entry to the project's audit log, beside its records.

    Args:
        settings: whose records (and project) the log sits beside; its secrets are masked.
        action: what was done or decided.
        environment: what it was done to; None for the whole project (a passphrase rotation).
        stack: the stack, when the action is one stack's (a lock broken).
        details: what else it records: JSON values; every text masked, long ones cut.
        actor: who; default: whoever this process acts for (`stackflow.audit.who`).
        commit: the project's commit, when known.
        secrets: more values to mask (a generated password the run learnt).

    Returns:
        The new entry's position and hash.

    Raises:
        AuditUnavailable: the log could not be appended to (nothing was written).
    """
    from stackflow.redact import Redactor

    mask = Redactor([*settings.secret_values(), *secrets])
    who = actor or current_actor(settings.project_dir)
    fields = {
        "at": datetime.now(UTC).isoformat(timespec="microseconds"),
        "action": str(action),
        "environment": environment,
        "stack": stack,
        **who.fields(),
        "commit": commit,
        "run": _flow_run_id(),
        "details": _masked(dict(details or {}), mask),
    }
    fields = {k: _masked(v, mask) if isinstance(v, str) else v for k, v in fields.items()}
    with _opened(settings) as (log, records):
        head = log.append(lambda seq, prev: encode(fields, seq, prev))
        _advance_head(records, head)
    return head


def refusal(settings: Settings, operation: str, error: BaseException) -> bool:
    """Record that a run of `operation` on the settings' environment was refused, and why.

    Best effort, unlike `record`: the refusal's own message must reach the user whatever the
    log's store says (a refused run changed nothing). Returns whether it was recorded."""
    try:
        record(
            settings,
            Action.RUN_REFUSED,
            environment=settings.environment,
            details={"operation": operation, "why": str(error)},
        )
    except RecordsError:
        return False
    return True


def read_log(settings: Settings) -> tuple[ChainReport, str]:
    """The project's whole audit log, read back and checked, and where it lives.

    Raises:
        AuditUnavailable: the log could not be read.
    """
    with _opened(settings) as (log, records):
        stored = log.entries()
        found = records.get(HEAD_KEY)
        where = log.where
    anchor = None
    if found is not None:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            anchor = Head(int(found.value["seq"]), str(found.value["hash"]))
    return verify(stored, anchor), where


@contextlib.contextmanager
def _opened(settings: Settings) -> Iterator[tuple[AuditLog, Records]]:
    url = settings.resolved_records_url
    log = open_audit(url, settings.project)
    try:
        # the records without moving older unkeyed ones: that is the runs' business
        records = ProjectRecords(open_records(url), settings.project)
        try:
            yield log, records
        finally:
            records.close()
    finally:
        log.close()


def _advance_head(records: Records, head: Head) -> None:
    """Keep the head record at the last entry written (never moved back by a slower writer)."""

    def ahead(found: dict[str, Any] | None) -> dict[str, Any] | None:
        behind = found is None or int(found.get("seq", 0)) < head.seq
        return head.as_dict() if behind else None

    update(records, HEAD_KEY, ahead)


def _flow_run_id() -> str | None:
    """The Prefect flow run this process is in, if any."""
    if "prefect" not in sys.modules:  # not imported: in no flow run (and not paid for here)
        return None
    from prefect.context import FlowRunContext, TaskRunContext

    flow = FlowRunContext.get()
    if flow is not None and flow.flow_run is not None:
        return str(flow.flow_run.id)
    task = TaskRunContext.get()
    return (
        str(task.task_run.flow_run_id) if task is not None and task.task_run.flow_run_id else None
    )


def _masked(value: Any, mask: Callable[[str], str]) -> Any:
    """`value` as JSON with every text masked and cut to MAX_TEXT characters."""
    if isinstance(value, str):
        text = mask(value)
        return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN or infinity
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(_masked(str(k), mask)): _masked(v, mask) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_masked(v, mask) for v in value]
    return _masked(str(value), mask)
