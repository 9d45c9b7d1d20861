"""The audit log's entries and their chain, whatever holds them.

An entry is one JSON object, stored as the exact bytes written (canonical JSON: sorted keys, no
spaces, ASCII). Each names its position (`seq`, 1, 2, 3, ... with no gap) and the SHA-256 of the
previous entry's stored bytes (`prev`; the first names `GENESIS`). Editing an entry changes its
bytes, so the next entry's `prev` no longer matches; removing one leaves a gap in `seq` and a
`prev` that names bytes no longer there. The last entry has no successor: the log's head (its seq
and hash, kept in stackflow's records after every append) covers it, so an edited or removed last
entry is found too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

GENESIS = "0" * 64  # what the first entry names as the hash before it
FORMAT = 1  # the "format" field: what shape an entry has


def digest(raw: bytes) -> str:
    """The SHA-256 of an entry's stored bytes, as the next entry names it."""
    return hashlib.sha256(raw).hexdigest()


def encode(fields: Mapping[str, Any], seq: int, prev: str) -> bytes:
    """An entry as stored: `fields` with its position and the previous entry's hash.

    Raises:
        TypeError, ValueError: a field is not JSON.
    """
    body = {**fields, "format": FORMAT, "seq": seq, "prev": prev}
    text = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return text.encode("ascii")


@dataclass(frozen=True)
class Stored:
    """One entry as a log holds it: where (a line, a row, an object's key) and its bytes."""

    where: str
    raw: bytes


@dataclass(frozen=True)
class Entry:
    """One entry, read back.

    Attributes:
        seq: its position in the log (1, 2, ...).
        at: when it was written (ISO 8601, UTC).
        action: what was done or decided (`stackflow.audit.Action`'s values).
        environment, stack: what it was done to (None: the whole project).
        actor: who (an OS user, a commit's author, or "unknown"), `via`: through what door,
            `host`: the machine that wrote the entry.
        signer, verified: the key holder of a verified signature (approvals signed with SSH
            keys); None and False until one is checked.
        commit: the project's commit, when known. run: the Prefect flow run, when in one.
        details: what else the action records (never a secret).
        prev: the hash of the entry before it. hash: the hash of this entry's stored bytes.
    """

    seq: int
    at: str
    action: str
    environment: str | None
    stack: str | None
    actor: str
    via: str
    host: str
    signer: str | None
    verified: bool
    commit: str | None
    run: str | None
    details: dict[str, Any]
    prev: str
    hash: str

    @classmethod
    def parse(cls, raw: bytes) -> Entry:
        """An entry back from its stored bytes.

        Raises:
            ValueError: not JSON, or not an entry of this format.
        """
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"not JSON ({exc})") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError("not an audit entry")
        try:
            entry = cls(
                seq=_typed(body, "seq", int),
                at=_typed(body, "at", str),
                action=_typed(body, "action", str),
                environment=_optional(body, "environment"),
                stack=_optional(body, "stack"),
                actor=_typed(body, "actor", str),
                via=_typed(body, "via", str),
                host=_typed(body, "host", str),
                signer=_optional(body, "signer"),
                verified=_typed(body, "verified", bool),
                commit=_optional(body, "commit"),
                run=_optional(body, "run"),
                details=_typed(body, "details", dict),
                prev=_typed(body, "prev", str),
                hash=digest(raw),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"an audit entry without a valid {exc}") from None
        if entry.seq < 1:
            raise ValueError(f"an audit entry at position {entry.seq}")
        return entry

    def time(self) -> datetime:
        """When it was written."""
        return datetime.fromisoformat(self.at)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _typed(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(repr(name))
    return value


def _optional(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(repr(name))
    return value


@dataclass(frozen=True)
class Head:
    """The last entry of a log: its position and its hash."""

    seq: int
    hash: str

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash}


@dataclass
class ChainReport:
    """A whole log read back and checked.

    Attributes:
        entries: every entry that could be read, in order.
        problems: one sentence per break in the chain (empty: it holds).
        head: the log's last entry as read (None: the log is empty).
        anchor: the head recorded when the last entry was written (None: none recorded).
    """

    entries: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    head: Head | None = None
    anchor: Head | None = None

    @property
    def holds(self) -> bool:
        return not self.problems


def verify(stored: Sequence[Stored], anchor: Head | None = None) -> ChainReport:
    """Read `stored` (a log's entries, in the log's order) and check every link, and the last
    entry against `anchor`, the head recorded when it was written."""
    report = ChainReport(anchor=anchor)
    prev, expected = GENESIS, 1
    hashes: dict[int, str] = {}
    for item in stored:
        try:
            entry = Entry.parse(item.raw)
        except ValueError as exc:
            report.problems.append(
                f"{item.where} (entry {expected}) is {exc}: it was edited or damaged"
            )
            hashes[expected] = digest(item.raw)
            prev, expected = hashes[expected], expected + 1
            continue
        if entry.seq > expected:
            missing = (
                f"entry {expected} is"
                if entry.seq == expected + 1
                else f"entries {expected} to {entry.seq - 1} are"
            )
            report.problems.append(f"{missing} missing before {item.where}: removed")
        elif entry.seq < expected:
            report.problems.append(
                f"{item.where} says it is entry {entry.seq}, where entry {expected} belongs: "
                "an entry was copied, moved or edited"
            )
        elif entry.prev != prev:
            what = (
                f"entry {entry.seq - 1} was changed (entry {entry.seq} names another hash for it)"
                if entry.seq > 1
                else "entry 1 names an entry before it: the log's start was removed or edited"
            )
            report.problems.append(what)
        report.entries.append(entry)
        hashes[entry.seq] = entry.hash
        prev, expected = entry.hash, max(entry.seq, expected - 1) + 1
    last = expected - 1
    report.head = Head(last, prev) if last else None
    if anchor is not None:
        if last < anchor.seq:
            gone = (
                f"entry {anchor.seq}"
                if last + 1 == anchor.seq
                else f"entries {last + 1} to {anchor.seq}"
            )
            report.problems.append(
                f"the log ends at entry {last}, but entry {anchor.seq} was written (its head "
                f"record says so): {gone} removed"
            )
        elif hashes.get(anchor.seq) != anchor.hash:
            report.problems.append(
                f"entry {anchor.seq} was changed (its hash is not the one recorded when it was "
                "written)"
            )
    return report
