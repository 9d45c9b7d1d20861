"""What every run leaves in stackflow's records for `status`: per stack its last operation and
last success (with the commit), per environment the run in progress (and whether it waits for an
approval) and the schema's migrations version. All of it sits beside the Pulumi state in the
team's backend, so `status` on any machine reads the same, and never needs the database or a
`pulumi` process.

    stacks/<environment>/<stack>    {"last": {...}, "succeeded": {...}}: each an operation, its
                                    status, result, changes, commit, time, run and note
    runs/<environment>              the run in progress: flow run, operation, phase, since
    migrations/<environment>        {"version", "applied", "at", "commit"}
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from stackflow.engine.base import Operation
from stackflow.outcome import NodeOutcome, Status
from stackflow.records import Records, RecordsError, update

CHANGING = frozenset({Operation.UP, Operation.REFRESH, Operation.DESTROY})  # change a stack


class Result(StrEnum):
    """What a stack's last operation came to, as its record keeps it (`status` reads it)."""

    OK = "ok"  # it did what it was asked
    DRIFT = "drift"  # a drift check found drift
    FAILED = "failed"  # it did not complete (failed, stopped or cancelled)


def result_of(status: Status) -> Result:
    """What an outcome that ran comes to."""
    if status is Status.DRIFT:
        return Result.DRIFT
    return Result.FAILED if status.unfinished else Result.OK


def stack_key(environment: str, stack: str) -> str:
    return f"stacks/{environment}/{stack}"


def run_key(environment: str) -> str:
    return f"runs/{environment}"


def migrations_key(environment: str) -> str:
    return f"migrations/{environment}"


def record_outcomes(
    records: Records,
    environment: str,
    outcomes: Iterable[NodeOutcome],
    commit: str | None,
    run: str | None,
) -> None:
    """After a run: each stack's last operation (with what it changed, also when it ended
    part-way), and its last success when the operation changed or checked it. Nodes that did
    not run (skipped, read, not run) leave their record alone."""
    now = time.time()
    for o in outcomes:
        if not o.status.ran:
            continue
        last = {
            "operation": o.operation.value,
            "status": o.status.value,
            "result": result_of(o.status).value,
            "changes": o.changes.as_dict(),
            "commit": commit,
            "at": now,
            "run": run,
            "note": o.note[:500],
        }

        def change(
            value: dict[str, Any] | None, last: dict[str, Any] = last
        ) -> dict[str, Any] | None:
            current = value or {}
            before, ok = current.get("last") or {}, current.get("succeeded") or {}
            if last["status"] == Status.UNCHANGED and ok.get("commit") == last["commit"]:
                # a skip: the stack is as its last success at this commit left it
                if before.get("result") == Result.OK and before.get("commit") == last["commit"]:
                    return None  # nothing new to record
                return {**current, "last": last}
            new = {**current, "last": last}
            if last["result"] == Result.OK and last["operation"] in CHANGING:
                new["succeeded"] = last
            return new

        update(records, stack_key(environment, o.node), change)


def record_run(
    records: Records,
    environment: str,
    run: str | None,
    operation: str,
    phase: str,
    stacks: list[str],
    commit: str | None,
) -> None:
    """A run of `environment` is in progress (phase: running, waiting for approval)."""
    value = {
        "run": run,
        "operation": operation,
        "phase": phase,
        "stacks": stacks,
        "commit": commit,
        "since": time.time(),
    }
    update(records, run_key(environment), lambda _current: value)


def end_run(records: Records, environment: str, run: str | None) -> None:
    """The run ended: forget it, unless another run of the environment has taken its place."""
    with contextlib.suppress(RecordsError):
        found = records.get(run_key(environment))
        if found is not None and found.value.get("run") == run:
            records.delete(run_key(environment), expect_version=found.version)


def record_migrations(
    records: Records, environment: str, version: int | str | None, applied: int, commit: str | None
) -> None:
    """The schema's version after `migrate` ran (so `status` never asks the database): a number
    when it is one (`12`), its text otherwise (`2.0.1`)."""
    if isinstance(version, str) and version.isascii() and version.isdigit():
        version = int(version)
    value = {"version": version, "applied": applied, "at": time.time(), "commit": commit}
    update(records, migrations_key(environment), lambda _current: value)


def forget_environment(records: Records, environment: str) -> None:
    """The environment was destroyed: its stacks', run's and migrations' records go with it."""
    for key in [
        *records.list(f"stacks/{environment}/"),
        run_key(environment),
        migrations_key(environment),
    ]:
        records.delete(key, expect_version=None)


def last_success(records: Records, environment: str, stack: str) -> dict[str, Any] | None:
    """The stack's last successful change as its record keeps it (operation, status, at, commit,
    run), or None when it has none: the one read of a stack's record outside `status`."""
    found = records.get(stack_key(environment, stack))
    succeeded = found.value.get("succeeded") if found is not None else None
    return dict(succeeded) if isinstance(succeeded, dict) else None
