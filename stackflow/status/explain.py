"""The answers `status` derives from the records: where an environment stands against the branch
it follows (and why it is not at its head), and its condition in words."""

from __future__ import annotations

import time
from typing import Any, Protocol

from stackflow.gitops import sync
from stackflow.status.condition import Condition

WAITING = "waiting for approval"  # a run's phase while its plan waits for a decision


class Explained(Protocol):
    """What `why` reads of an environment's status (`report.EnvironmentStatus`)."""

    condition: Condition
    damaged: str
    run: dict[str, Any] | None
    health: dict[str, Any] | None
    branch: dict[str, Any] | None
    commit: str | None

    @property
    def stacks(self) -> list[Any]: ...


def _short(commit: Any) -> str:
    return str(commit)[:12] if commit else "—"


def branch_status(
    follows: dict[str, Any], run: dict[str, Any] | None, now: float
) -> dict[str, Any] | None:
    """The branch an environment follows: its head (as the last sync saw it), the commit the
    syncs deployed, how long the environment has been behind, the last attempt and, when the
    head is not deployed, why. None when it follows no branch."""
    if not follows.get("branch"):
        return None
    seen = follows.get("seen") or {}
    head = seen.get("commit")
    done = follows.get("succeeded") or {}
    attempt = follows.get("attempted") or {}
    behind = bool(head) and head != done.get("commit")
    since = (follows.get("behind_since") or seen.get("at")) if behind else None
    refused = None
    why = ""
    if behind:
        result = attempt.get("result")
        message = str(attempt.get("message") or "")
        if attempt.get("commit") != head:
            why = f"commit {_short(head)} is not tried yet (the next sync deploys it)"
        elif result == sync.Result.RUNNING:
            why = f"a sync is deploying commit {_short(head)}"
            if run is not None and run.get("phase") == WAITING and run.get("commit") == head:
                why = f"the plan of commit {_short(head)} waits for approval"
        elif result in sync.HELD:
            refused = {"commit": head, "result": result, "reason": message}
            why = f"commit {_short(head)} {result}: {message}"
        elif result == sync.Result.FAILED:
            why = (
                f"commit {_short(head)} failed {follows.get('failures', 1)} time(s) in a row: "
                f"{message}"
            )
        else:  # cancelled, superseded: the next sync tries it again
            why = f"commit {_short(head)} {result}: {message}; the next sync tries it again"
    return {
        "name": follows["branch"],
        "repository": follows.get("repository"),
        "review": bool(follows.get("review")),
        "head": head,
        "head_seen_at": seen.get("at"),
        "deployed": done.get("commit"),
        "deployed_at": done.get("at"),
        "behind": behind,
        "behind_since": since,
        "behind_s": max(0.0, now - float(since)) if since else 0.0,
        "attempt": {
            k: attempt.get(k) for k in ("commit", "result", "message", "at", "ended", "deploy_run")
        }
        if attempt
        else None,
        "failures": int(follows.get("failures") or 0),
        "retry_at": follows.get("retry_at"),
        "refused": refused,
        "why": why,
    }


def why(e: Explained) -> str:
    """The environment's condition in words: what is wrong or going on (each cause once), or,
    when all is well, what it runs."""
    if e.damaged:
        return e.damaged
    parts = []
    if e.condition is Condition.EXPIRED:
        parts.append("its TTL has passed: the cleanup destroys it")
    if e.run is not None:
        what = e.run.get("operation") or "?"
        if e.run.get("phase") == WAITING:
            parts.append(f"a plan ({what}) waits for approval")
        else:
            parts.append(f"a run ({what}) is changing it")
    for s in e.stacks:
        if s.condition is Condition.FAILED:
            parts.append(f"{s.stack}: {s.operation} {s.status}" + (f": {s.note}" if s.note else ""))
    drifted = [s.stack for s in e.stacks if s.condition is Condition.DRIFTED]
    if drifted:
        parts.append(f"its last drift check found drift in {', '.join(drifted)}")
    if e.health is not None and not e.health.get("healthy"):
        parts.append(f"the app was not healthy at its last check: {e.health.get('detail')}")
    if e.branch is not None and e.branch.get("why"):
        parts.append(f"behind {e.branch['name']}: {e.branch['why']}")
    if parts:
        return "; ".join(parts)
    if e.condition is Condition.READY:
        healthy = " (healthy)" if e.health is not None and e.health.get("healthy") else ""
        return f"deployed at {_short(e.commit)}{healthy}" if e.commit else f"deployed{healthy}"
    if e.condition is Condition.RECONCILING:
        return "a sync is deploying a new commit"
    return "no operation has deployed it yet"


def when(at: float | None) -> str:
    """A time as people read it in reports: UTC, to the second ("—" when unknown)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + "Z" if at else "—"


def age(seconds: float) -> str:
    """A duration in the largest unit that fits: 45s, 12m, 3h 5m, 2d 4h."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"
