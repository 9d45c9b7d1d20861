"""`status` in a terminal: per environment a head line (condition, kind, the commit deployed),
why, the branch's head, the app's health and URL, the last drift check, migrations and expiry,
then a line per stack. Lines that would say nothing (no branch, never checked) are left out."""

from __future__ import annotations

import time

from stackflow.status.explain import age
from stackflow.status.report import EnvironmentStatus


def _local(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "-"


def _ago(at: float | None, now: float) -> str:
    return f"{age(now - at)} ago" if at else "never"


def environment_lines(e: EnvironmentStatus, now: float | None = None) -> list[str]:
    """One environment as the terminal shows it."""
    now = time.time() if now is None else now
    head = f"{e.environment}  {e.condition}  ({e.kind}, {e.cloud} cloud"
    if e.commit:
        head += f", deployed {e.commit[:12]}"
    lines = [head + ")"]
    if e.damaged:
        return [*lines, f"  {e.damaged}"]
    lines.append(f"  why: {e.why}")
    b = e.branch
    if b is not None:
        at = f"  branch: {b['name']} at {str(b['head'] or 'not seen yet')[:12]}"
        if b["behind"]:
            at += f", behind for {age(b['behind_s'])}"
        lines.append(at + (f" (seen {_ago(b['head_seen_at'], now)})" if b["head_seen_at"] else ""))
    if e.url or e.health:
        h = e.health
        said = (
            f"{'healthy' if h.get('healthy') else 'NOT healthy'} "
            f"({h.get('answer') or 'no answer'}, {_ago(h.get('at'), now)})"
            if h
            else "no verify recorded"
        )
        lines.append(f"  app: {e.url or (h or {}).get('url') or '-'}  {said}")
    d = e.drift
    if d is not None:
        found = ", ".join(d["found"])
        lines.append(
            f"  drift: checked {_ago(d['checked_at'], now)}: "
            + (f"drift in {found}" if found else "no drift")
        )
    if e.migrations_version is not None:
        lines.append(f"  migrations: version {e.migrations_version}")
    if e.expires_at:
        left = e.expires_at - now
        lines.append(
            f"  expires: {_local(e.expires_at)}"
            + (f" (in {age(left)})" if left > 0 else " (passed)")
        )
    for s in e.stacks:
        changed = s.changed()
        lines.append(
            f"  {s.stack:<12} {s.condition:<21} {s.operation or '-':<8} "
            f"{s.status or '-':<10} {(s.commit or '-')[:12]:<12} {_local(s.at)}"
            + (f"  ({changed})" if changed else "")
        )
    return lines
