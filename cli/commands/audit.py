"""`python flows/run.py audit [--env E] [--since WHEN] [--json]`: the project's audit log beside
its records, read back whole and checked: the entries (of E, since WHEN) and whether the chain of
hashes holds. Exit 0 when it holds, 1 when an entry was edited or removed (named). Reads the log
only: no Prefect server, no engine."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from stackflow import exits

if TYPE_CHECKING:
    from stackflow.audit import ChainReport, Entry
    from stackflow.settings import Settings

_SPAN = re.compile(r"^(\d{1,6})([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def since_time(text: str, now: datetime | None = None) -> datetime:
    """--since's value as a time: a span back from now (30m, 12h, 7d), a date (2025-06-01) or a
    date and time (2025-06-01T12:00, UTC unless it names its zone).

    Raises:
        argparse.ArgumentTypeError: anything else, naming what is accepted.
    """
    value = text.strip()
    span = _SPAN.match(value)
    if span:
        back = timedelta(**{_UNITS[span.group(2)]: int(span.group(1))})
        return (now or datetime.now(UTC)) - back
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text[:60]!r} is not a time: give a span back from now (30m, 12h, 7d), a date "
            "(2025-06-01) or a date and time (2025-06-01T12:00, UTC unless it says its zone)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add audit's own options to `parser`."""
    parser.add_argument(
        "--since",
        metavar="WHEN",
        type=since_time,
        help="only entries written since WHEN: a span back from now (30m, 12h, 7d), a date "
        "(2025-06-01) or a date and time (UTC unless it says its zone); the whole chain is "
        "checked whatever is shown",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def shown(report: ChainReport, environment: str | None, since: datetime | None) -> list[Entry]:
    """The entries of `environment` (every one for None) written since `since`."""
    return [
        e
        for e in report.entries
        if (environment is None or e.environment == environment)
        and (since is None or e.time() >= since)
    ]


def line(entry: Entry) -> str:
    """One entry as the table shows it."""
    when = entry.time().astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    who = f"{entry.actor} ({entry.via} on {entry.host})"
    if entry.signer is not None:
        who += f", signed by {entry.signer}" + ("" if entry.verified else " (not verified)")
    where = "/".join(p for p in (entry.environment, entry.stack) if p) or "-"
    what = "; ".join(f"{k}: {_value(v)}" for k, v in entry.details.items() if v not in ("", None))
    commit = f"  commit {entry.commit[:12]}" if entry.commit else ""
    return f"{when}  #{entry.seq:<5} {entry.action:<22} {where:<22} {who}{commit}  {what}"


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:159] + "…"


def verdict(report: ChainReport) -> str:
    """Whether the chain holds, in one line."""
    head = report.head
    if head is None:
        return "the log is empty" if report.holds else "the log is empty, and it should not be"
    last = f"last entry {head.seq}, sha256 {head.hash[:16]}"
    if report.holds:
        anchored = "" if report.anchor is None else ", as its head record says"
        return f"the chain holds: {len(report.entries)} entries ({last}{anchored})"
    return f"the chain does not hold ({last}): " + "; ".join(report.problems)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the audit log (a table, or one JSON object); 0 when its chain holds, 1 when not."""
    from cli.report import fail
    from stackflow.audit import read_log

    report, where = read_log(settings)
    entries = shown(report, args.environment, args.since)
    if args.json:
        print(
            json.dumps(
                {
                    "log": where,
                    "holds": report.holds,
                    "problems": report.problems,
                    "total": len(report.entries),
                    "head": report.head.as_dict() if report.head else None,
                    "entries": [e.as_dict() for e in entries],
                },
                indent=2,
                sort_keys=True,
            )
        )
        return exits.OK if report.holds else exits.FAILED
    for entry in entries:
        print(line(entry))
    if not entries:
        print("no entry" + (f" of {args.environment}" if args.environment else "") + " to show")
    print(f"audit log {where}: {verdict(report)}")
    if report.holds:
        return exits.OK
    return fail(
        f"the audit log's chain does not hold: {'; '.join(report.problems)}",
        exits.FAILED,
        "an entry was edited or removed after it was written: compare the log with a backup, and "
        "find who could write to where it lives",
    )
