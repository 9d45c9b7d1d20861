"""The audit log's chain, read from entries as a store holds them: an edited, removed, damaged,
moved or copied entry is named, the last one too (through the head recorded when it was
written); the entries of a whole log read back as written. And how the `audit` command reads
--since, and who an approval's answer names."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

import pytest

from cli.commands.audit import since_time
from stackflow.audit.chain import GENESIS, Entry, Head, Stored, digest, encode, verify
from stackflow.audit.who import decider

pytestmark = pytest.mark.unit


def fields(n: int) -> dict[str, object]:
    return {
        "at": f"2025-06-01T12:00:{n:02d}+00:00",
        "action": "run.started",
        "environment": "prod",
        "stack": None,
        "actor": "ana",
        "via": "command line",
        "host": "laptop",
        "signer": None,
        "verified": False,
        "commit": "1" * 40,
        "run": None,
        "details": {"n": n},
    }


def chain(count: int) -> list[Stored]:
    """A log of `count` entries as a store appends them."""
    stored: list[Stored] = []
    prev = GENESIS
    for n in range(1, count + 1):
        raw = encode(fields(n), n, prev)
        stored.append(Stored(f"line {n}", raw))
        prev = digest(raw)
    return stored


def head(stored: list[Stored]) -> Head:
    return Head(len(stored), digest(stored[-1].raw))


def test_a_whole_log_reads_back_as_written_and_its_chain_holds() -> None:
    stored = chain(5)
    report = verify(stored, head(stored))
    assert report.holds, report.problems
    assert [e.seq for e in report.entries] == [1, 2, 3, 4, 5]
    assert [e.details for e in report.entries] == [{"n": n} for n in range(1, 6)]
    assert report.entries[0].prev == GENESIS
    assert all(b.prev == a.hash for a, b in zip(report.entries, report.entries[1:], strict=False))
    assert report.head == head(stored)
    assert verify([]).holds and verify([]).head is None


def test_an_entry_is_canonical_json_and_reads_back_whole() -> None:
    raw = encode(fields(1) | {"details": {"reason": "ünïcode ✓", "b": 1, "a": [1, 2]}}, 1, GENESIS)
    assert raw.isascii() and b'": ' not in raw and b'", "' not in raw  # no spaces of its own
    entry = Entry.parse(raw)
    assert entry.details == {"reason": "ünïcode ✓", "b": 1, "a": [1, 2]}
    assert entry.hash == digest(raw) and entry.time() == datetime(2025, 6, 1, 12, 0, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="not JSON"):
        Entry.parse(b"{half")
    with pytest.raises(ValueError, match="not an audit entry"):
        Entry.parse(b'{"seq": 1}')
    with pytest.raises(ValueError, match="valid 'verified'"):
        Entry.parse(encode(fields(1) | {"verified": "yes"}, 1, GENESIS))


def test_an_edited_entry_is_named_even_when_its_json_still_reads() -> None:
    stored = chain(5)
    edited = stored[2].raw.replace(b'"n":3', b'"n":30')
    assert edited != stored[2].raw
    stored[2] = Stored("line 3", edited)
    report = verify(stored, head(chain(5)))
    assert report.problems == ["entry 3 was changed (entry 4 names another hash for it)"]
    assert len(report.entries) == 5  # still shown, with the break named


def test_a_removed_entry_is_named_in_the_middle_and_at_either_end() -> None:
    full = chain(5)
    middle = full[:2] + full[3:]
    assert verify(middle, head(full)).problems == ["entry 3 is missing before line 4: removed"]
    two = full[:1] + full[3:]
    assert verify(two, head(full)).problems == ["entries 2 to 3 are missing before line 4: removed"]
    first = full[1:]
    assert verify(first, head(full)).problems == ["entry 1 is missing before line 2: removed"]
    last = full[:4]
    assert verify(last, head(full)).problems == [
        "the log ends at entry 4, but entry 5 was written (its head record says so): "
        "entry 5 removed"
    ]


def test_the_last_entry_edited_is_found_by_its_head_and_only_by_it() -> None:
    stored = chain(4)
    recorded = head(stored)
    stored[3] = Stored("line 4", stored[3].raw.replace(b'"ana"', b'"eve"'))
    assert verify(stored).holds  # nothing follows it: the chain alone cannot tell
    assert verify(stored, recorded).problems == [
        "entry 4 was changed (its hash is not the one recorded when it was written)"
    ]


def test_a_damaged_copied_or_reordered_entry_is_named() -> None:
    stored = chain(4)
    damaged = [*stored[:1], Stored("line 2", b"\x00garbage"), *stored[2:]]
    problems = verify(damaged, head(stored)).problems
    assert problems[0].startswith("line 2 (entry 2) is not JSON")
    assert problems[1:] == ["entry 2 was changed (entry 3 names another hash for it)"]
    copied = [*stored[:3], stored[1], stored[3]]
    assert verify(copied, head(stored)).problems[0] == (
        "line 2 says it is entry 2, where entry 4 belongs: an entry was copied, moved or edited"
    )
    swapped = [stored[0], stored[2], stored[1], stored[3]]
    assert not verify(swapped, head(stored)).holds


def test_a_log_rebuilt_from_an_edited_entry_on_is_found_by_its_head() -> None:
    """Someone edits entry 2 and writes every later entry again with matching hashes: the chain
    holds by itself, the head recorded when entry 4 was written does not match."""
    original = chain(4)
    rebuilt: list[Stored] = []
    prev = GENESIS
    for n in range(1, 5):
        raw = encode(fields(n) | ({"actor": "eve"} if n == 2 else {}), n, prev)
        rebuilt.append(Stored(f"line {n}", raw))
        prev = digest(raw)
    assert verify(rebuilt).holds
    assert verify(rebuilt, head(original)).problems == [
        "entry 4 was changed (its hash is not the one recorded when it was written)"
    ]


def test_since_takes_a_span_a_date_or_a_time_and_refuses_the_rest() -> None:
    now = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
    assert since_time("30m", now) == now - timedelta(minutes=30)
    assert since_time("12h", now) == now - timedelta(hours=12)
    assert since_time("7d", now) == now - timedelta(days=7)
    assert since_time("2025-06-01") == datetime(2025, 6, 1, tzinfo=UTC)
    assert since_time("2025-06-01T12:30") == datetime(2025, 6, 1, 12, 30, tzinfo=UTC)
    zoned = since_time("2025-06-01T12:30+02:00")
    assert zoned == datetime(2025, 6, 1, 10, 30, tzinfo=UTC)
    for bad in ("yesterday", "7 days", "-3h", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a time"):
            since_time(bad)


def test_an_approval_names_who_answered_at_a_command_line_and_nobody_in_the_ui() -> None:
    at_terminal = decider("command line --yes (ana@laptop)")
    assert (at_terminal.name, at_terminal.via, at_terminal.host) == (
        "ana",
        "command line --yes",
        "laptop",
    )
    assert (at_terminal.signer, at_terminal.verified) == (None, False)
    in_ui = decider("the Prefect UI or API")
    assert (in_ui.name, in_ui.via) == ("unknown", "the Prefect UI or API")
    assert decider("timeout").name == "unknown"
