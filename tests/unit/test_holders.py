"""The fence that decides whether a stale Pulumi lock another machine left may be broken
(stackflow.holders), on records in a folder: one record per holder, so a run that may not break a
lock yet never erases the evidence the next one needs; a lock whose holder's run has just ended
is waited for until it passes the window, never refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stackflow import holders
from stackflow.backends import open_records
from stackflow.engine.checkpoints import LockHolder
from stackflow.records import Records

pytestmark = pytest.mark.unit

WINDOW_S = 2.0


def lock_of(record: holders.Holder, pid: int, age_s: float) -> LockHolder:
    taken = datetime.now(UTC) - timedelta(seconds=age_s)
    return LockHolder("locks/x.json", pid, record.host, "someone", taken)


def fence(records: Records, states: dict[str, str], own: holders.Holder) -> holders.StaleLockFence:
    key = holders.take(records, "pr-1", "networking", own)
    return holders.StaleLockFence(
        records,
        "pr-1",
        "networking",
        key,
        states.get,
        WINDOW_S,
        say=lambda _line: None,
        cancelled=lambda: False,
    )


def test_a_run_that_may_not_break_the_lock_yet_leaves_the_evidence_for_the_next(
    tmp_path: Path,
) -> None:
    records = open_records(str(tmp_path / "records"))
    dead = holders.Holder("run-dead", "machine-a", 101, 0.0)
    dead_key = holders.take(records, "pr-1", "networking", dead)
    holders.add_pulumi_pid(records, dead_key, 555)
    lock = lock_of(dead, 555, age_s=10 * WINDOW_S)
    states = {"run-dead": "RUNNING"}  # its heartbeats have not been missed long enough yet

    second = fence(records, states, holders.Holder("run-2", "machine-b", 202, 0.0))
    assert second(lock) == ""  # refused: its holder's run has not ended
    holders.release(records, second.own_key)  # the second run's attempt failed on the lock
    assert records.get(dead_key) is not None

    states["run-dead"] = "CRASHED"  # the zombie automation ended it
    third = fence(records, states, holders.Holder("run-3", "machine-b", 303, 0.0))
    reason = third(lock)
    assert "flow run run-dead (pulumi pid 555 on machine-a), ended crashed" in reason
    third.settle(locked=lambda: False)
    assert records.get(dead_key) is None
    assert records.get(third.own_key) is not None  # its own record stays until it ends


def test_a_young_lock_of_an_ended_run_is_waited_for_then_broken(tmp_path: Path) -> None:
    records = open_records(str(tmp_path / "records"))
    dead = holders.Holder("run-dead", "machine-a", 101, 0.0)
    holders.add_pulumi_pid(records, holders.take(records, "pr-1", "networking", dead), 555)
    lock = lock_of(dead, 555, age_s=WINDOW_S / 2)
    said: list[str] = []
    waiting = fence(records, {"run-dead": "CRASHED"}, holders.Holder("run-2", "b", 202, 0.0))
    waiting.say = said.append
    assert "ended crashed" in waiting(lock)
    assert said and "waiting" in said[0] and "pass the 2s window" in said[0], said


def test_a_lock_no_record_names_or_whose_host_differs_is_never_broken(tmp_path: Path) -> None:
    records = open_records(str(tmp_path / "records"))
    dead = holders.Holder("run-dead", "machine-a", 101, 0.0)
    holders.add_pulumi_pid(records, holders.take(records, "pr-1", "networking", dead), 555)
    judge = fence(records, {"run-dead": "CRASHED"}, holders.Holder("run-2", "b", 202, 0.0))
    assert judge(lock_of(dead, 556, age_s=10)) == ""  # another pid
    elsewhere = LockHolder("locks/y.json", 555, "machine-c", "x", datetime.now(UTC))
    assert judge(elsewhere) == ""
