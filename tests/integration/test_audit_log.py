"""The audit log on all three stores, for real: a folder, the session's PostgreSQL, and S3 on the
local cloud (moto on loopback, not AWS). Writers in several processes at once never take one
position; the whole log reads back in order and its chain holds; an entry edited, removed in the
middle or removed at the end, behind stackflow's back, is named; PostgreSQL itself refuses an
UPDATE or DELETE of the table; and no secret the settings hold reaches the stored bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stackflow.audit import Action, read_log, record
from stackflow.audit.opening import open_audit
from tests import realenv
from tests.fixtures.localcloud import LocalCloud
from tests.fixtures.s3backend import LOCAL_CREDENTIALS, s3_url
from tests.realenv import ROOT

pytestmark = pytest.mark.integration
CANARY = "audit-canary-passphrase-7f3c1d"


@pytest.fixture
def s3_records_url(local_cloud: LocalCloud, local_s3_bucket: str) -> str:
    return s3_url(local_cloud, local_s3_bucket, "team/records")


@pytest.fixture(params=["file", "postgres", "s3"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def records_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store of each kind."""
    if kind == "file":
        return str(tmp_path / "records")
    if kind == "postgres":
        return str(request.getfixturevalue("fresh_database_url"))
    return str(request.getfixturevalue("s3_records_url"))


@pytest.fixture
def settings(records_url: str, tmp_path: Path) -> Iterator[Any]:
    """Settings of a test project whose records (and audit log) are at `records_url`, with a
    state passphrase the log must never hold."""
    from stackflow.settings import get_settings

    environ = {
        "STACKFLOW_PROJECT_DIR": str(realenv.test_project(tmp_path / "project")),
        "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
        "STACKFLOW_RECORDS_URL": records_url,
        "STACKFLOW_STATE_PASSPHRASE": CANARY,
    }
    yield get_settings("dev", environ=environ)


# A writer: appends COUNT entries as NAME to the project's log at URL, as fast as it can.
_WRITER = """
import sys
from stackflow.audit.chain import encode
from stackflow.audit.opening import open_audit
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
log = open_audit(url, "stackflow")
print("ready", flush=True)
sys.stdin.readline()
for i in range(count):
    fields = {
        "at": "2025-06-01T12:00:00+00:00", "action": "run.started", "environment": "dev",
        "stack": None, "actor": name, "via": "test", "host": "here", "signer": None,
        "verified": False, "commit": None, "run": None, "details": {"writer": name, "i": i},
    }
    log.append(lambda seq, prev: encode(fields, seq, prev))
log.close()
print("done", flush=True)
"""


@pytest.mark.faults
def test_writers_in_three_processes_never_take_one_position(records_url: str) -> None:
    env = {**os.environ, **LOCAL_CREDENTIALS, "PYTHONPATH": str(ROOT)}
    count, names = 8, ("a", "b", "c")
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, records_url, name, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for name in names
    ]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        for writer in writers:  # all go at once
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "done"
    finally:
        for writer in writers:
            writer.wait(timeout=120)
    from stackflow.audit.chain import Entry, verify

    log = open_audit(records_url, "stackflow")
    try:
        stored = log.entries()
    finally:
        log.close()
    report = verify(stored)
    assert report.holds, report.problems
    entries = [Entry.parse(s.raw) for s in stored]
    assert [e.seq for e in entries] == list(range(1, count * len(names) + 1))
    written = sorted((e.details["writer"], e.details["i"]) for e in entries)
    assert written == sorted((n, i) for n in names for i in range(count))


def _tamper(kind: str, records_url: str, log_where: str) -> Any:
    """The store behind stackflow's back: (edit seq N's text, delete seq N)."""
    if kind == "file":
        path = Path(log_where)

        def line_of(lines: list[bytes], seq: int) -> int:
            [index] = [i for i, line in enumerate(lines) if f'"seq":{seq},'.encode() in line]
            return index

        def edit(seq: int, old: bytes, new: bytes) -> None:
            lines = path.read_bytes().split(b"\n")
            index = line_of(lines, seq)
            assert old in lines[index]
            lines[index] = lines[index].replace(old, new)
            path.write_bytes(b"\n".join(lines))

        def delete(seq: int) -> None:
            lines = path.read_bytes().split(b"\n")
            del lines[line_of(lines, seq)]
            path.write_bytes(b"\n".join(lines))

        return edit, delete
    if kind == "postgres":
        import psycopg

        from stackflow.backends.postgres import postgres_location

        conninfo = postgres_location(records_url).conninfo

        def as_owner(statement: str, params: tuple[Any, ...]) -> None:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute(
                    "ALTER TABLE stackflow_audit DISABLE TRIGGER stackflow_audit_append_only"
                )
                conn.execute(statement, params)
                conn.execute(
                    "ALTER TABLE stackflow_audit ENABLE TRIGGER stackflow_audit_append_only"
                )

        def edit(seq: int, old: bytes, new: bytes) -> None:
            as_owner(
                "UPDATE stackflow_audit SET entry = replace(entry, %s, %s) WHERE seq = %s",
                (old.decode(), new.decode(), seq),
            )

        def delete(seq: int) -> None:
            as_owner("DELETE FROM stackflow_audit WHERE seq = %s", (seq,))

        return edit, delete
    from stackflow.backends.s3 import s3_location

    location = s3_location(records_url)
    client = location.client()
    key = f"{location.prefix}projects/stackflow/audit/{{:012d}}.audit"

    def edit(seq: int, old: bytes, new: bytes) -> None:
        body = client.get_object(Bucket=location.bucket, Key=key.format(seq))["Body"].read()
        assert old in body
        client.put_object(Bucket=location.bucket, Key=key.format(seq), Body=body.replace(old, new))

    def delete(seq: int) -> None:
        client.delete_object(Bucket=location.bucket, Key=key.format(seq))

    return edit, delete


def test_an_entry_edited_or_removed_behind_stackflows_back_is_named(
    kind: str, records_url: str, settings: Any
) -> None:
    for n in range(1, 7):
        record(
            settings,
            Action.RUN_STARTED,
            environment="dev",
            details={"n": n, "note": f"the passphrase is {CANARY}"},
        )
    report, where = read_log(settings)
    assert report.holds, report.problems
    assert [e.details["n"] for e in report.entries] == [1, 2, 3, 4, 5, 6]
    assert report.anchor == report.head and report.head is not None and report.head.seq == 6
    first = report.entries[0]
    assert first.details["note"] == "the passphrase is [secret]"
    assert (first.actor, first.via, first.signer, first.verified) == (
        os_user(),
        "command line",
        None,
        False,
    )
    log = open_audit(records_url, "stackflow")
    try:
        assert all(CANARY.encode() not in s.raw for s in log.entries())
    finally:
        log.close()

    edit, delete = _tamper(kind, records_url, where)
    edit(3, b'"n":3', b'"n":33')
    assert read_log(settings)[0].problems == [
        "entry 3 was changed (entry 4 names another hash for it)"
    ]
    edit(3, b'"n":33', b'"n":3')  # put back byte for byte: the chain holds again
    assert read_log(settings)[0].holds
    delete(4)
    assert [p.split(" missing")[0] for p in read_log(settings)[0].problems] == ["entry 4 is"]
    delete(6)  # the last one: only its head says it was there
    problems = read_log(settings)[0].problems
    assert problems[-1] == (
        "the log ends at entry 5, but entry 6 was written (its head record says so): entry 6 "
        "removed"
    )


def test_postgres_refuses_to_update_or_delete_an_entry(
    fresh_database_url: str, tmp_path: Path
) -> None:
    """The table is insert-only for everyone who has not lifted its trigger first."""
    import psycopg

    from stackflow.audit.chain import encode
    from stackflow.backends.postgres import postgres_location

    log = open_audit(fresh_database_url, "stackflow")
    try:
        log.append(lambda seq, prev: encode({"action": "run.started"}, seq, prev))
    finally:
        log.close()
    with psycopg.connect(postgres_location(fresh_database_url).conninfo, autocommit=True) as conn:
        for statement in (
            "UPDATE stackflow_audit SET entry = 'x'",
            "DELETE FROM stackflow_audit",
            "TRUNCATE stackflow_audit",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(statement)
        assert conn.execute("SELECT count(*) FROM stackflow_audit").fetchone() == (1,)


def os_user() -> str:
    from stackflow.audit.who import os_user as user

    return user()
