"""Flyway's conventions without a server: versions and names as Flyway reads them, its checksum
(checked against the values Flyway itself recorded), repeatable migrations in the plan, and what
adopting a `flyway_schema_history` makes of its rows."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from stackflow.migrator.admin import MigrationStatus, compute_status
from stackflow.migrator.errors import (
    MigrationChecksumError,
    MigrationFailedBefore,
    MigrationFileError,
    MigrationMissingFiles,
)
from stackflow.migrator.files import flyway_checksum, load_migrations
from stackflow.migrator.flyway import FlywayRow, adopt
from stackflow.migrator.history import HistoryRecord
from stackflow.migrator.names import parse_name
from stackflow.migrator.plan import compute_plan
from stackflow.migrator.version import Version, VersionError
from stackflow.schema_history import latest_version
from tests.fixtures.flyway import FLYWAY_CHECKSUMS, FLYWAY_FILES, FLYWAY_ORDER, write_flyway_folder

pytestmark = pytest.mark.unit
WHEN = datetime(2025, 1, 2, 3, 4, 5)


def v(text: str) -> Version:
    return Version.parse(text)


# --- versions and names -----------------------------------------------------------------------


def test_versions_compare_part_by_part_as_numbers() -> None:
    ordered = ["1", "1.1", "1.2", "1.10", "2", "2.0.1", "10"]
    assert sorted((v(t) for t in reversed(ordered)), key=lambda x: x.parts) == [
        v(t) for t in ordered
    ]
    assert v("1_1") == v("1.1") and str(v("1_1")) == "1.1"  # recorded as Flyway records it
    assert v("001") == v("1") == 1 and str(v("001")) == "001"
    assert v("2.0") == v("2") and v("1.10") > v("1.9") and v("1.0.1") > v("1")
    assert v("1.1").canonical == "1.1" and v("2.0.0").canonical == "2"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1.a", "part 2 of the version '1.a', 'a', is not a number"),
        ("1..2", "part 2 of the version '1..2' is empty"),
        ("2.", "part 2 of the version '2.' is empty"),
        ("\u0661", "is not a number (versions are ASCII digits 0-9)"),
        ("", "the version is empty"),
        ("1." * 30 + "1", "longer than 50 characters"),
    ],
)
def test_a_bad_version_names_the_part_that_is_wrong(text: str, said: str) -> None:
    with pytest.raises(VersionError) as info:
        v(text)
    assert said in str(info.value)


@pytest.mark.parametrize(
    ("name", "version", "description"),
    [
        ("V1__create.sql", "1", "create"),
        ("V1.1__add_index.sql", "1.1", "add index"),
        ("V1_1__add index.sql", "1.1", "add index"),
        ("V2.0.1__x.sql", "2.0.1", "x"),
        ("V1__my.table.v2.sql", "1", "my.table.v2"),
        ("V3__two__separators.sql", "3", "two  separators"),
        ("R__views.sql", None, "views"),
        ("R__all the views.v2.sql", None, "all the views.v2"),
    ],
)
def test_names_flyway_accepts(name: str, version: str | None, description: str) -> None:
    parsed = parse_name(name)
    assert (str(parsed.version) if parsed.version else None, parsed.description) == (
        version,
        description,
    )


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("V1.a__x.sql", "part 2 of the version '1.a', 'a', is not a number"),
        ("V__x.sql", "the version is missing between V and __"),
        ("V1_create.sql", "no __ (two underscores) between the version and the description"),
        ("V1__.sql", "the description after __ is empty"),
        ("R1__x.sql", "a repeatable migration has no version"),
        ("v1__x.sql", "the prefix is a lower-case 'v'"),
        ("X1__x.sql", "the prefix is wrong"),
        ("V1__x.SQL", "the suffix is wrong"),
        ("beforeMigrate.sql", "is a Flyway callback (beforeMigrate)"),
        ("afterMigrate__notify.sql", "is a Flyway callback (afterMigrate)"),
        ("U2__undo.sql", "is a Flyway undo migration"),
    ],
)
def test_a_bad_name_is_refused_naming_the_part_that_is_wrong(
    tmp_path: Path, name: str, part: str
) -> None:
    (tmp_path / "V0__fine.sql").write_text("SELECT 1;")
    (tmp_path / name).write_text("SELECT 1;")
    with pytest.raises(MigrationFileError) as info:
        load_migrations(tmp_path)
    message = str(info.value)
    assert name in message and part in message
    if name in ("V1__.sql", "V1__x.SQL", "beforeMigrate.sql"):  # no longer blamed on the version
        assert "version" not in message.split(name, 1)[1].split("; accepted:", 1)[0]


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        ("V1__a.sql", "V1.0__b.sql", "duplicate version 1 "),
        ("V1_1__a.sql", "V1.1__b.sql", "duplicate version 1.1"),
        ("R__a_b.sql", "R__a b.sql", "duplicate repeatable description 'a b'"),
    ],
)
def test_one_version_or_description_per_file(
    tmp_path: Path, first: str, second: str, said: str
) -> None:
    for name in (first, second):
        (tmp_path / name).write_text("SELECT 1;")
    with pytest.raises(MigrationFileError, match=said) as info:
        load_migrations(tmp_path)
    assert first in str(info.value) and second in str(info.value)


def test_a_flyway_folder_loads_in_flyways_order_with_flyways_checksums(tmp_path: Path) -> None:
    """The checksums are the ones Flyway 10 recorded for these bytes (a byte-order mark and CRLF
    line endings included)."""
    found = load_migrations(write_flyway_folder(tmp_path))
    assert [str(m.version) if m.version else m.description for m in found] == FLYWAY_ORDER
    assert {m.filename: m.flyway_checksum for m in found} == FLYWAY_CHECKSUMS
    assert (
        flyway_checksum("A;\r\nB;\n")
        == flyway_checksum("\ufeffA;\nB;")
        != flyway_checksum("A;\nC;")
    )


def test_the_latest_version_is_picked_part_by_part() -> None:
    assert latest_version(["9", "1.10", 10, "1.9", None, "002"]) == "10"
    assert latest_version(["1.9", "1.10", "junk"]) == "1.10"
    assert latest_version([None]) is None


# --- the plan with repeatable files ------------------------------------------------------------


def record(
    version: str | None, description: str, checksum: str, rank: int, state: str = "applied"
) -> HistoryRecord:
    return HistoryRecord(
        Version.of_record(version), description, checksum, WHEN, 1, state != "failed", None,
        state, rank=rank,  # type: ignore[arg-type]
    )  # fmt: skip


def test_repeatable_files_run_after_the_versioned_ones_and_again_when_changed(
    tmp_path: Path,
) -> None:
    files = load_migrations(write_flyway_folder(tmp_path))
    by_key = {m.key: m for m in files}
    fresh = compute_plan([], files, allow_out_of_order=False)
    assert [m.key for m in fresh.pending] == [
        "V1", "V1.1", "V1.2", "V1.10", "V2.0.1", "R__artist albums", "R__procedures",
    ]  # fmt: skip
    history = [record(str(m.version) if m.version else None, m.description, m.checksum, n)
               for n, m in enumerate(files, 1)]  # fmt: skip
    assert compute_plan(history, files, False).pending == []
    # The view's file changed: it runs again (a new row); the versioned files stay applied.
    history[5] = record(None, "artist albums", "0" * 64, 6)
    again = compute_plan(history, files, False)
    assert [m.key for m in again.pending] == ["R__artist albums"]
    status = compute_status(history, files)
    assert status[5] == MigrationStatus(None, "artist albums", "outdated")
    # ... and its later row, with the file's checksum, is the one that counts.
    history.append(record(None, "artist albums", by_key["R__artist albums"].checksum, 8))
    assert compute_plan(history, files, False).pending == []
    # A repeatable file stopped half-way and edited since is refused like a versioned one.
    history.append(record(None, "procedures", "1" * 64, 9, "running"))
    with pytest.raises(MigrationChecksumError, match=r"R__procedures\.sql changed"):
        compute_plan(history, files, False)


def test_an_applied_repeatable_whose_file_is_gone_is_missing(tmp_path: Path) -> None:
    files = load_migrations(write_flyway_folder(tmp_path))
    history = [record(None, "old views", "a" * 64, 1)]
    with pytest.raises(MigrationMissingFiles, match="R__old views"):
        compute_plan(history, files, False)
    assert compute_plan(history, files, False, allow_missing=True).missing == history


# --- adopting Flyway's history ------------------------------------------------------------------


def row(
    rank: int,
    version: str | None,
    description: str,
    script: str,
    checksum: int | None,
    kind: str = "SQL",
    success: bool = True,
) -> FlywayRow:
    return FlywayRow(rank, version, description, kind, script, checksum, WHEN, 5, success)


def flyway_rows() -> list[FlywayRow]:
    """What Flyway recorded after migrating up to 1.10, and the view."""
    rows = [row(1, "0", "<< Flyway Schema Creation >>", "`app`", None, "SCHEMA")]
    for rank, (name, version, description) in enumerate(
        [
            ("V1__create_tables.sql", "1", "create tables"),
            ("V1.1__add index.sql", "1.1", "add index"),
            ("V1_2__seed.data.v2.sql", "1.2", "seed.data.v2"),
            ("V1.10__year column.sql", "1.10", "year column"),
            ("R__artist_albums.sql", None, "artist albums"),
        ],
        2,
    ):
        rows.append(row(rank, version, description, name, FLYWAY_CHECKSUMS[name]))
    return rows


def test_flyways_applied_versions_become_the_history(tmp_path: Path) -> None:
    files = load_migrations(write_flyway_folder(tmp_path))
    adopted = adopt(flyway_rows(), files)
    assert [(r.label, r.state, r.script) for r in adopted] == [
        ("V1", "applied", "V1__create_tables.sql"),
        ("V1.1", "applied", "V1.1__add index.sql"),
        ("V1.2", "applied", "V1_2__seed.data.v2.sql"),
        ("V1.10", "applied", "V1.10__year column.sql"),
        ("R__artist albums", "applied", "R__artist_albums.sql"),
    ]
    plan = compute_plan(adopted, files, False)
    assert [m.key for m in plan.pending] == ["V2.0.1", "R__procedures"]


def test_a_file_changed_since_flyway_applied_it_is_refused(tmp_path: Path) -> None:
    files = load_migrations(write_flyway_folder(tmp_path))
    rows = flyway_rows()
    rows[2] = row(3, "1.1", "add index", "V1.1__add index.sql", 12345)
    with pytest.raises(MigrationChecksumError) as info:
        adopt(rows, files)
    message = str(info.value)
    assert "V1.1__add index.sql" in message and "12345" in message
    assert str(FLYWAY_CHECKSUMS["V1.1__add index.sql"]) in message
    # A repeatable file changed since Flyway ran it is no error: it runs again.
    rows = flyway_rows()
    rows[5] = row(6, None, "artist albums", "R__artist_albums.sql", 999)
    plan = compute_plan(adopt(rows, files), files, False)
    assert [m.key for m in plan.pending] == ["V2.0.1", "R__artist albums", "R__procedures"]


def test_failed_undo_baseline_and_delete_rows(tmp_path: Path) -> None:
    files = load_migrations(write_flyway_folder(tmp_path))
    failed = [*flyway_rows(), row(7, "2.0.1", "albums", "V2.0.1__albums.sql", 1, success=False)]
    with pytest.raises(MigrationFailedBefore, match="recorded by Flyway as failed") as info:
        adopt(failed, files)
    assert "flyway repair" in str(info.value) and "V2.0.1__albums.sql" in str(info.value)
    with pytest.raises(MigrationFailedBefore, match="undo"):
        adopt([*flyway_rows(), row(7, "1.10", "year column", "U1.10__x.sql", 1, "UNDO_SQL")], files)
    baseline = [row(1, "1.2", "<< Flyway Baseline >>", "<< Flyway Baseline >>", None, "BASELINE")]
    plan = compute_plan(adopt(baseline, files), files, False)
    assert [m.key for m in plan.covered] == ["V1", "V1.1"] and plan.version == v("1.2")
    assert [m.key for m in plan.pending][:2] == ["V1.10", "V2.0.1"]
    # `flyway repair` marked the view deleted: it counts as never applied.
    deleted = [
        *flyway_rows(),
        row(7, None, "artist albums", "R__artist_albums.sql", None, "DELETE"),
    ]
    assert "R__artist albums" in [
        m.key for m in compute_plan(adopt(deleted, files), files, False).pending
    ]


def test_the_flyway_files_are_the_ones_flyway_recorded() -> None:
    assert set(FLYWAY_FILES) == set(FLYWAY_CHECKSUMS)
