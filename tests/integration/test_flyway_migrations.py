"""Flyway's conventions against a real MariaDB: a Flyway project's folder (dotted versions,
descriptions with spaces and dots, repeatable views and procedures) migrates as Flyway's rules
say; a database Flyway already manages is adopted from its `flyway_schema_history`; a history
table written by the previous release is upgraded in place; names compare as the server compares
them; a DELIMITER never set back and a Flyway placeholder are refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackflow.localdb import grant_database
from stackflow.migrator.admin import status
from stackflow.migrator.connection import connect
from stackflow.migrator.errors import (
    MigrationChecksumError,
    MigrationFailedBefore,
    MigrationFileError,
    MigrationRefused,
)
from stackflow.migrator.files import load_migrations
from stackflow.migrator.splitter import split_statements
from stackflow.migrator.target import MysqlTarget
from stackflow.schema_history import HISTORY_TABLE
from tests.fixtures.flyway import (
    FLYWAY_CHECKSUMS,
    FLYWAY_ORDER,
    flyway_history,
    write_flyway_folder,
)
from tests.fixtures.mariadb import LocalMariaDB
from tests.integration.migration_support import migrate, query, settings, tables, write

pytestmark = pytest.mark.integration


def rows(target: MysqlTarget) -> list[tuple[object, ...]]:
    """The history as Flyway's columns show it: version, description, type, script, checksum."""
    return query(
        target,
        "SELECT version, description, type, script, flyway_checksum, state "
        f"FROM {HISTORY_TABLE} ORDER BY installed_rank",
    )


def run_as_flyway_did(target: MysqlTarget, folder: Path, *names: str) -> None:
    """Run these files' statements directly, as a Flyway run did before the runner took over."""
    with connect(target, settings()) as conn, conn.cursor() as cur:
        for name in names:
            for st in split_statements((folder / name).read_text(encoding="utf-8-sig")):
                cur.execute(st.sql)


def album_count(target: MysqlTarget) -> int:
    with connect(target, settings()) as conn, conn.cursor() as cur:
        cur.execute("CALL album_count(@n)")
        cur.execute("SELECT @n")
        return int(cur.fetchone()[0])  # type: ignore[index]


def test_a_flyway_folder_migrates_as_flyway_orders_and_records_it(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = write_flyway_folder(tmp_path / "sql")
    report = migrate(fresh_schema, settings(), folder)
    applied = [str(a.version) if a.version else a.description for a in report.applied]
    assert applied == FLYWAY_ORDER and str(report.version) == "2.0.1"
    # Recorded as Flyway records them: version text (1_2 -> 1.2), NULL for repeatables, type SQL,
    # the script, and the CRC32 Flyway itself recorded for these files.
    assert rows(fresh_schema) == [
        ("1", "create tables", "SQL", "V1__create_tables.sql", FLYWAY_CHECKSUMS["V1__create_tables.sql"], "applied"),
        ("1.1", "add index", "SQL", "V1.1__add index.sql", FLYWAY_CHECKSUMS["V1.1__add index.sql"], "applied"),
        ("1.2", "seed.data.v2", "SQL", "V1_2__seed.data.v2.sql", FLYWAY_CHECKSUMS["V1_2__seed.data.v2.sql"], "applied"),
        ("1.10", "year column", "SQL", "V1.10__year column.sql", FLYWAY_CHECKSUMS["V1.10__year column.sql"], "applied"),
        ("2.0.1", "albums", "SQL", "V2.0.1__albums.sql", FLYWAY_CHECKSUMS["V2.0.1__albums.sql"], "applied"),
        (None, "artist albums", "SQL", "R__artist_albums.sql", FLYWAY_CHECKSUMS["R__artist_albums.sql"], "applied"),
        (None, "procedures", "SQL", "R__procedures.sql", FLYWAY_CHECKSUMS["R__procedures.sql"], "applied"),
    ]  # fmt: skip
    assert query(fresh_schema, "SELECT name, title FROM artist_albums ORDER BY name") == [
        ("AC/DC", "For Those About To Rock"),
        ("Accept", "Balls to the Wall"),
    ]
    assert album_count(fresh_schema) == 2
    again = migrate(fresh_schema, settings(), folder)
    assert again.applied == [] and again.already_applied == 7


def test_a_changed_repeatable_runs_again_after_new_versions(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = write_flyway_folder(tmp_path / "sql")
    migrate(fresh_schema, settings(), folder)
    write(folder, "V3__label.sql", "ALTER TABLE artist ADD COLUMN label VARCHAR(20) NULL;")
    write(
        folder,
        "R__artist_albums.sql",
        "CREATE OR REPLACE VIEW artist_albums AS\n"
        "  SELECT a.name, b.title, b.year FROM artist a JOIN album b ON b.artist_id = a.id;\n",
    )
    states = {(str(s.version) if s.version else s.description): s.state
              for s in status(fresh_schema, settings(), folder)}  # fmt: skip
    assert states["3"] == "pending" and states["artist albums"] == "outdated"
    assert states["procedures"] == "applied"
    report = migrate(fresh_schema, settings(), folder)
    assert [a.filename for a in report.applied] == ["V3__label.sql", "R__artist_albums.sql"]
    assert query(fresh_schema, "SELECT year FROM artist_albums ORDER BY year") == [(1981,), (1983,)]
    # A new row for the view's second run, as Flyway records it; the first one stays.
    assert [r[0:2] for r in rows(fresh_schema)][-2:] == [("3", "label"), (None, "artist albums")]
    assert len([r for r in rows(fresh_schema) if r[1] == "artist albums"]) == 2
    assert migrate(fresh_schema, settings(), folder).applied == []


def test_a_database_flyway_manages_is_adopted_with_checksums_compared(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = write_flyway_folder(tmp_path / "sql")
    done = ["V1__create_tables.sql", "V1.1__add index.sql", "V1_2__seed.data.v2.sql",
            "V1.10__year column.sql", "R__artist_albums.sql"]  # fmt: skip
    run_as_flyway_did(fresh_schema, folder, *done)
    flyway_history(
        fresh_schema,
        [("0", "<< Flyway Schema Creation >>", "SCHEMA", "`app`", None, True)]
        + [
            (v, d, "SQL", name, FLYWAY_CHECKSUMS[name], True)
            for v, d, name in zip(
                ["1", "1.1", "1.2", "1.10", None],
                ["create tables", "add index", "seed.data.v2", "year column", "artist albums"],
                done,
                strict=True,
            )
        ],
    )
    # Read-only commands show what a run would adopt, and write nothing.
    before = {s.description: s.state for s in status(fresh_schema, settings(), folder)}
    assert before["create tables"] == "applied" and before["albums"] == "pending"
    assert HISTORY_TABLE not in tables(fresh_schema)
    report = migrate(fresh_schema, settings(), folder)
    assert report.adopted_from_flyway == 5 and report.already_applied == 5
    assert [a.filename for a in report.applied] == ["V2.0.1__albums.sql", "R__procedures.sql"]
    assert [r[0] for r in rows(fresh_schema)] == ["1", "1.1", "1.2", "1.10", None, "2.0.1", None]
    assert album_count(fresh_schema) == 2
    assert query(fresh_schema, "SELECT COUNT(*) FROM flyway_schema_history") == [(6,)]  # untouched
    assert migrate(fresh_schema, settings(), folder).applied == []


def test_adopting_refuses_an_edited_file_and_a_failed_row_and_writes_nothing(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = write_flyway_folder(tmp_path / "sql")
    run_as_flyway_did(fresh_schema, folder, "V1__create_tables.sql")
    flyway_history(fresh_schema, [("1", "create tables", "SQL", "V1__create_tables.sql", 77, True)])
    with pytest.raises(MigrationChecksumError) as info:
        migrate(fresh_schema, settings(), folder)
    message = str(info.value)
    assert "V1__create_tables.sql" in message and "checksum 77" in message
    assert str(FLYWAY_CHECKSUMS["V1__create_tables.sql"]) in message
    assert query(fresh_schema, f"SELECT COUNT(*) FROM {HISTORY_TABLE}") == [(0,)]
    assert "album_artist" not in str(query(fresh_schema, "SHOW INDEX FROM album"))
    query(
        fresh_schema,
        "UPDATE flyway_schema_history SET checksum = "
        f"{FLYWAY_CHECKSUMS['V1__create_tables.sql']}, success = 0",
    )
    with pytest.raises(MigrationFailedBefore, match="recorded by Flyway as failed"):
        migrate(fresh_schema, settings(), folder)
    assert query(fresh_schema, f"SELECT COUNT(*) FROM {HISTORY_TABLE}") == [(0,)]


_PREVIOUS_RELEASE_DDL = f"""CREATE TABLE {HISTORY_TABLE} (
    version BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    description VARCHAR(200) NOT NULL,
    checksum CHAR(64) NOT NULL,
    applied_at DATETIME(6) NOT NULL COMMENT 'UTC',
    duration_ms INT UNSIGNED NOT NULL,
    success TINYINT(1) NOT NULL,
    error TEXT NULL,
    state VARCHAR(16) NOT NULL DEFAULT 'applied',
    statements_done INT UNSIGNED NOT NULL DEFAULT 0,
    statements_total INT UNSIGNED NOT NULL DEFAULT 0,
    in_flight_from INT UNSIGNED NULL,
    in_flight_to INT UNSIGNED NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


def test_a_history_keyed_by_integers_is_upgraded_in_place_with_nothing_lost(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    """The previous release's table (an integer version as the key): its rows keep every value,
    gain ranks in version order, and dotted versions and repeatable files fit after it."""
    folder = tmp_path / "sql"
    write(folder, "V9__a.sql", "CREATE TABLE a (id INT);")
    write(folder, "V10__b.sql", "CREATE TABLE b (id INT);")
    files = {m.filename: m for m in load_migrations(folder)}
    query(fresh_schema, _PREVIOUS_RELEASE_DDL)
    query(fresh_schema, "CREATE TABLE a (id INT)")
    query(fresh_schema, "CREATE TABLE b (id INT)")
    for version, name, at in (
        (10, "V10__b.sql", "2024-05-06 07:08:09.5"),
        (9, "V9__a.sql", "2024-01-02 03:04:05.25"),
    ):
        query(
            fresh_schema,
            f"INSERT INTO {HISTORY_TABLE} VALUES ({version}, '{name[:-4]}', '{files[name].checksum}', "
            f"'{at}', 42, 1, NULL, 'applied', 1, 1, NULL, NULL)",
        )  # fmt: skip
    before = query(fresh_schema, f"SELECT version, description, checksum, applied_at, duration_ms, statements_done FROM {HISTORY_TABLE} ORDER BY version")  # fmt: skip
    write(folder, "V10.1__c.sql", "CREATE TABLE c (id INT);")
    write(folder, "R__v.sql", "CREATE OR REPLACE VIEW v AS SELECT id FROM c;")
    report = migrate(fresh_schema, settings(), folder)
    assert [a.filename for a in report.applied] == ["V10.1__c.sql", "R__v.sql"]
    after = query(
        fresh_schema,
        "SELECT CAST(version AS UNSIGNED), description, checksum, applied_at, duration_ms, "
        f"statements_done FROM {HISTORY_TABLE} WHERE installed_rank <= 2 ORDER BY installed_rank",
    )
    assert after == before  # every value kept, ranked by version (9, then 10)
    assert [r[0] for r in rows(fresh_schema)] == ["9", "10", "10.1", None]
    columns = query(
        fresh_schema,
        "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
        f"AND TABLE_NAME = '{HISTORY_TABLE}' AND COLUMN_NAME = 'version'",
    )
    assert columns == [("varchar",)]
    assert migrate(fresh_schema, settings(), folder).applied == []


def test_database_names_compare_as_the_server_compares_them(
    mariadb: LocalMariaDB, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    """This server compares names as written (lower_case_table_names=0, Linux's default): a
    file dropping the same name in other letters drops another database, as the client allows."""
    assert query(fresh_schema, "SELECT @@lower_case_table_names") == [(0,)]
    other = fresh_schema.database.upper()
    with mariadb.admin() as conn:
        grant_database(conn, other, fresh_schema.user)
    folder = tmp_path / "sql"
    write(folder, "V1__t.sql", f"CREATE TABLE t (id INT);\nDROP DATABASE `{other}`;\n")
    assert [a.filename for a in migrate(fresh_schema, settings(), folder).applied] == ["V1__t.sql"]
    with mariadb.admin() as conn, conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        names = {str(r[0]) for r in cur.fetchall()}
    assert fresh_schema.database in names and other not in names
    write(folder, "V2__own.sql", f"DROP DATABASE IF EXISTS `{fresh_schema.database}`;\n")
    with pytest.raises(MigrationRefused, match="drops the database being migrated"):
        migrate(fresh_schema, settings(), folder)
    assert "t" in tables(fresh_schema)


def test_a_delimiter_never_set_back_and_a_placeholder_are_refused_before_anything_runs(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "sql"
    write(folder, "V1__t.sql", "CREATE TABLE t (id INT);")
    write(
        folder,
        "V2__p.sql",
        "DELIMITER $$\nCREATE PROCEDURE p() BEGIN SELECT 1; END$$\n"
        "INSERT INTO t VALUES (1);\nINSERT INTO t VALUES (2);\n",
    )
    with pytest.raises(
        MigrationFileError, match=r"V2__p.sql: line 1: DELIMITER \$\$ is never set back"
    ):
        migrate(fresh_schema, settings(), folder)
    assert tables(fresh_schema) <= {HISTORY_TABLE}  # not even V1 ran
    write(folder, "V2__p.sql", "INSERT INTO t SELECT id FROM ${schema}.t;\n")
    with pytest.raises(MigrationRefused) as info:
        migrate(fresh_schema, settings(), folder)
    assert "V2__p.sql: line 1 holds the Flyway placeholder ${schema}" in str(info.value)
    assert tables(fresh_schema) <= {HISTORY_TABLE}
