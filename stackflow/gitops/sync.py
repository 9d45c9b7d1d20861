"""An environment's sync record, and what a sync does next.

The record (`gitops/<environment>` with stackflow's records, beside the Pulumi state in the team's
backend) says which commit of the followed branch was seen, last attempted (with its result and
the runs that carried it) and last deployed, how many attempts of that commit failed in a row and
when the next may start. Every worker reads the same record, so every worker decides the same:

    the branch's commit == last deployed, environment present     up to date: nothing runs
    == last attempted, failed, before retry_at                     waiting: no tight loop
    == last attempted, refused/rejected/expired                    held until a newer commit
    == last attempted, its run still live                          reconciling: nothing new
    anything else                                                   deploy it (a live run of
                                                                   an older commit is superseded)

Back-off after a failure: the sync interval, doubled per failure in a row, at most an hour.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stackflow.records import Records, update

PREFIX = "gitops/"
MAX_BACKOFF_S = 3600.0


class Result(StrEnum):
    """How an attempt of a commit ended."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # retried with back-off
    REFUSED = "refused"  # never ran (its locked dependencies, a bad file): a new commit heals it
    REJECTED = "rejected"  # its plan was rejected: held until a newer commit
    EXPIRED = "expired"  # nobody decided in time: held until a newer commit
    SUPERSEDED = "superseded"  # a newer commit took its place
    CANCELLED = "cancelled"  # cancelled by someone (the UI): tried again at the next sync


HELD = frozenset({Result.REFUSED, Result.REJECTED, Result.EXPIRED})


class Next(StrEnum):
    """What a sync does."""

    UP_TO_DATE = "up-to-date"
    WAITING = "waiting"  # for the back-off after a failure
    HELD = "held"  # until a newer commit
    RECONCILING = "reconciling"  # a live run carries this commit already
    DEPLOY = "deploy"


@dataclass(frozen=True)
class Decision:
    next: Next
    why: str
    supersede: dict[str, Any] | None = None  # the live attempt of an older commit, if any


def key(environment: str) -> str:
    return PREFIX + environment


def read(records: Records, environment: str) -> dict[str, Any]:
    found = records.get(key(environment))
    return {} if found is None else dict(found.value)


def backoff_s(failures: int, interval_s: float) -> float:
    """How long after the `failures`-th failure in a row the commit is tried again."""
    return float(min(interval_s * 2 ** max(failures - 1, 0), MAX_BACKOFF_S))


def decide(
    record: dict[str, Any],
    head: str,
    *,
    deployed: bool,
    live: Callable[[dict[str, Any]], bool],
    now: float | None = None,
) -> Decision:
    """What to do with the branch's commit `head`.

    Args:
        record: the environment's sync record ({} if none).
        head: the commit the branch points at.
        deployed: whether the environment exists (its record is in the backend).
        live: whether an attempt's runs are still going (asked of Prefect).
    """
    now = time.time() if now is None else now
    attempted = record.get("attempted") or {}
    succeeded = record.get("succeeded") or {}
    running = attempted if attempted.get("result") == Result.RUNNING else None
    if running is not None and not live(running):
        running = None  # its run ended without a word (a killed worker): as if cancelled
    if running is not None and running.get("commit") == head:
        return Decision(Next.RECONCILING, f"a run is deploying {head[:12]} already")
    supersede = running  # a live run of an older commit
    if succeeded.get("commit") == head and deployed and supersede is None:
        return Decision(Next.UP_TO_DATE, f"{head[:12]} is deployed")
    if record.get("expired_commit") == head:
        return Decision(Next.HELD, f"{head[:12]} was destroyed when its TTL passed; push a commit")
    if attempted.get("commit") == head and supersede is None:
        result = attempted.get("result")
        if result in HELD:
            return Decision(Next.HELD, f"{head[:12]} was {result}; a newer commit is tried")
        retry_at = record.get("retry_at")
        if result == Result.FAILED and retry_at is not None and now < float(retry_at):
            return Decision(
                Next.WAITING,
                f"{head[:12]} failed {record.get('failures', 1)} time(s) in a row; tried again "
                f"in {float(retry_at) - now:.0f}s",
            )
    return Decision(Next.DEPLOY, f"{head[:12]} is not deployed yet", supersede)


def begin(
    records: Records,
    environment: str,
    head: str,
    attempt: dict[str, Any],
    decided_on: dict[str, Any],
) -> bool:
    """Record that this sync deploys `head` (`attempt`: who carries it: the sync's flow run, its
    host). False when another sync changed the attempt since this one read `decided_on`: it
    carries the environment now, and this sync does nothing."""
    started = time.time()

    def change(value: dict[str, Any] | None) -> dict[str, Any] | None:
        current = value or {}
        before = current.get("attempted") or {}
        if before != (decided_on.get("attempted") or {}):
            return None
        same = before.get("commit") == head
        return {
            **current,
            "failures": current.get("failures", 0) if same else 0,
            "retry_at": None,
            "attempted": {
                "commit": head,
                "at": started,
                "result": Result.RUNNING.value,
                **attempt,
            },
        }

    return update(records, key(environment), change) is not None


def note_run(records: Records, environment: str, head: str, fields: dict[str, Any]) -> None:
    """Add to the running attempt of `head` (the deploy's flow run, once it is known)."""

    def change(value: dict[str, Any] | None) -> dict[str, Any] | None:
        attempted = (value or {}).get("attempted") or {}
        if attempted.get("commit") != head or attempted.get("result") != Result.RUNNING:
            return None
        return {**(value or {}), "attempted": {**attempted, **fields}}

    update(records, key(environment), change)


def finish(
    records: Records,
    environment: str,
    head: str,
    result: Result,
    message: str,
    interval_s: float,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Record how the attempt of `head` ended (only if it is still this environment's attempt of
    `head`: a newer sync may have superseded it meanwhile). Returns the record."""
    ended = time.time()

    def change(value: dict[str, Any] | None) -> dict[str, Any] | None:
        current = value or {}
        attempted = dict(current.get("attempted") or {})
        if attempted.get("commit") != head:
            return None  # superseded: the newer attempt's sync writes the record
        attempted |= {"result": result.value, "ended": ended, "message": message, **(extra or {})}
        new = {**current, "attempted": attempted}
        if result is Result.SUCCEEDED:
            new |= {"succeeded": {"commit": head, "at": ended}, "failures": 0, "retry_at": None}
            if (current.get("seen") or {}).get("commit") == head:
                new["behind_since"] = None  # at the branch's head (as last seen)
        elif result is Result.FAILED:
            failures = int(current.get("failures", 0)) + 1
            new |= {"failures": failures, "retry_at": ended + backoff_s(failures, interval_s)}
        else:
            new |= {"retry_at": None}
        return new

    return update(records, key(environment), change) or read(records, environment)


def note_seen(records: Records, environment: str, head: str, fields: dict[str, Any]) -> None:
    """Record the commit the branch pointed at when this sync asked (and what it follows), and
    since when the environment has not been at the branch's head (`behind_since`: kept across
    newer heads until a deploy catches up, so "not converged for 30 minutes" can be told)."""
    now = time.time()

    def change(value: dict[str, Any] | None) -> dict[str, Any] | None:
        current = value or {}
        seen = current.get("seen") or {}
        behind = None
        if (current.get("succeeded") or {}).get("commit") != head:
            behind = current.get("behind_since") or now
        if (
            seen.get("commit") == head
            and all(current.get(k) == v for k, v in fields.items())
            and current.get("behind_since") == behind
        ):
            return None  # nothing new: no write on every quiet sync
        if seen.get("commit") != head:
            seen = {"commit": head, "at": now}
        return {**current, **fields, "seen": seen, "behind_since": behind}

    update(records, key(environment), change)


def note_expired(records: Records, environment: str) -> None:
    """The cleanup destroyed the environment (its TTL passed): its deployed commit is not
    deployed again; a newer commit is."""

    def change(value: dict[str, Any] | None) -> dict[str, Any] | None:
        if not value or not (value.get("succeeded") or {}).get("commit"):
            return None
        return {**value, "expired_commit": value["succeeded"]["commit"]}

    update(records, key(environment), change)


def forget(records: Records, environment: str) -> None:
    """The environment follows nothing any more (its review branch is gone and it is destroyed)."""
    records.delete(key(environment), expect_version=None)
