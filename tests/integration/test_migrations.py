"""Migrations against a real MariaDB (and the Prefect task through a real flow and server)."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from pydantic import SecretStr

from cli.commands.migrate import add_arguments
from cli.commands.migrate import run as cli_run
from stackflow import PROJECT_ROOT
from stackflow.localprefect import PrefectServer
from stackflow.migrator.admin import repair, status
from stackflow.migrator.apply import MigrateReport, apply_pending
from stackflow.migrator.connection import WaitAttempt, lock_name, wait_for_database
from stackflow.migrator.errors import (
    DatabaseAuthError,
    DatabaseUnreachable,
    DatabaseWaitStopped,
    MigrationChecksumError,
    MigrationFailedBefore,
    MigrationFileError,
    MigrationLockTimeout,
    MigrationOrderError,
    MigrationSQLError,
    TransientDatabaseError,
)
from stackflow.migrator.files import load_migrations
from stackflow.migrator.target import MysqlTarget
from stackflow.processes import free_port
from stackflow.schema_history import HISTORY_TABLE
from stackflow.settings import MigrationSettings, get_settings
from tests.fixtures.mariadb import LocalMariaDB
from tests.integration.migration_support import migrate, query, settings, write

pytestmark = pytest.mark.integration


@pytest.fixture
def three(tmp_path: Path) -> Path:
    """Three files: a table, a row in it, and a second table."""
    folder = tmp_path / "migrations"
    write(
        folder,
        "V001__create_color.sql",
        "CREATE TABLE color (id INT PRIMARY KEY, name VARCHAR(14) NOT NULL);",
    )
    write(folder, "V002__add_red.sql", "INSERT INTO color VALUES (1, 'red');")
    write(folder, "V003__create_shape.sql", "-- shapes\nCREATE TABLE shape (id INT PRIMARY KEY);\n")
    return folder


def history(target: MysqlTarget) -> list[tuple[Any, ...]]:
    # These tests' versions are whole numbers: read as numbers (the column holds Flyway's text).
    return query(
        target,
        f"SELECT CAST(version AS UNSIGNED), success, error FROM {HISTORY_TABLE} "
        "ORDER BY installed_rank",
    )


# --- applying ---------------------------------------------------------------------------------


def test_applies_pending_files_in_order_and_records_them(
    fresh_schema: MysqlTarget, three: Path
) -> None:
    seen: list[str] = []
    report = migrate(fresh_schema, settings(), three, on_applied=lambda a: seen.append(a.filename))
    assert [a.version for a in report.applied] == [1, 2, 3]
    assert seen == ["V001__create_color.sql", "V002__add_red.sql", "V003__create_shape.sql"]
    assert report.already_applied == 0 and report.duration_s > 0
    assert query(fresh_schema, "SELECT id, name FROM color") == [(1, "red")]
    assert history(fresh_schema) == [(1, 1, None), (2, 1, None), (3, 1, None)]
    rows = query(fresh_schema, f"SELECT checksum, duration_ms, applied_at FROM {HISTORY_TABLE}")
    assert all(len(c) == 64 and ms >= 0 and at is not None for c, ms, at in rows)
    assert [s.state for s in status(fresh_schema, settings(), three)] == ["applied"] * 3


def test_the_projects_migrations_create_hello_pulumi(fresh_schema: MysqlTarget) -> None:
    report = migrate(fresh_schema, settings(dir=PROJECT_ROOT / "migrations"))
    assert report.applied[0].filename == "V001__create_hello_pulumi.sql"
    columns = query(fresh_schema, "SHOW COLUMNS FROM hello_pulumi")
    assert [(c[0], c[1], c[2], c[3]) for c in columns] == [
        ("id", "int(11)", "NO", "PRI"),
        ("color", "varchar(14)", "NO", ""),
    ]


def test_noop_rerun_costs_one_query_beyond_the_lock(
    fresh_schema: MysqlTarget, three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(fresh_schema, settings(), three)
    sent: list[tuple[int, str]] = []
    original = getattr(pymysql.connections.Connection, "_execute_command")  # noqa: B009

    # Below Connection.query: sees every command on the wire, including any implicit SET.
    def spy(self: Any, command: int, sql: Any) -> Any:
        sent.append((command, sql.decode() if isinstance(sql, bytes) else str(sql)))
        return original(self, command, sql)

    files = load_migrations(three)
    monkeypatch.setattr(pymysql.connections.Connection, "_execute_command", spy)
    report = apply_pending(fresh_schema, settings(), files, protected=False)
    monkeypatch.undo()
    assert report.applied == [] and report.already_applied == 3
    assert all(command == pymysql.constants.COMMAND.COM_QUERY for command, _ in sent)
    queries = [sql for _, sql in sent]
    # pymysql's connect always sends SET NAMES; then the lock, the one check, the unlock.
    assert queries[0] == "SET NAMES utf8mb4" and "GET_LOCK" in queries[1]
    assert "RELEASE_LOCK" in queries[-1]
    (check,) = queries[2:-1]
    assert check.startswith("SELECT ") and f"FROM {HISTORY_TABLE}" in check


def test_semicolons_in_strings_and_comments_reach_the_server_intact(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(
        folder,
        "V1__tricky.sql",
        "-- setup; with a semicolon in a comment\n"
        "CREATE TABLE note (id INT PRIMARY KEY, body VARCHAR(100)); # hash; comment\n"
        "INSERT INTO note VALUES (1, 'a;b'), (2, \"it's; fine\"), (3, 'x''y;z');\n"
        "/* block; comment */\n"
        "INSERT INTO note VALUES (4, '-- not a comment;');\n"
        "-- trailing comment only;\n",
    )
    report = migrate(fresh_schema, settings(), folder)
    assert report.applied[0].statements == 3
    assert query(fresh_schema, "SELECT body FROM note ORDER BY id") == [
        ("a;b",),
        ("it's; fine",),
        ("x'y;z",),
        ("-- not a comment;",),
    ]


# --- refusing ---------------------------------------------------------------------------------


def test_changed_file_is_refused_naming_the_file(fresh_schema: MysqlTarget, three: Path) -> None:
    migrate(fresh_schema, settings(), three)
    edited = three / "V002__add_red.sql"
    edited.write_text("INSERT INTO color VALUES (1, 'blue');")
    with pytest.raises(MigrationChecksumError) as info:
        migrate(fresh_schema, settings(), three)
    assert str(edited) in str(info.value)
    assert [s.state for s in status(fresh_schema, settings(), three)] == [
        "applied",
        "changed",
        "applied",
    ]


def test_failed_file_is_recorded_refused_then_repaired(
    fresh_schema: MysqlTarget, three: Path
) -> None:
    bad = write(
        three,
        "V004__widen.sql",
        "CREATE TABLE IF NOT EXISTS size (id INT PRIMARY KEY);\nALTER TABLE size ADD COLUMN label NOSUCHTYPE;\n",
    )
    with pytest.raises(MigrationSQLError) as info:
        migrate(fresh_schema, settings(), three)
    message = str(info.value)
    assert "V004__widen.sql" in message and "statement 2 of 2 (line 2)" in message
    assert "NOSUCHTYPE" in message and "failed: (" in message and "--repair" in message
    version, success, error = history(fresh_schema)[-1]
    assert (version, success) == (4, 0) and "statement 2" in error
    # DDL commits: the first statement's table exists even though the file failed.
    assert query(fresh_schema, "SHOW TABLES LIKE 'size'") == [("size",)]

    with pytest.raises(MigrationFailedBefore) as again:
        migrate(fresh_schema, settings(), three)
    assert "V4" in str(again.value) and str(bad) in str(again.value)
    assert "python flows/run.py migrate --repair" in str(again.value)
    assert status(fresh_schema, settings(), three)[-1].state == "failed"

    bad.write_text(
        "CREATE TABLE IF NOT EXISTS size (id INT PRIMARY KEY);\nALTER TABLE size ADD COLUMN label VARCHAR(20);\n"
    )
    assert repair(fresh_schema, settings()) == ["V4"]
    assert repair(fresh_schema, settings()) == []
    report = migrate(fresh_schema, settings(), three)
    assert [a.version for a in report.applied] == [4] and report.already_applied == 3
    assert history(fresh_schema)[-1] == (4, 1, None)


def test_out_of_order_file_is_refused_unless_allowed(
    fresh_schema: MysqlTarget, three: Path
) -> None:
    late = three / "V002__add_red.sql"
    sql = late.read_text()
    late.unlink()
    migrate(fresh_schema, settings(), three)
    late.write_text(sql)
    with pytest.raises(MigrationOrderError) as info:
        migrate(fresh_schema, settings(), three)
    assert str(late) in str(info.value)
    report = migrate(fresh_schema, settings(allow_out_of_order=True), three)
    assert [a.version for a in report.applied] == [2]


def test_malformed_folder_fails_before_connecting(tmp_path: Path) -> None:
    nowhere = MysqlTarget("127.0.0.1", free_port(), "u", SecretStr("p"), "d")
    write(tmp_path, "V1__ok.sql", "SELECT 1;")
    write(tmp_path, "V01__again.sql", "SELECT 1;")
    with pytest.raises(MigrationFileError, match="duplicate version 1"):
        migrate(nowhere, settings(), tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MigrationFileError, match="has no migration files"):
        migrate(nowhere, settings(), tmp_path / "empty")


# --- concurrency and locking ------------------------------------------------------------------


def test_two_runners_at_once_apply_each_file_exactly_once(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__create_runs.sql", "CREATE TABLE runs (n INT);\nDO SLEEP(0.5);\n")
    write(folder, "V2__count_run.sql", "INSERT INTO runs VALUES (1);")
    write(folder, "V3__create_other.sql", "CREATE TABLE other (id INT);")
    start = threading.Barrier(2)
    reports: list[MigrateReport] = []
    errors: list[BaseException] = []

    def runner() -> None:
        start.wait()
        try:
            reports.append(migrate(fresh_schema, settings(), folder))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=runner) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(len(r.applied) for r in reports) == [0, 3]
    assert sorted(r.already_applied for r in reports) == [0, 3]
    assert history(fresh_schema) == [(1, 1, None), (2, 1, None), (3, 1, None)]
    assert query(fresh_schema, "SELECT COUNT(*) FROM runs") == [(1,)]


def test_lock_held_too_long_names_the_holder(
    mariadb: LocalMariaDB, fresh_schema: MysqlTarget, three: Path
) -> None:
    with mariadb.admin() as holder, holder.cursor() as cur:
        cur.execute("SELECT GET_LOCK(%s, 0), CONNECTION_ID()", (lock_name(fresh_schema.database),))
        ((got, holder_id),) = cur.fetchall()
        assert got == 1
        started = time.monotonic()
        with pytest.raises(MigrationLockTimeout) as info:
            migrate(fresh_schema, settings(lock_timeout_s=1), three)
        # gave up after its 1 s lock timeout, not the default 300 s (a bound, never a benchmark)
        assert time.monotonic() - started < 60
        assert f"KILL {holder_id}" in str(info.value)
    assert query(fresh_schema, "SHOW TABLES") == []  # nothing happened without the lock


# --- waiting and credentials ------------------------------------------------------------------


class LateProxy:
    """A TCP proxy to MariaDB that refuses connections (nothing listens) for `delay` seconds."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.port, self.upstream_port, self.delay = free_port(), upstream_port, delay
        self.listening_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        if self._stop.wait(self.delay):
            return
        with socket.create_server(("127.0.0.1", self.port)) as server:
            self.listening_at = time.monotonic()
            server.settimeout(0.2)
            while not self._stop.is_set():
                try:
                    client, _ = server.accept()
                except TimeoutError:
                    continue
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def late_proxy(mariadb: LocalMariaDB) -> Iterator[LateProxy]:
    proxy = LateProxy(mariadb.port, delay=2.0)
    yield proxy
    proxy.close()


def test_waits_for_a_database_that_comes_up_late_then_migrates(
    fresh_schema: MysqlTarget, late_proxy: LateProxy, three: Path
) -> None:
    target = MysqlTarget(
        "127.0.0.1",
        late_proxy.port,
        fresh_schema.user,
        fresh_schema.password,
        fresh_schema.database,
    )
    attempts: list[WaitAttempt] = []
    started = time.monotonic()
    assert wait_for_database(target, settings(), on_attempt=attempts.append) == len(attempts)
    assert time.monotonic() - started >= 1.9 and late_proxy.listening_at is not None
    assert len(attempts) >= 3 and attempts[-1].error is None
    assert all(isinstance(a.error, TransientDatabaseError) for a in attempts[:-1])
    assert all(a.next_delay_s is not None and a.next_delay_s <= 15 for a in attempts[:-1])
    assert [a.version for a in migrate(target, settings(), three).applied] == [1, 2, 3]


def test_wrong_password_fails_fast_without_retrying(fresh_schema: MysqlTarget) -> None:
    wrong = "definitely-not-the-password"
    target = MysqlTarget(
        fresh_schema.host,
        fresh_schema.port,
        fresh_schema.user,
        SecretStr(wrong),
        fresh_schema.database,
    )
    attempts: list[WaitAttempt] = []
    with pytest.raises(DatabaseAuthError) as info:
        wait_for_database(target, settings(), on_attempt=attempts.append)
    assert len(attempts) == 1  # refused at the first attempt: no retry, no waiting
    assert f"{fresh_schema.user}@127.0.0.1" in str(info.value) and wrong not in str(info.value)
    assert "(1045)" in str(info.value)


def test_nothing_listening_gives_up_after_the_wait_timeout() -> None:
    target = MysqlTarget("127.0.0.1", free_port(), "u", SecretStr("secret-pw"), "d")
    attempts: list[WaitAttempt] = []
    started = time.monotonic()
    with pytest.raises(DatabaseUnreachable, match=r"did not accept connections within 1\.5s"):
        wait_for_database(target, settings(wait_timeout_s=1.5), on_attempt=attempts.append)
    assert 1.4 <= time.monotonic() - started < 60  # waited its 1.5 s, then gave up
    assert len(attempts) >= 3 and attempts[-1].next_delay_s is None


def test_an_interrupted_run_stops_waiting_for_the_database_in_the_middle_of_a_back_off() -> None:
    """A run interrupted (Ctrl-C, SIGTERM, Cancel) while its migrate step waits for a database
    that does not answer stops waiting then, not at the end of the wait timeout (an hour here:
    without the stop, the test's own timeout ends it)."""
    target = MysqlTarget("127.0.0.1", free_port(), "u", SecretStr("secret-pw"), "d")
    stop = threading.Event()
    attempts: list[WaitAttempt] = []

    def on_attempt(attempt: WaitAttempt) -> None:
        attempts.append(attempt)
        if len(attempts) == 2:
            stop.set()  # as the run's interruption does, from another thread

    with pytest.raises(DatabaseWaitStopped, match=r"after 2 attempt\(s\): the run was interrupted"):
        wait_for_database(target, settings(wait_timeout_s=3600), on_attempt=on_attempt, stop=stop)
    assert len(attempts) == 2  # no attempt after the stop
    assert attempts[-1].next_delay_s is not None  # it was in a back-off when it stopped
    assert "secret-pw" not in repr(attempts)


# --- the command line -------------------------------------------------------------------------


def cli(*argv: str, target_from_stack: Any = None) -> tuple[int, str, str]:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(
        parser.parse_args(list(argv)), get_settings(), target_from_stack, out=out, err=err
    )
    return code, out.getvalue(), err.getvalue()


def test_cli_migrates_shows_status_and_repairs(
    mariadb: LocalMariaDB, fresh_schema: MysqlTarget, three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = mariadb.url.rsplit("/", 1)[0] + f"/{fresh_schema.database}"
    monkeypatch.setenv("STACKFLOW_DATABASE_URL", url)
    code, out, err = cli("--dir", str(three))
    assert (code, err) == (0, "")
    assert "applied V001__create_color.sql" in out and "3 applied, 0 already applied" in out

    write(three, "V004__bad.sql", "CREATE TABLE broken (id NOSUCHTYPE);")
    code, out, err = cli("--dir", str(three))
    assert code == 1 and err.startswith("error: V004__bad.sql: statement 1 of 1")
    assert len(err.strip().splitlines()) == 1

    code, out, _ = cli("--dir", str(three), "--status")
    assert code == 0
    states = [line.split()[:2] for line in out.splitlines()[3:]]
    assert states == [["001", "applied"], ["002", "applied"], ["003", "applied"], ["004", "failed"]]

    code, out, _ = cli("--repair")
    assert code == 0 and "cleared failed records" in out and "V4" in out
    (three / "V004__bad.sql").write_text("CREATE TABLE broken (id INT);")
    monkeypatch.delenv("STACKFLOW_DATABASE_URL")
    code, out, err = cli("--dir", str(three), target_from_stack=lambda: fresh_schema)
    assert code == 0 and "1 applied, 3 already applied" in out
    assert mariadb.password not in out + err


def test_cli_wrong_password_is_one_clear_line(
    fresh_schema: MysqlTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = fresh_schema
    monkeypatch.setenv(
        "STACKFLOW_DATABASE_URL", f"mysql://{t.user}:wrong-pass-123@{t.host}:{t.port}/{t.database}"
    )
    code, out, err = cli("--dir", str(PROJECT_ROOT / "migrations"))
    assert code == 1 and err.startswith("error: access denied for") and len(err.splitlines()) == 1
    assert "wrong-pass-123" not in out + err


# --- the Prefect task on a real server --------------------------------------------------------


@pytest.fixture
def prefect_api(prefect_server: PrefectServer) -> Iterator[PrefectServer]:
    """The shared server; this test's logs are sent before it ends, not retried at exit."""
    yield prefect_server
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)


def test_prefect_task_migrates_and_publishes_an_artifact_without_secrets(
    prefect_api: PrefectServer, fresh_schema: MysqlTarget, three: Path
) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        TaskRunFilter,
    )
    from prefect.client.schemas.sorting import ArtifactSort

    from tasks.migrate import run_migrations

    @flow(name="migrate-itest")
    def migrate_flow(target: MysqlTarget, mig: MigrationSettings) -> MigrateReport:
        return run_migrations(target, mig, "itest", False)

    state = migrate_flow(fresh_schema, settings(dir=three), return_state=True)
    report = state.result()
    assert [a.filename for a in report.applied] == [
        "V001__create_color.sql",
        "V002__add_red.sql",
        "V003__create_shape.sql",
    ]
    with get_client(sync_client=True) as client:
        # Every field explicit: this server (fastapi<0.155) answers 422 to the client's nulls.
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["migrations-itest"])),
            flow_run_filter=FlowRunFilter(),
            task_run_filter=TaskRunFilter(),
            sort=ArtifactSort.CREATED_DESC,
            limit=10,
            offset=0,
        )
        assert state.state_details.flow_run_id is not None
        parameters = client.read_flow_run(state.state_details.flow_run_id).parameters
    assert fresh_schema.password.get_secret_value() not in repr(parameters)
    assert artifacts, "no migrations-itest artifact"
    markdown = str(artifacts[0].data)
    assert "V001__create_color.sql" in markdown and "| 003 |" in markdown
    assert fresh_schema.password.get_secret_value() not in markdown
    assert f"{fresh_schema.user}@" not in markdown


def test_prefect_task_does_not_retry_an_auth_error(
    prefect_api: PrefectServer, fresh_schema: MysqlTarget, three: Path
) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    from stackflow.retry import migration_policy
    from tasks.migrate import run_migrations

    wrong = MysqlTarget(
        fresh_schema.host,
        fresh_schema.port,
        fresh_schema.user,
        SecretStr("not-it-at-all"),
        fresh_schema.database,
    )

    @flow(name="migrate-itest-auth")
    def migrate_flow(target: MysqlTarget, mig: MigrationSettings) -> MigrateReport:
        policy = migration_policy(mig.retries)
        return run_migrations.with_options(**policy.task_options())(
            target, mig, "itest-auth", False
        )

    state = migrate_flow(wrong, settings(dir=three), return_state=True)
    assert state.is_failed()
    with pytest.raises(DatabaseAuthError):
        state.result()
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])
            ),
            sort=TaskRunSort.EXPECTED_START_TIME_DESC,
            limit=10,
        )
    (task_run,) = runs
    # One run: the policy allows 3 retries, but the retry condition turns auth errors down.
    assert task_run.run_count == 1 and task_run.state is not None and task_run.state.is_failed()


def test_prefect_task_retries_a_dropped_connection_and_applies_once(
    prefect_api: PrefectServer, mariadb: LocalMariaDB, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    from tasks.migrate import run_migrations

    folder = tmp_path / "m"
    write(folder, "V1__create_runs.sql", "CREATE TABLE runs (n INT);")
    write(folder, "V2__slow_insert.sql", "DO SLEEP(1);\nINSERT INTO runs VALUES (2);\n")
    killed: list[int] = []

    def kill_the_first_sleep() -> None:
        deadline = time.monotonic() + 20
        with mariadb.admin() as conn, conn.cursor() as cur:
            while not killed and time.monotonic() < deadline:
                cur.execute(
                    "SELECT id FROM information_schema.processlist WHERE info LIKE 'DO SLEEP%%' "
                    "AND db = %s",
                    (fresh_schema.database,),
                )
                for (conn_id,) in cur.fetchall():
                    cur.execute(f"KILL CONNECTION {int(conn_id)}")
                    killed.append(int(conn_id))
                time.sleep(0.05)

    killer = threading.Thread(target=kill_the_first_sleep)
    killer.start()

    @flow(name="migrate-itest-retry")
    def migrate_flow() -> MigrateReport:
        task = run_migrations.with_options(retries=2, retry_delay_seconds=0)
        return task(fresh_schema, settings(dir=folder), "itest-retry", False)

    state = migrate_flow(return_state=True)
    killer.join(30)
    assert len(killed) == 1
    report = state.result()
    # The second run found V1 recorded and applied V2, which the kill had cut short.
    assert [a.version for a in report.applied] == [2] and report.already_applied == 1
    assert history(fresh_schema) == [(1, 1, None), (2, 1, None)]
    assert query(fresh_schema, "SELECT n FROM runs") == [(2,)]
    with get_client(sync_client=True) as client:
        (task_run,) = client.read_task_runs(
            flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])
            ),
            sort=TaskRunSort.EXPECTED_START_TIME_DESC,
            limit=10,
        )
    assert task_run.run_count == 2
