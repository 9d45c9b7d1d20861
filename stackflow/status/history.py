"""What `status` keeps beyond each stack's last operation: an environment's recent runs, each
stack's last failure, what its drift checks found and since when, the outputs its stacks hold
(secrets masked), and the app's health as the last verify step found it. Like the other status
records it sits beside the Pulumi state, so every machine reads the same.

    history/<environment>   {"runs": [newest first], "failures": {stack: ...},
                             "drift": {"checked": {...}, "since": {stack: at}},
                             "outputs": {stack: {name: value or "[secret]"}}}
    health/<environment>    {"url", "path", "healthy", "answer", "detail", "at", "commit", "run"}

Values here are shown to people (status, artifacts, metrics): an output is kept only as it may
be shown (`OutputValue.shown`), never its secret value.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stackflow.engine.base import Operation
from stackflow.outcome import NodeOutcome
from stackflow.records import Records, update
from stackflow.status.records import Result, result_of

KEEP_RUNS = 20  # the runs an environment's page lists
SETTLING = frozenset({Operation.UP, Operation.REFRESH})  # a success of these ends drift


def history_key(environment: str) -> str:
    return f"history/{environment}"


def health_key(environment: str) -> str:
    return f"health/{environment}"


class RunResult(StrEnum):
    """How a run ended, as its environment's history keeps it (the value is what pages show)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    DRIFT = "drift"  # a drift check that found some


@dataclass(frozen=True)
class RunEntry:
    """One run of an environment: what it did, how it ended, where to read it."""

    run: str | None
    operation: Operation
    result: RunResult
    commit: str | None
    url: str | None = None  # the flow run's page in the Prefect UI
    message: str = ""  # why it failed or stopped
    duration_s: float = 0.0

    def as_dict(self, at: float) -> dict[str, Any]:
        return {
            "run": self.run,
            "operation": self.operation.value,
            "result": self.result.value,
            "commit": self.commit,
            "url": self.url,
            "message": self.message[:500],
            "duration_s": round(self.duration_s, 1),
            "at": at,
        }


def record_history(
    records: Records,
    environment: str,
    entry: RunEntry,
    outcomes: Iterable[NodeOutcome],
    stacks: Iterable[str],
) -> None:
    """After a run of `environment`: the run at the head of its history, each stack's failure,
    what a drift check found (and since when), and the outputs each stack holds now (as they
    may be shown: secrets masked).

    Args:
        outcomes: every node's in the run (steps too); only `stacks` count.
    """
    now, wanted = time.time(), set(stacks)
    ran = [o for o in outcomes if o.status.ran and o.node in wanted]

    def change(value: dict[str, Any] | None) -> dict[str, Any]:
        current = dict(value or {})
        runs = [entry.as_dict(now), *(current.get("runs") or [])][:KEEP_RUNS]
        failures = dict(current.get("failures") or {})
        drift = dict(current.get("drift") or {})
        since = dict(drift.get("since") or {})
        outputs = dict(current.get("outputs") or {})
        checked: list[str] = []
        for o in ran:
            result = result_of(o.status)
            if result is Result.FAILED:
                failures[o.node] = {
                    "at": now,
                    "operation": o.operation.value,
                    "status": o.status.value,
                    "note": o.note[:500],
                    "run": entry.run,
                    "commit": entry.commit,
                }
            if o.operation is Operation.DRIFT:
                checked.append(o.node)
                if result is Result.DRIFT:
                    since.setdefault(o.node, now)  # drift found before keeps its first time
                elif result is Result.OK:
                    since.pop(o.node, None)
            elif result is Result.OK and o.operation in SETTLING:
                since.pop(o.node, None)
            if result is Result.OK and o.operation is Operation.DESTROY:
                outputs.pop(o.node, None)
            elif result is Result.OK and o.outputs:
                outputs[o.node] = o.shown_outputs()
        if checked:
            found = sorted(s for s in checked if s in since)
            drift["checked"] = {"at": now, "run": entry.run, "stacks": checked, "found": found}
        drift["since"] = since
        return {**current, "runs": runs, "failures": failures, "drift": drift, "outputs": outputs}

    update(records, history_key(environment), change)


def record_health(
    records: Records,
    environment: str,
    *,
    url: str,
    path: str,
    healthy: bool,
    answer: int | None,
    detail: str,
    commit: str | None,
    run: str | None,
) -> None:
    """What the verify step found: the app's URL and the path it asked, whether the app answered
    healthy, the HTTP status (None: no answer) and the line that says it."""
    value = {
        "url": url,
        "path": path,
        "healthy": healthy,
        "answer": answer,
        "detail": detail[:500],
        "at": time.time(),
        "commit": commit,
        "run": run,
    }
    update(records, health_key(environment), lambda _current: value)


def read_history(records: Records, environment: str) -> dict[str, Any]:
    found = records.get(history_key(environment))
    return {} if found is None else dict(found.value)


def read_health(records: Records, environment: str) -> dict[str, Any] | None:
    found = records.get(health_key(environment))
    return None if found is None else dict(found.value)


def forget_history(records: Records, environment: str) -> None:
    """The environment was destroyed: its history and health go with it."""
    for key in (history_key(environment), health_key(environment)):
        records.delete(key, expect_version=None)
