"""`status`: every environment found in stackflow's records, per stack its last operation, result,
commit, time and condition, per environment its migrations version and the branch it follows;
as JSON, as a markdown table (the `stackflow-status` artifact), and in Prometheus's text format.

Conditions, the first that holds:

    damaged record        one of its records cannot be read (named, with what to do); the rest
                          of the status still shows
    expired               an ephemeral environment past its TTL (the cleanup destroys it)
    waiting for approval  a run of the environment waits for someone to approve its plan
    reconciling           a run is changing the stack, or a sync is deploying a new commit
    failed                its last operation failed
    drifted               its last drift check found drift (until an up or refresh)
    ready                 deployed, and its last operation succeeded
    not deployed          no operation has deployed it yet

An environment's condition is its stacks' worst.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from stackflow.gitops import sync
from stackflow.records import DamagedRecord, Records
from stackflow.records.environments import EnvironmentRecord, environment_names, read
from stackflow.status.records import migrations_key, run_key, stack_key

DAMAGED = "damaged record"  # one of its records cannot be read: the rest of status still shows
CONDITIONS = (  # worst first
    DAMAGED,
    "failed",
    "drifted",
    "waiting for approval",
    "reconciling",
    "expired",
    "ready",
    "not deployed",
)
ACTIVE = frozenset({"ready", "drifted", "failed", "reconciling", "waiting for approval", "expired"})


@dataclass
class StackStatus:
    stack: str
    condition: str
    operation: str | None = None
    result: str | None = None
    status: str | None = None
    commit: str | None = None
    at: float | None = None
    run: str | None = None
    note: str = ""
    succeeded_commit: str | None = None
    succeeded_at: float | None = None


@dataclass
class EnvironmentStatus:
    environment: str
    kind: str
    cloud: str
    condition: str
    created: float
    deployed: float | None
    expires_at: float | None
    stacks: list[StackStatus] = field(default_factory=list)
    migrations_version: int | str | None = None  # a number, or a dotted version's text
    migrations_at: float | None = None
    run: dict[str, Any] | None = None
    gitops: dict[str, Any] | None = None
    damaged: str = ""  # a record of it that cannot be read: which, and what to do

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
        condition = "expired"
    elif run is not None and name in (run.get("stacks") or [name]):
        condition = (
            "waiting for approval" if run.get("phase") == "waiting for approval" else "reconciling"
        )
    elif syncing:
        condition = "reconciling"
    elif last.get("result") == "failed":
        condition = "failed"
    elif last.get("result") == "drift":
        condition = "drifted"
    elif ok and ok.get("operation") != "destroy":
        condition = "ready"
    else:
        condition = "not deployed"
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
            status = EnvironmentStatus(name, "unknown", "unknown", DAMAGED, 0.0, None, None)
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
    conditions = {r.condition for r in rows}
    condition = next((c for c in CONDITIONS if c in conditions), "not deployed")
    expires = record.created + record.ttl_hours * 3600 if record.ttl_hours is not None else None
    return EnvironmentStatus(
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
    )


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus(environments: list[EnvironmentStatus]) -> str:
    """The counts in Prometheus's text exposition format (node_exporter's textfile collector
    reads it from a file; `status --prometheus FILE` writes one)."""
    lines = [
        "# HELP stackflow_stacks_active Stacks that are deployed, by environment.",
        "# TYPE stackflow_stacks_active gauge",
    ]
    for e in environments:
        active = sum(s.condition in ACTIVE for s in e.stacks)
        lines.append(f'stackflow_stacks_active{{environment="{_label(e.environment)}"}} {active}')
    lines += [
        "# HELP stackflow_stacks_failing Stacks whose last operation failed, by environment.",
        "# TYPE stackflow_stacks_failing gauge",
    ]
    for e in environments:
        failing = sum(s.condition == "failed" for s in e.stacks)
        lines.append(f'stackflow_stacks_failing{{environment="{_label(e.environment)}"}} {failing}')
    lines += [
        "# HELP stackflow_stack_condition 1 for each stack's current condition.",
        "# TYPE stackflow_stack_condition gauge",
    ]
    for e in environments:
        for s in e.stacks:
            labels = (
                f'environment="{_label(e.environment)}",stack="{_label(s.stack)}",'
                f'condition="{_label(s.condition)}"'
            )
            lines.append(f"stackflow_stack_condition{{{labels}}} 1")
    lines += [
        "# HELP stackflow_records_damaged 1 for each environment with a record that cannot be read.",
        "# TYPE stackflow_records_damaged gauge",
    ]
    lines += [
        f'stackflow_records_damaged{{environment="{_label(e.environment)}"}} 1'
        for e in environments
        if e.damaged
    ]
    lines += [
        "# HELP stackflow_migrations_version The schema's migrations version, by environment.",
        "# TYPE stackflow_migrations_version gauge",
    ]
    for e in environments:
        if isinstance(e.migrations_version, int):  # a dotted version (2.0.1) is no number
            lines.append(
                f'stackflow_migrations_version{{environment="{_label(e.environment)}"}} '
                f"{e.migrations_version}"
            )
    lines += [
        "# HELP stackflow_migrations_version_info The schema's migrations version as text "
        "(12, 2.0.1), by environment.",
        "# TYPE stackflow_migrations_version_info gauge",
    ]
    for e in environments:
        if e.migrations_version is not None:
            labels = f'environment="{_label(e.environment)}",version="{_label(str(e.migrations_version))}"'
            lines.append(f"stackflow_migrations_version_info{{{labels}}} 1")
    return "\n".join(lines) + "\n"


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + "Z" if at else "—"


def markdown(environments: list[EnvironmentStatus]) -> str:
    """A table per environment (the `stackflow-status` artifact)."""
    if not environments:
        return "# stackflow status\n\nNo environment is recorded.\n"
    parts = ["# stackflow status", ""]
    for e in environments:
        head = f"## `{e.environment}`: {e.condition}"
        extra = [f"{e.kind}, {'local cloud' if e.cloud == 'local' else 'AWS'}"]
        if e.migrations_version is not None:
            extra.append(f"migrations version {e.migrations_version}")
        follows = e.gitops or {}
        if follows.get("branch"):
            ok = (follows.get("succeeded") or {}).get("commit")
            extra.append(f"follows {follows['branch']} (deployed {str(ok or '—')[:12]})")
        parts += [head, "", e.damaged or "; ".join(extra), ""]
        parts += [
            "| stack | condition | last operation | result | commit | at |",
            "|---|---|---|---|---|---|",
        ]
        for s in e.stacks:
            parts.append(
                f"| {s.stack} | {s.condition} | {s.operation or '—'} | {s.status or '—'} | "
                f"{(s.commit or '—')[:12]} | {_when(s.at)} |"
            )
        parts.append("")
    return "\n".join(parts)
