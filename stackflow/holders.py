"""Who runs an operation on a stack: a record per holder (one process's operation on one stack),
kept with stackflow's records beside the backend, so any worker can tell a lock left behind by a
dead run from a live one.

A record names the flow run, the host, the process and the `pulumi` processes that took the
stack's lock. Each holder writes its own record (`holders/<environment>/<stack>/<pid>-<host>`),
so a later run that could not break a lock yet (its holder's run not ended) never overwrites
the evidence it needs next time. A lock another machine's process holds is broken only when all
three agree: its host and pid are a record's, that record's flow run has ended in Prefect
(Crashed, by the heartbeat automation, or any other final state), and the lock is older than the
heartbeat window. A live run cut off from the server keeps its lock: its flow run is not final
while it heartbeats. A lock that is younger than the window while its holder's run has ended
(the run was just marked Crashed) is waited for, not refused.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from stackflow.engine.checkpoints import LockHolder
from stackflow.records import ABSENT, RecordConflict, Records

PREFIX = "holders/"
FINAL = ("CRASHED", "FAILED", "CANCELLED", "COMPLETED")
_TRIES = 10
RunState = Callable[[str], str | None]


def stack_prefix(environment: str, stack: str) -> str:
    return f"{PREFIX}{environment}/{stack}/"


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

    def key(self, environment: str, stack: str) -> str:
        """Where this holder's record of the stack lives (a record key's segment rules)."""
        host = re.sub(r"[^A-Za-z0-9._-]", "_", self.host)[:100]
        return f"{stack_prefix(environment, stack)}{self.pid}-{host}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow_run": self.flow_run,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "pulumi_pids": list(self.pulumi_pids),
        }


def take(records: Records, environment: str, stack: str, holder: Holder) -> str:
    """Record `holder` as running on the stack; the record's key."""
    key = holder.key(environment, stack)
    records.put(key, holder.as_dict(), expect_version=None)
    return key


def add_pulumi_pid(records: Records, key: str, pid: int) -> None:
    """A `pulumi` process of ours that takes the stack's lock started: remember its pid."""
    for _ in range(_TRIES):
        found = records.get(key)
        if found is None:
            return
        value = dict(found.value)
        value["pulumi_pids"] = [*value.get("pulumi_pids", []), pid][-20:]
        try:
            records.put(key, value, expect_version=found.version)
            return
        except RecordConflict:
            continue


def release(records: Records, key: str) -> None:
    """This holder's operation on the stack ended: its record goes."""
    records.delete(key)


def holders_of(records: Records, environment: str, stack: str) -> dict[str, dict[str, Any]]:
    """Every holder record of the stack, by key."""
    found = {}
    for key in records.list(stack_prefix(environment, stack)):
        record = records.get(key)
        if record is not None:
            found[key] = record.value
    return found


def holding(records: dict[str, dict[str, Any]], lock: LockHolder) -> str | None:
    """The key of the record whose host and pulumi pids name the lock's, if any."""
    for key, record in records.items():
        if lock.host == record.get("host") and lock.pid in (record.get("pulumi_pids") or []):
            return key
    return None


def lock_age(lock: LockHolder, now: datetime | None = None) -> float | None:
    if lock.time is None:
        return None
    return ((now or datetime.now(UTC)) - lock.time).total_seconds()


def stale_reason(
    lock: LockHolder,
    record: dict[str, Any] | None,
    run_state: RunState,
    window_s: float,
    now: datetime | None = None,
) -> str:
    """Why a lock another host (or a live pid) holds may be broken, or "" when it may not.

    Args:
        lock: the lock as the backend holds it.
        record: the holder record naming the lock's host and pid (`Holder.as_dict()`), if any.
        run_state: the state type of a flow run (COMPLETED, CRASHED, ...), None if unknown.
        window_s: how old the lock must be (longer than the heartbeat automation's window).
    """
    if record is None or lock.pid is None or lock.host is None:
        return ""
    if lock.host != record.get("host") or lock.pid not in (record.get("pulumi_pids") or []):
        return ""
    age = lock_age(lock, now)
    if age is None or age < window_s:
        return ""
    flow_run = record.get("flow_run")
    state = run_state(str(flow_run)) if flow_run else None
    if state not in FINAL:
        return ""
    return (
        f"its holder, flow run {flow_run} (pulumi pid {lock.pid} on {lock.host}), ended "
        f"{state.lower()} and the lock is {age:.0f}s old"
    )


class StaleLockFence:
    """The fence of one stack operation (`engine.base.Fence`): says whether a lock another
    host's process holds may be broken, waiting (at most `window_s`) for a lock whose holder's
    run has ended to pass the window; remembers the records of the holders it judged dead, which
    `settle` deletes once the operation's recovery is done.

    Args:
        say: told what it waits for.
        cancelled: asked while it waits; True ends the wait (the lock is then left alone).
    """

    def __init__(
        self,
        records: Records,
        environment: str,
        stack: str,
        own_key: str,
        run_state: RunState,
        window_s: float,
        say: Callable[[str], None],
        cancelled: Callable[[], bool],
    ) -> None:
        self.records, self.environment, self.stack = records, environment, stack
        self.own_key = own_key
        self.run_state, self.window_s = run_state, window_s
        self.say, self.cancelled = say, cancelled
        self.dead: list[str] = []

    def __call__(self, lock: LockHolder) -> str:
        found = holders_of(self.records, self.environment, self.stack)
        key = holding(found, lock)
        if key is None:
            return ""
        record = found[key]
        flow_run = record.get("flow_run")
        age = lock_age(lock)
        if flow_run and age is not None and age < self.window_s:
            state = self.run_state(str(flow_run))
            if state in FINAL:
                wait = self.window_s - age
                self.say(
                    f"the lock of flow run {flow_run} (ended {state.lower()}) is {age:.0f}s old: "
                    f"waiting {wait:.0f}s for it to pass the {self.window_s:.0f}s window"
                )
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and not self.cancelled():
                    time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))
        reason = stale_reason(lock, record, self.run_state, self.window_s)
        if reason:
            self.dead.append(key)
        return reason

    def settle(self, locked: Callable[[], bool]) -> None:
        """After recovery: the records of holders whose locks were broken go, and, when the stack
        holds no lock now (`locked()`, asked only if other records exist), those of every other
        holder whose run has ended (a dead run that left no lock, or whose lock a same-host
        check broke)."""
        for key in self.dead:
            with contextlib.suppress(RecordConflict):
                self.records.delete(key)
        found = holders_of(self.records, self.environment, self.stack)
        others = {k: v for k, v in found.items() if k != self.own_key}
        if not others or locked():
            return
        for key, record in others.items():
            flow_run = record.get("flow_run")
            if flow_run and self.run_state(str(flow_run)) in FINAL:
                with contextlib.suppress(RecordConflict):
                    self.records.delete(key)


__all__ = [
    "ABSENT",
    "Holder",
    "StaleLockFence",
    "add_pulumi_pid",
    "holders_of",
    "release",
    "stack_prefix",
    "stale_reason",
    "take",
]
