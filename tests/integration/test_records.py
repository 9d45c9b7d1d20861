"""stackflow's records on all three stores, for real: a folder, the session's PostgreSQL, and S3 on
the local cloud (moto on loopback, not AWS). Compare-and-set holds between processes: of two that
race to create a record, or to replace the same version, exactly one wins."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackflow.backends import open_records
from stackflow.records import (
    ABSENT,
    DamagedRecord,
    RecordConflict,
    RecordKeyError,
    Records,
    RecordsUnavailable,
)
from tests.fixtures.localcloud import LocalCloud
from tests.fixtures.s3backend import LOCAL_CREDENTIALS, s3_url
from tests.realenv import ROOT

pytestmark = pytest.mark.integration


@pytest.fixture
def s3_records_url(local_cloud: LocalCloud, local_s3_bucket: str) -> str:
    return s3_url(local_cloud, local_s3_bucket, "team/records")


@pytest.fixture(params=["file", "postgres", "s3"])
def records_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store of each kind."""
    kind = request.param
    if kind == "file":
        return str(tmp_path / "records")
    if kind == "postgres":
        return str(request.getfixturevalue("fresh_database_url"))
    return str(request.getfixturevalue("s3_records_url"))


@pytest.fixture
def store(records_url: str) -> Iterator[Records]:
    opened = open_records(records_url)
    try:
        yield opened
    finally:
        opened.close()


def test_create_replace_and_delete_compare_versions(store: Records) -> None:
    key = "environments/pr-7"
    assert store.get(key) is None
    v1 = store.put(key, {"kind": "ephemeral", "ttl_h": 4}, expect_version=ABSENT)
    assert store.get(key) == ({"kind": "ephemeral", "ttl_h": 4}, v1)

    with pytest.raises(RecordConflict) as created_twice:
        store.put(key, {"kind": "other"}, expect_version=ABSENT)
    assert (created_twice.value.expected, created_twice.value.found) == (None, v1)

    v2 = store.put(key, {"kind": "ephemeral", "ttl_h": 8}, expect_version=v1)
    assert v2 > v1
    with pytest.raises(RecordConflict) as stale:
        store.put(key, {"kind": "stale"}, expect_version=v1)
    assert (stale.value.expected, stale.value.found) == (v1, v2)
    value, version = store.get(key) or ({}, 0)
    assert (value, version) == ({"kind": "ephemeral", "ttl_h": 8}, v2)

    v3 = store.put(key, {"kind": "ephemeral", "ttl_h": 1}, expect_version=None)
    assert v3 > v2
    with pytest.raises(RecordConflict):
        store.delete(key, expect_version=v2)
    assert store.delete(key, expect_version=v3) is True
    assert store.get(key) is None
    assert store.delete(key) is False
    with pytest.raises(RecordConflict) as gone:
        store.delete(key, expect_version=v3)
    assert gone.value.found is None
    with pytest.raises(RecordConflict):
        store.put(key, {"kind": "late"}, expect_version=v3)


def test_a_record_created_again_never_repeats_an_earlier_version(store: Records) -> None:
    """A writer holding a version read before a delete cannot overwrite the new record."""
    first = store.put("approvals/dev", {"by": "ana"}, expect_version=ABSENT)
    store.delete("approvals/dev", expect_version=first)
    second = store.put("approvals/dev", {"by": "ben"}, expect_version=ABSENT)
    assert second != first
    with pytest.raises(RecordConflict):
        store.put("approvals/dev", {"by": "ana again"}, expect_version=first)
    assert store.put("approvals/dev", {"by": "no version"}, expect_version=None) > second


def test_list_by_prefix(store: Records) -> None:
    for key in ("environments/dev", "environments/pr-1", "fingerprints/dev/networking", "top"):
        store.put(key, {"k": key}, expect_version=ABSENT)
    assert store.list() == [
        "environments/dev",
        "environments/pr-1",
        "fingerprints/dev/networking",
        "top",
    ]
    assert store.list("environments/") == ["environments/dev", "environments/pr-1"]
    assert store.list("fingerprints/dev") == ["fingerprints/dev/networking"]
    assert store.list("nothing/") == []


@pytest.mark.parametrize(
    "key", ["", "a//b", "../escape", ".hidden", "a/.b", "white space", "x" * 600]
)
def test_keys_outside_the_rule_are_refused(store: Records, key: str) -> None:
    with pytest.raises(RecordKeyError):
        store.put(key, {}, expect_version=None)
    with pytest.raises(RecordKeyError):
        store.get(key)


# A racer: opens the store, says "ready", then for each line "create KEY -" or "cas KEY VERSION"
# tries that write and answers "won VERSION" or "lost".
_RACER = """
import sys
from stackflow.backends import open_records
from stackflow.records import ABSENT, RecordConflict
store = open_records(sys.argv[1])
me = sys.argv[2]
store.list()
print("ready", flush=True)
for line in sys.stdin:
    op, key, arg = line.split()
    try:
        expect = ABSENT if op == "create" else int(arg)
        print("won", store.put(key, {"by": me}, expect_version=expect), flush=True)
    except RecordConflict:
        print("lost", flush=True)
"""


@pytest.mark.faults
def test_two_processes_racing_exactly_one_wins(store: Records, records_url: str) -> None:
    env = {**os.environ, **LOCAL_CREDENTIALS, "PYTHONPATH": str(ROOT)}
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, records_url, name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for name in ("a", "b")
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"

        def race(line: str) -> list[str]:
            for racer in racers:  # both get the line before either answer is read
                assert racer.stdin is not None
                racer.stdin.write(line + "\n")
                racer.stdin.flush()
            return [racer.stdout.readline().strip() for racer in racers if racer.stdout]

        for round_ in range(8):
            key = f"race/r{round_}"
            created = race(f"create {key} -")
            assert sorted(a.split()[0] for a in created) == ["lost", "won"], created
            record = store.get(key)
            assert record is not None
            winner = "ab"[[a.split()[0] for a in created].index("won")]
            assert record.value == {"by": winner}
            replaced = race(f"cas {key} {record.version}")
            assert sorted(a.split()[0] for a in replaced) == ["lost", "won"], replaced
            after = store.get(key)
            assert after is not None and after.version == int(
                next(a for a in replaced if a.startswith("won")).split()[1]
            )
    finally:
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.close()
            racer.wait(timeout=60)


def test_a_damaged_file_record_names_the_file_and_what_to_do(tmp_path: Path) -> None:
    store = open_records(f"file://{tmp_path / 'records'}")
    store.put("environments/dev", {"kind": "dev"}, expect_version=ABSENT)
    path = tmp_path / "records" / "environments" / "dev.json"
    path.write_text('{"half": ')
    with pytest.raises(DamagedRecord) as caught:
        store.get("environments/dev")
    assert str(path) in str(caught.value) and "delete it" in str(caught.value)
    with pytest.raises(DamagedRecord):
        store.put("environments/dev", {"kind": "dev"}, expect_version=None)
    assert path.read_text() == '{"half": '  # nothing was changed
    assert store.delete("environments/dev") is True
    assert store.put("environments/dev", {"kind": "dev"}, expect_version=ABSENT) > 0
    assert [p.name for p in path.parent.iterdir()] == ["dev.json"]  # no temporary files left


def test_file_records_are_private_to_their_owner(tmp_path: Path) -> None:
    store = open_records(str(tmp_path / "records"))
    store.put("environments/dev", {"kind": "dev"}, expect_version=ABSENT)
    assert (tmp_path / "records").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "records" / "environments" / "dev.json").stat().st_mode & 0o777 == 0o600


def test_an_unreachable_postgres_says_so_without_the_password(tmp_path: Path) -> None:
    store = open_records(f"postgresql://stackflow:hunter22@/stackflow?host={tmp_path}")
    assert "hunter22" not in store.where
    with pytest.raises(RecordsUnavailable) as caught:
        store.get("environments/dev")
    assert "hunter22" not in str(caught.value)
