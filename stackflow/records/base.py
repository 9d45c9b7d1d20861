"""What every store of stackflow's records offers, and the one way a record is stored.

A record is a JSON object under a key ("environments/pr-124", "fingerprints/dev/networking") with a
version that changes on every write. Writes are compare-and-set:

    put(key, value, expect_version=ABSENT)   create it; RecordConflict if it exists
    put(key, value, expect_version=7)        replace version 7; RecordConflict if it is not at 7
    put(key, value, expect_version=None)     write whatever is there (still atomic)
    delete(key, expect_version=7)            delete version 7; RecordConflict otherwise

Versions only grow while a record lives, and a re-created record starts from the clock (in
microseconds), so a writer holding a version read before a delete cannot overwrite the new one.

Records are stored in plaintext: NEVER put a secret in one. A caller with a secret to keep seals it
first (`stackflow.secretbox.SecretBox.seal`) and stores the token.
"""

from __future__ import annotations

import enum
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple, Protocol

from stackflow.records.errors import DamagedRecord, RecordConflict, RecordKeyError

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_KEY = 512
FORMAT = 1  # the "stackflow_record" field: what shape a stored record has


class Absent(enum.Enum):
    """The type of ABSENT (an enum member, so `expect_version is ABSENT` narrows the type)."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT
"""expect_version=ABSENT: create the record only if it does not exist."""

Expect = int | None | Absent


class Record(NamedTuple):
    """A record's value and version; unpacks as (value, version)."""

    value: dict[str, Any]
    version: int


class Records(Protocol):
    """A store of stackflow's records (a folder, a PostgreSQL table or S3 objects)."""

    @property
    def where(self) -> str:
        """Where the records live, as a user may be shown it (no password)."""
        ...

    def get(self, key: str) -> Record | None:
        """The record under `key`, or None if there is none.

        Raises:
            RecordKeyError: the key is not accepted.
            DamagedRecord: what is stored is not a record; names where and what to do.
            RecordsUnavailable: the store did not answer.
        """
        ...

    def put(self, key: str, value: Mapping[str, Any], *, expect_version: Expect) -> int:
        """Write `value` under `key` if the record is as expected (see the module); atomic.

        Returns:
            The record's new version.

        Raises:
            RecordConflict: the record is not as expected (another writer won).
            RecordKeyError, DamagedRecord, RecordsUnavailable: as for get.
        """
        ...

    def delete(self, key: str, *, expect_version: int | None = None) -> bool:
        """Delete the record (only at `expect_version`, when given).

        Returns:
            True if a record was deleted; False if there was none and no version was expected.

        Raises:
            RecordConflict: a version was expected and the record is not at it (or is gone).
        """
        ...

    def list(self, prefix: str = "") -> list[str]:
        """The keys that start with `prefix`, sorted."""
        ...

    def close(self) -> None:
        """Let go of connections; the store may not be used after."""
        ...


def check_key(key: str) -> str:
    """`key` if it is accepted: '/'-separated segments of letters, digits, '.', '_' and '-',
    each starting with a letter or digit, at most 512 characters in all.

    Raises:
        RecordKeyError: naming the key and the rule.
    """
    if len(key) > MAX_KEY or not all(_SEGMENT.match(s) for s in key.split("/")):
        raise RecordKeyError(
            f"record key {key[:80]!r} is not accepted: '/'-separated segments of letters, digits, "
            f"'.', '_' and '-', each starting with a letter or digit, at most {MAX_KEY} characters"
        )
    return key


def first_version() -> int:
    """The version a created record starts at: the clock in microseconds (see the module)."""
    return time.time_ns() // 1000


def next_version(current: Record | None) -> int:
    """The version a write over `current` gives."""
    return first_version() if current is None else current.version + 1


def encode(value: Mapping[str, Any], version: int) -> bytes:
    """A record as stored (files and S3 objects): JSON with its version and format.

    Raises:
        TypeError: the value is not JSON (a set, bytes, an object).
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"a record's value is a JSON object, not {type(value).__name__}")
    body = {"stackflow_record": FORMAT, "version": version, "value": dict(value)}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def decode(data: bytes, where: str) -> Record:
    """A stored record back.

    Raises:
        DamagedRecord: not JSON, or not a versioned object; names `where` and what to do.
    """
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise damaged(where, f"not JSON ({exc})") from None
    if (
        not isinstance(body, dict)
        or body.get("stackflow_record") != FORMAT
        or not isinstance(body.get("version"), int)
        or not isinstance(body.get("value"), dict)
    ):
        raise damaged(where, "not a stackflow record (a versioned JSON object)")
    return Record(body["value"], body["version"])


def damaged(where: str, what: str) -> DamagedRecord:
    """The error for a damaged record at `where`, saying what to do."""
    return DamagedRecord(
        f"record {where} is damaged: {what}. Restore it from a backup, or delete it to let "
        "stackflow write it afresh (what it recorded is then forgotten); nothing was changed"
    )


def check_expected(key: str, current: Record | None, expect: Expect) -> None:
    """Refuse a write whose expectation `current` does not meet.

    Raises:
        RecordConflict: the record exists where ABSENT was expected, or is not at the version.
    """
    found = None if current is None else current.version
    if expect is None:
        return
    if expect is ABSENT:
        if current is not None:
            raise RecordConflict(key, None, found)
    elif found != expect:
        raise RecordConflict(key, expect, found)


CAS_TRIES = 20  # writers racing on one record: each try reads the winner's value afresh


def update(
    records: Records,
    key: str,
    change: Callable[[dict[str, Any] | None], Mapping[str, Any] | None],
) -> dict[str, Any] | None:
    """Read-modify-write one record with compare-and-set, tried again while other writers win.

    `change(current value or None)` returns the new value, or None to leave the record as it is.
    Returns what was written (None: nothing).

    Raises:
        RecordConflict: other writers won CAS_TRIES times in a row.
    """
    for _ in range(CAS_TRIES):
        found = records.get(key)
        new = change(None if found is None else dict(found.value))
        if new is None:
            return None
        try:
            records.put(key, new, expect_version=ABSENT if found is None else found.version)
            return dict(new)
        except RecordConflict:
            continue
    raise RecordConflict(key, None, None)
