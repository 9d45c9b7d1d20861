"""Migration files, statement splitting, planning and error classification: no server needed."""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pymysql
import pytest
from pydantic import SecretStr

from stackflow import PROJECT_ROOT
from stackflow.migrator.admin import MigrationStatus, compute_status
from stackflow.migrator.apply import AppliedMigration, MigrateReport
from stackflow.migrator.connection import classify, lock_name
from stackflow.migrator.errors import (
    DatabaseAuthError,
    DatabaseTLSError,
    MigrationChecksumError,
    MigrationFailedBefore,
    MigrationFileError,
    MigrationOrderError,
    MigrationSQLError,
    TransientDatabaseError,
)
from stackflow.migrator.files import FILE_PATTERN, checksum_of, load_migrations
from stackflow.migrator.history import HistoryRecord
from stackflow.migrator.plan import compute_plan
from stackflow.migrator.splitter import split_statements
from stackflow.migrator.target import MysqlTarget
from stackflow.migrator.version import Version

pytestmark = pytest.mark.unit

PASSWORD = "pw-Zq8!never-shown"
TARGET = MysqlTarget("db.example", 3306, "app", SecretStr(PASSWORD), "app")


def write(folder: Path, name: str, sql: str = "CREATE TABLE t (id int);\n") -> Path:
    path = folder / name
    path.write_text(sql)
    return path


def sqls(text: str) -> list[str]:
    return [s.sql for s in split_statements(text)]


# --- loading files ----------------------------------------------------------------------------


def test_loads_files_sorted_by_version_with_checksums(tmp_path: Path) -> None:
    write(tmp_path, "V10__add_index.sql", "CREATE INDEX i ON t (id);")
    write(tmp_path, "V002__create_t.sql")
    write(tmp_path, "README.md", "not a migration")
    write(tmp_path, ".gitkeep", "")
    found = load_migrations(tmp_path)
    assert [(m.version, m.description, m.filename) for m in found] == [
        (2, "create t", "V002__create_t.sql"),
        (10, "add index", "V10__add_index.sql"),
    ]
    assert found[0].checksum == hashlib.sha256(b"CREATE TABLE t (id int);\n").hexdigest()
    assert found[0].sql == "CREATE TABLE t (id int);\n"
    assert found[0].path == tmp_path / "V002__create_t.sql"


def test_the_projects_own_migrations_load() -> None:
    found = load_migrations(PROJECT_ROOT / "migrations")
    assert found[0].version == 1 and found[0].filename == "V001__create_hello_pulumi.sql"
    (statement,) = found[0].statements
    assert "CREATE TABLE IF NOT EXISTS hello_pulumi" in statement.sql
    assert "varchar(14) not null" in statement.sql.lower()


@pytest.mark.parametrize(
    "name",
    [
        "V1_create.sql",
        "V__create.sql",
        "V1__.sql",
        "v1__lowercase_v.sql",
        "create_table.sql",
        "V1__create.SQL",
        "V1__create.sql.bak",
        "V1a__create.sql",
    ],
)
def test_malformed_names_are_refused_naming_file_and_pattern(tmp_path: Path, name: str) -> None:
    write(tmp_path, "V001__fine.sql")
    write(tmp_path, name)
    with pytest.raises(MigrationFileError) as info:
        load_migrations(tmp_path)
    assert name in str(info.value)
    assert FILE_PATTERN in str(info.value)


def test_duplicate_versions_are_refused_even_with_different_padding(tmp_path: Path) -> None:
    write(tmp_path, "V1__first.sql")
    write(tmp_path, "V001__second.sql")
    with pytest.raises(MigrationFileError, match="duplicate version 1") as info:
        load_migrations(tmp_path)
    assert "V1__first.sql" in str(info.value) and "V001__second.sql" in str(info.value)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(MigrationFileError, match="does not exist") as info:
        load_migrations(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(info.value)


def test_empty_folder_and_folder_without_migrations(tmp_path: Path) -> None:
    with pytest.raises(MigrationFileError, match="has no migration files"):
        load_migrations(tmp_path)
    write(tmp_path, "README.md", "docs")
    with pytest.raises(MigrationFileError, match="has no migration files"):
        load_migrations(tmp_path)


@pytest.mark.parametrize(
    "text",
    ["", "   \n\n", "-- only a comment\n", "/* block */ ; ;\n# hash comment", ";"],
)
def test_file_without_statements_is_malformed(tmp_path: Path, text: str) -> None:
    write(tmp_path, "V1__nothing.sql", text)
    with pytest.raises(MigrationFileError, match="no SQL statements") as info:
        load_migrations(tmp_path)
    assert "V1__nothing.sql" in str(info.value)


def test_unreadable_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "V1__latin1.sql").write_bytes(b"INSERT INTO t VALUES ('caf\xe9');")
    with pytest.raises(MigrationFileError, match="cannot be read as UTF-8") as info:
        load_migrations(tmp_path)
    assert "V1__latin1.sql" in str(info.value)


def test_folder_named_like_a_migration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "V1__folder.sql").mkdir()
    with pytest.raises(MigrationFileError, match=r"V1__folder\.sql"):
        load_migrations(tmp_path)


def test_checksum_ignores_line_endings_and_bom_but_not_content() -> None:
    assert checksum_of("A;\nB;\n") == checksum_of("A;\r\nB;\r\n") == checksum_of("\ufeffA;\nB;\n")
    assert checksum_of("A;\nB;\n") != checksum_of("A;\nC;\n")


# --- splitting statements ---------------------------------------------------------------------


def test_semicolons_inside_strings_and_identifiers_do_not_split() -> None:
    text = (
        "INSERT INTO t VALUES ('a;b', \"c;d\", 'it''s; fine', 'esc\\'; aped');\n"
        "CREATE TABLE `odd;name` (id int);\n"
    )
    assert sqls(text) == [
        "INSERT INTO t VALUES ('a;b', \"c;d\", 'it''s; fine', 'esc\\'; aped')",
        "CREATE TABLE `odd;name` (id int)",
    ]


def test_semicolons_inside_comments_do_not_split_and_comment_only_statements_drop() -> None:
    text = (
        "-- first; comment\n"
        "# hash; comment\n"
        "CREATE TABLE a (id int); /* trailing; block */\n"
        ";\n"
        "/* only a comment; */;\n"
        "INSERT INTO a VALUES (1) -- tail; comment\n"
        ";\n"
        "-- the end;\n"
    )
    statements = split_statements(text)
    assert [s.number for s in statements] == [1, 2]
    assert statements[0].sql.endswith("CREATE TABLE a (id int)")
    assert statements[1].sql == "INSERT INTO a VALUES (1) -- tail; comment"
    assert [s.line for s in statements] == [3, 6]


def test_procedure_bodies_stay_whole() -> None:
    text = (
        "CREATE PROCEDURE p()\nBEGIN\n  INSERT INTO t VALUES (1);\n  INSERT INTO t VALUES (2);\nEND;\n"
        "SELECT 1;\n"
    )
    first, second = split_statements(text)
    assert first.sql.startswith("CREATE PROCEDURE p()") and first.sql.endswith("END")
    assert first.sql.count("INSERT") == 2
    assert (second.sql, second.line) == ("SELECT 1", 6)


def test_executable_comments_are_statements() -> None:
    assert sqls("/*!40101 SET NAMES utf8mb4 */;\nSELECT 1;") == [
        "/*!40101 SET NAMES utf8mb4 */",
        "SELECT 1",
    ]


def test_the_delimiter_ends_a_statement_and_a_trailing_comment_is_left_out() -> None:
    # As the mysql client does: a comment after the delimiter belongs to no statement.
    assert sqls("CREATE TABLE a (id int); -- note\nINSERT INTO a VALUES (1); # hash\n") == [
        "CREATE TABLE a (id int)",
        "INSERT INTO a VALUES (1)",
    ]


def test_last_statement_needs_no_semicolon() -> None:
    assert sqls("SELECT 1;\nSELECT 2") == ["SELECT 1", "SELECT 2"]


def test_delimiter_without_a_delimiter_is_refused_naming_the_line() -> None:
    with pytest.raises(MigrationFileError, match="DELIMITER needs a delimiter") as info:
        split_statements("SELECT 1;\nDELIMITER\n", source="V3__p.sql")
    assert "V3__p.sql: line 2" in str(info.value)


# --- planning ---------------------------------------------------------------------------------


def migrations_in(tmp_path: Path, *versions: int) -> list:  # type: ignore[type-arg]
    for v in versions:
        write(tmp_path, f"V{v:03d}__step_{v}.sql", f"CREATE TABLE t{v} (id int);")
    return load_migrations(tmp_path)


def record(
    version: int, checksum: str, success: bool = True, error: str | None = None
) -> HistoryRecord:
    return HistoryRecord(
        Version.of_record(version),
        f"step {version}",
        checksum,
        datetime(2025, 1, 2, 3, 4, 5),
        12,
        success,
        error,
    )


def test_plan_is_set_arithmetic(tmp_path: Path) -> None:
    files = migrations_in(tmp_path, 1, 2, 3)
    fresh = compute_plan([], files, allow_out_of_order=False)
    assert [m.version for m in fresh.pending] == [1, 2, 3] and fresh.applied == []
    partial = compute_plan([record(1, files[0].checksum)], files, allow_out_of_order=False)
    assert [m.version for m in partial.pending] == [2, 3] and len(partial.applied) == 1
    done = compute_plan(
        [record(m.version, m.checksum) for m in files], files, allow_out_of_order=False
    )
    assert done.pending == [] and len(done.applied) == 3


def test_plan_refuses_a_changed_file_naming_it(tmp_path: Path) -> None:
    files = migrations_in(tmp_path, 1, 2)
    with pytest.raises(MigrationChecksumError, match="changed after it was applied") as info:
        compute_plan([record(1, files[0].checksum), record(2, "0" * 64)], files, False)
    assert str(files[1].path) in str(info.value)


def test_plan_refuses_a_failed_record_and_says_how_to_repair(tmp_path: Path) -> None:
    files = migrations_in(tmp_path, 1, 2)
    history = [
        record(1, files[0].checksum),
        record(2, files[1].checksum, False, "statement 1: boom"),
    ]
    with pytest.raises(MigrationFailedBefore) as info:
        compute_plan(history, files, False)
    message = str(info.value)
    assert "V2" in message and str(files[1].path) in message and "boom" in message
    assert "python flows/run.py migrate --repair" in message and "check the schema" in message


def test_plan_refuses_out_of_order_unless_allowed(tmp_path: Path) -> None:
    files = migrations_in(tmp_path, 1, 2, 3)
    history = [record(1, files[0].checksum), record(3, files[2].checksum)]
    with pytest.raises(MigrationOrderError, match="below the latest applied version 3") as info:
        compute_plan(history, files, False)
    assert str(files[1].path) in str(info.value) and "--allow-out-of-order" in str(info.value)
    assert "allow_out_of_order = true under [migrations]" in str(info.value)
    assert [m.version for m in compute_plan(history, files, True).pending] == [2]


def test_status_states(tmp_path: Path) -> None:
    files = migrations_in(tmp_path, 1, 2, 3, 4)
    history = [
        record(1, files[0].checksum),
        record(2, "f" * 64),
        record(3, files[2].checksum, success=False, error="x"),
        record(9, "a" * 64),
    ]
    assert compute_status(history, files) == [
        MigrationStatus(1, "step 1", "applied"),
        MigrationStatus(2, "step 2", "changed"),
        MigrationStatus(3, "step 3", "failed"),
        MigrationStatus(4, "step 4", "pending"),
        MigrationStatus(9, "step 9", "missing"),
    ]


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [2003, 2005, 2006, 2013, 1205, 1213, 1040])
def test_transient_codes(code: int) -> None:
    err = classify(pymysql.err.OperationalError(code, f"boom with {PASSWORD}"), TARGET)
    assert isinstance(err, TransientDatabaseError)
    assert PASSWORD not in str(err) and "app@db.example:3306/app" in str(err)


@pytest.mark.parametrize("code", [1045, 1044])
def test_access_denied_is_an_auth_error_naming_user_and_host(code: int) -> None:
    err = classify(
        pymysql.err.OperationalError(
            code, "Access denied for user 'app'@'10.0.0.9' (using password: YES)"
        ),
        TARGET,
    )
    assert isinstance(err, DatabaseAuthError)
    assert "app@db.example" in str(err) and PASSWORD not in str(err)


def test_other_server_errors_are_sql_errors() -> None:
    err = classify(
        pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax"), TARGET
    )
    assert isinstance(err, MigrationSQLError) and "(1064)" in str(err)


def test_socket_and_closed_connection_errors_are_transient() -> None:
    assert isinstance(classify(ConnectionResetError("reset"), TARGET), TransientDatabaseError)
    assert isinstance(classify(pymysql.err.InterfaceError(0, ""), TARGET), TransientDatabaseError)


def test_tls_failures_are_not_transient() -> None:
    err = classify(
        pymysql.err.OperationalError(2026, "SSL is required but the server doesn't support it")
    )
    assert isinstance(err, DatabaseTLSError) and "STACKFLOW_MIGRATIONS_TLS_CA" in str(err)


def test_lock_names_fit_mysqls_limit() -> None:
    assert lock_name("app") == "stackflow_migrate_app"
    assert len(lock_name("x" * 64)) <= 64 and lock_name("x" * 64) != lock_name("y" * 64)


# --- the Prefect task's pure parts and the CLI --------------------------------------------------


def test_artifact_markdown_lists_versions_and_durations_without_credentials() -> None:
    from tasks.migrate import migrations_artifact_markdown

    report = MigrateReport(
        [AppliedMigration(1, "create t", "V001__create_t.sql", 1, 0.1234)],
        already_applied=4,
        duration_s=0.5,
    )
    text = migrations_artifact_markdown(report, "db.example:3306/app", "dev")
    assert "| 1 | create t | `V001__create_t.sql` | 1 | 0.123 |" in text
    assert "4 applied before" in text and "Schema migrations: dev" in text
    assert PASSWORD not in text and "app@" not in text
    assert "up to date" in migrations_artifact_markdown(MigrateReport(already_applied=4))


def test_retry_condition_retries_only_transient_database_errors() -> None:
    from prefect.states import Completed, Failed

    from tasks.migrate import retry_if_transient_database, run_migrations

    def retried(state: object) -> bool:
        return retry_if_transient_database(run_migrations, None, state)  # type: ignore[arg-type]

    assert retried(Failed(data=TransientDatabaseError("gone away")))
    assert not retried(Failed(data=DatabaseAuthError("access denied")))
    assert not retried(Failed(data=MigrationSQLError("bad statement")))
    assert not retried(Completed(data=None))
    assert run_migrations.retry_condition_fn is retry_if_transient_database
    # how often and how long come from the settings' RetryPolicy, never from the decorator: by
    # default three retries, delays drawn with +-50% jitter (two runs retrying drift apart)
    from stackflow.retry import migration_policy
    from stackflow.settings import MigrationSettings

    assert run_migrations.retries == 0  # the decorator carries no number
    policy = migration_policy(MigrationSettings().retries)
    assert (policy.retries, policy.jitter) == (3, 0.5)
    retried_task = run_migrations.with_options(**policy.task_options())
    assert (
        retried_task.retries == 3 and retried_task.retry_condition_fn is retry_if_transient_database
    )
    delays = retried_task.retry_delay_seconds
    assert isinstance(delays, list) and len(delays) == 3
    for delay, base in zip(delays, policy.base_delays(), strict=True):
        assert base * 0.5 <= delay <= base * 1.5


def cli_args(*argv: str) -> argparse.Namespace:
    from cli.commands.migrate import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_options() -> None:
    args = cli_args("--dir", "db/migrations", "--status", "--allow-out-of-order")
    assert args.dir == Path("db/migrations") and args.status and args.allow_out_of_order
    assert not args.repair and args.database_url is None
    with pytest.raises(SystemExit):
        cli_args("--status", "--repair")


def test_cli_without_a_database_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.commands.migrate import run
    from stackflow.settings import get_settings

    monkeypatch.delenv("STACKFLOW_DATABASE_URL", raising=False)
    err = io.StringIO()
    assert run(cli_args(), get_settings(), out=io.StringIO(), err=err) == 2
    assert err.getvalue().startswith("error: no database to migrate")
    assert "STACKFLOW_DATABASE_URL" in err.getvalue()


def test_cli_bad_url_never_echoes_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.commands.migrate import run
    from stackflow.settings import get_settings

    monkeypatch.setenv("STACKFLOW_DATABASE_URL", f"postgres://app:{PASSWORD}@db:5432/app")
    err = io.StringIO()
    assert run(cli_args(), get_settings(), out=io.StringIO(), err=err) == 2
    assert "mysql://" in err.getvalue() and PASSWORD not in err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1


def test_cli_module_does_not_import_prefect() -> None:
    code = "import sys, cli.commands.migrate; sys.exit('prefect' in sys.modules or 'pymysql' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT).returncode == 0
