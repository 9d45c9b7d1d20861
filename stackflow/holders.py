"""Who runs an operation on a stack right now: a record per stack, kept with stackflow's records
beside the backend, so any worker can tell a lock left behind by a dead run from a live one.

The record names the flow run, the host, the process and the `pulumi` processes that took the
stack's lock. A lock another machine's process holds is broken only when all three agree: its
host and pid are the record's, the record's flow run has ended in Prefect (Crashed, by the
heartbeat automation, or any other final state), and the lock is older than the heartbeat window.
A live run cut off from the server keeps its lock: its flow run is not final while it heartbeats.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from stackflow.engine.checkpoints import LockHolder
from stackflow.records import ABSENT, RecordConflict, Records

PREFIX = "holders/"
_TRIES = 10


def key(environment: str, stack: str) -> str:
    return f"{PREFIX}{environment}/{stack}"


@dataclass(frozen=True)
class Holder:
    flow_run: str | None
    host: str
    pid: int
    started: float
    pulumi_pids: list[int] = field(default_factory=list)

    @classmethod
    def here(cls, flow_run: str | None) -> Holder:
        return cls(flow_run, socket.gethostname(), os.getpid(), time.time())

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow_run": self.flow_run,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "pulumi_pids": list(self.pulumi_pids),
        }


def take(records: Records, environment: str, stack: str, holder: Holder) -> None:
    """Record `holder` as running on the stack (replacing a dead run's record)."""
    records.put(key(environment, stack), holder.as_dict(), expect_version=None)


def add_pulumi_pid(records: Records, environment: str, stack: str, pid: int) -> None:
    """A `pulumi` process of ours that takes the stack's lock started: remember its pid."""
    for _ in range(_TRIES):
        found = records.get(key(environment, stack))
        if found is None:
            return
        value = dict(found.value)
        value["pulumi_pids"] = [*value.get("pulumi_pids", []), pid][-20:]
        try:
            records.put(key(environment, stack), value, expect_version=found.version)
            return
        except RecordConflict:
            continue


def release(records: Records, environment: str, stack: str) -> None:
    """This run's operation on the stack ended: its record goes (only if still ours)."""
    found = records.get(key(environment, stack))
    if found is None or found.value.get("pid") != os.getpid():
        return
    if found.value.get("host") != socket.gethostname():
        return
    with contextlib.suppress(RecordConflict):  # another run took it meanwhile: theirs now
        records.delete(key(environment, stack), expect_version=found.version)


def stale_reason(
    lock: LockHolder,
    record: dict[str, Any] | None,
    run_state: Callable[[str], str | None],
    window_s: float,
    now: datetime | None = None,
) -> str:
    """Why a lock another host (or a live pid) holds may be broken, or "" when it may not.

    Args:
        lock: the lock as the backend holds it.
        record: the stack's holder record (`Holder.as_dict()`), if any.
        run_state: the state type of a flow run (COMPLETED, CRASHED, ...), None if unknown.
        window_s: how old the lock must be (longer than the heartbeat automation's window).
    """
    if record is None or lock.pid is None or lock.host is None or lock.time is None:
        return ""
    if lock.host != record.get("host") or lock.pid not in (record.get("pulumi_pids") or []):
        return ""
    age = ((now or datetime.now(UTC)) - lock.time).total_seconds()
    if age < window_s:
        return ""
    flow_run = record.get("flow_run")
    state = run_state(str(flow_run)) if flow_run else None
    if state not in ("CRASHED", "FAILED", "CANCELLED", "COMPLETED"):
        return ""
    return (
        f"its holder, flow run {flow_run} (pulumi pid {lock.pid} on {lock.host}), ended "
        f"{state.lower()} and the lock is {age:.0f}s old"
    )


__all__ = ["ABSENT", "Holder", "add_pulumi_pid", "key", "release", "stale_reason", "take"]
