"""`status`: every environment found in stackflow's records and what it answers: per environment
whether it is ready and why not, the commit deployed and the head of the branch it follows (and,
when they differ, why: a refused commit with its reason, a run in progress, a plan waiting for
approval), the app's health from the last verify, the last drift check, the migrations version,
the expiry of an ephemeral one and its recent runs; per stack its condition
(`stackflow.status.condition`), last operation, result, what it changed (also when it ended
part-way), last success and last failure. `stackflow.status.text` shows it in a terminal,
`.pages` as the Prefect artifacts, `.metrics` in Prometheus's text format; `as_dict` is the JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from stackflow.engine.base import ChangeCounts, Operation
from stackflow.environment_records import EnvironmentRecord, environment_names, read
from stackflow.gitops import sync
from stackflow.outcome import describe_changes
from stackflow.records import DamagedRecord, Records
from stackflow.status.condition import Condition
from stackflow.status.explain import WAITING, branch_status, why
from stackflow.status.history import RunResult, read_health, read_history
from stackflow.status.records import Result, migrations_key, run_key, stack_key


@dataclass
class StackStatus:
    stack: str
    condition: Condition
    operation: str | None = None
    result: str | None = None
    status: str | None = None
    commit: str | None = None
    at: float | None = None
    run: str | None = None
    note: str = ""
    succeeded_commit: str | None = None
    succeeded_at: float | None = None
    last_success_at: float | None = None  # its last operation that succeeded (a check too)
    last_failure: dict[str, Any] | None = None  # at, operation, status, note, run, commit
    drift_since: float | None = None  # the first drift check that found what is still there
    changes: dict[str, int] | None = None  # what the last operation changed (also part-way)

    def changed(self) -> str:
        """What the last operation changed, in words ("" when nothing, or not recorded)."""
        found = self.changes or {}
        counts = ChangeCounts(**{k: int(found.get(k) or 0) for k in ChangeCounts().as_dict()})
        return describe_changes(counts) if counts.changed else ""


@dataclass
class EnvironmentStatus:
    environment: str
    kind: str
    cloud: str
    condition: Condition
    created: float
    deployed: float | None
    expires_at: float | None
    stacks: list[StackStatus] = field(default_factory=list)
    migrations_version: int | str | None = None  # a number, or a dotted version's text
    migrations_at: float | None = None
    run: dict[str, Any] | None = None
    gitops: dict[str, Any] | None = None
    damaged: str = ""  # a record of it that cannot be read: which, and what to do
    why: str = ""  # the condition in words: what is wrong or going on, or what it runs
    commit: str | None = None  # the commit deployed (a sync's, else the stacks' newest)
    branch: dict[str, Any] | None = None  # the branch followed: head, deployed, behind, why
    url: str | None = None  # the app's URL (its stacks' `url` output)
    health: dict[str, Any] | None = None  # the last verify: url, path, healthy, answer, at
    drift: dict[str, Any] | None = None  # the last drift check: at, stacks, found, since
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # per stack, masked
    runs: list[dict[str, Any]] = field(default_factory=list)  # the last runs, newest first

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stack(
    name: str,
    value: dict[str, Any],
    record: EnvironmentRecord,
    run: dict[str, Any] | None,
    syncing: bool,
    now: float,
) -> StackStatus:
    last = value.get("last") or {}
    ok = value.get("succeeded") or {}
    if record.expired(now):
        condition = Condition.EXPIRED
    elif run is not None and name in (run.get("stacks") or [name]):
        waits = run.get("phase") == WAITING
        condition = Condition.WAITING if waits else Condition.RECONCILING
    elif syncing:
        condition = Condition.RECONCILING
    elif last.get("result") == Result.FAILED:
        condition = Condition.FAILED
    elif last.get("result") == Result.DRIFT:
        condition = Condition.DRIFTED
    elif ok and ok.get("operation") != Operation.DESTROY:
        condition = Condition.READY
    else:
        condition = Condition.NOT_DEPLOYED
    return StackStatus(
        name,
        condition,
        last.get("operation"),
        last.get("result"),
        last.get("status"),
        last.get("commit"),
        last.get("at"),
        last.get("run"),
        last.get("note") or "",
        ok.get("commit"),
        ok.get("at"),
        max(
            (
                t
                for t in (ok.get("at"), last.get("at") if last.get("result") == Result.OK else None)
                if t
            ),
            default=None,
        ),
        changes=last.get("changes"),
    )


def collect(
    records: Records,
    stacks: list[str],
    live: Callable[[str], bool] | None = None,
    only: str | None = None,
) -> list[EnvironmentStatus]:
    """The status of every environment in `records` (or only `only`).

    Args:
        stacks: the graph's stacks, in order (the rows of each environment).
        live: whether a flow run (by id) is still going, asked of Prefect; without it a recorded
            run counts as going.
    """
    found = []
    for name in environment_names(records):
        if only is not None and name != only:
            continue
        try:
            status = _environment(records, name, stacks, live)
        except DamagedRecord as exc:
            damaged = Condition.DAMAGED
            status = EnvironmentStatus(name, "unknown", "unknown", damaged, 0.0, None, None)
            status.damaged = str(exc)
        if status is not None:
            found.append(status)
    return found


def _environment(
    records: Records, name: str, stacks: list[str], live: Callable[[str], bool] | None
) -> EnvironmentStatus | None:
    """One environment's status (None: its record went meanwhile).

    Raises:
        DamagedRecord: one of its records cannot be read.
    """
    now = time.time()
    record = read(records, name)
    if record is None:
        return None
    run_found = records.get(run_key(record.name))
    run = dict(run_found.value) if run_found is not None else None
    if run is not None and live is not None and run.get("run") and not live(str(run["run"])):
        run = None  # its flow run ended without a word (a killed process)
    follows = sync.read(records, record.name)
    attempted = follows.get("attempted") or {}
    syncing = attempted.get("result") == sync.Result.RUNNING and (
        live is None or not attempted.get("sync_run") or live(str(attempted["sync_run"]))
    )
    rows = []
    for stack in stacks:
        value = records.get(stack_key(record.name, stack))
        rows.append(_stack(stack, dict(value.value) if value else {}, record, run, syncing, now))
    migrations = records.get(migrations_key(record.name))
    condition = Condition.worst(r.condition for r in rows)
    expires = record.created + record.ttl_hours * 3600 if record.ttl_hours is not None else None
    history = read_history(records, record.name)
    failures = history.get("failures") or {}
    drift = history.get("drift") or {}
    since = drift.get("since") or {}
    for row in rows:
        row.last_failure = failures.get(row.stack)
        row.drift_since = since.get(row.stack) if row.condition is Condition.DRIFTED else None
    status = EnvironmentStatus(
        record.name,
        record.kind,
        record.cloud,
        condition,
        record.created,
        record.deployed,
        expires,
        rows,
        (migrations.value.get("version") if migrations else None),
        (migrations.value.get("at") if migrations else None),
        run,
        follows or None,
        health=read_health(records, record.name),
        outputs=dict(history.get("outputs") or {}),
        runs=list(history.get("runs") or []),
    )
    status.commit = _deployed_commit(follows, status.runs, rows)
    status.url = next((str(o["url"]) for o in status.outputs.values() if o.get("url")), None)
    if status.url is None and status.health is not None:
        status.url = status.health.get("url")
    status.drift = _drift(drift, rows)
    status.branch = branch_status(follows, run, now)
    status.why = why(status)
    return status


def _deployed_commit(
    follows: dict[str, Any], runs: list[dict[str, Any]], rows: list[StackStatus]
) -> str | None:
    """The commit the environment runs: the last one a sync deployed, else the last successful
    up's, else its stacks' newest success."""
    if (follows.get("succeeded") or {}).get("commit"):
        return str(follows["succeeded"]["commit"])
    for entry in runs:
        if entry.get("operation") == Operation.UP and entry.get("result") == RunResult.SUCCEEDED:
            return entry.get("commit")
    done = [r for r in rows if r.succeeded_at and r.succeeded_commit]
    return max(done, key=lambda r: r.succeeded_at or 0).succeeded_commit if done else None


def _drift(drift: dict[str, Any], rows: list[StackStatus]) -> dict[str, Any] | None:
    """The last drift check (when, which stacks, what it found) and the drift still there, by
    stack with the time it was first found; None when no check is recorded."""
    checked = drift.get("checked")
    still = {r.stack: r.drift_since for r in rows if r.condition is Condition.DRIFTED}
    if not checked and not still:
        return None
    return {
        "checked_at": (checked or {}).get("at"),
        "checked": list((checked or {}).get("stacks") or []),
        "run": (checked or {}).get("run"),
        "found": sorted(still),
        "since": {k: v for k, v in still.items() if v},
    }
