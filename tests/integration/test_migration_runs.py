"""Issue 14 against a real MariaDB: dump-shaped files, progress per statement and resuming after
a SIGKILL, missing files, dry run, baseline, destructive changes, packet size, history upgrade."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cli.commands.migrate import add_arguments
from cli.commands.migrate import run as cli_run
from stackflow import PROJECT_ROOT
from stackflow.localprefect import PrefectServer
from stackflow.migrator.admin import baseline, repair, status
from stackflow.migrator.apply import MigrateReport
from stackflow.migrator.connection import connect
from stackflow.migrator.errors import (
    MigrationBaselineError,
    MigrationDefinerError,
    MigrationDestructiveChange,
    MigrationFailedBefore,
    MigrationFileError,
    MigrationInterrupted,
    MigrationMissingFiles,
    MigrationPlanChanged,
    MigrationStatementTooLarge,
)
from stackflow.migrator.plan import pending_plan
from stackflow.migrator.target import MysqlTarget
from stackflow.schema_history import HISTORY_TABLE
from stackflow.settings import get_settings
from tests.fixtures.mariadb import LocalMariaDB
from tests.integration.migration_support import migrate, query, settings, tables, write

pytestmark = pytest.mark.integration


def abc(tmp_path: Path) -> Path:
    """V1..V3, each creating one table: a, b, c."""
    folder = tmp_path / "m"
    for version, name in enumerate("abc", 1):
        write(folder, f"V{version}__{name}.sql", f"CREATE TABLE {name} (id INT);")
    return folder


def progress(target: MysqlTarget) -> list[tuple[Any, ...]]:
    # These tests' versions are whole numbers: read as numbers (the column holds Flyway's text).
    return query(
        target,
        "SELECT CAST(version AS UNSIGNED), state, statements_done, in_flight_from "
        f"FROM {HISTORY_TABLE} ORDER BY installed_rank",
    )


def cli(target: MysqlTarget, *argv: str, kind: str = "dev") -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    app = get_settings(kind)  # the repository's environments/<kind>.toml: prod is protected
    assert app.protected is (kind == "prod")
    code = cli_run(parser.parse_args(list(argv)), app, lambda: target, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --- dump-shaped files ------------------------------------------------------------------------

MYSQLDUMP = """-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)
/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!40101 SET NAMES utf8mb4 */;
/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;
/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;

DROP TABLE IF EXISTS `account`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
CREATE TABLE `account` (
  `id` int NOT NULL AUTO_INCREMENT,
  `name` varchar(40) NOT NULL,
  `note` varchar(60) DEFAULT 'a;b -- not a comment',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `account` WRITE;
/*!40000 ALTER TABLE `account` DISABLE KEYS */;
INSERT INTO `account` VALUES (1,'semi;colon','it''s; fine'),(2,'back\\\\slash','$$ and ;;');
/*!40000 ALTER TABLE `account` ENABLE KEYS */;
UNLOCK TABLES;

CREATE TABLE `audit` (`account_id` int, `what` varchar(20));
/*!50003 SET @saved_sql_mode       = @@sql_mode */ ;
/*!50003 SET sql_mode              = 'STRICT_TRANS_TABLES' */ ;
DELIMITER ;;
/*!50003 CREATE*/ /*!50017 DEFINER=CURRENT_USER*/ /*!50003 TRIGGER `account_ai` AFTER INSERT ON `account` FOR EACH ROW BEGIN
  INSERT INTO audit VALUES (NEW.id, 'insert;ed');
  IF NEW.name = 'x' THEN
    INSERT INTO audit VALUES (NEW.id, 'x');
  END IF;
END */;;
DELIMITER ;
/*!50003 SET sql_mode              = @saved_sql_mode */ ;
DELIMITER ;;
CREATE DEFINER=CURRENT_USER PROCEDURE `count_accounts`(OUT n INT)
BEGIN
  DECLARE done INT DEFAULT 0;
  lbl: LOOP
    SELECT COUNT(*) INTO n FROM account; -- a comment; with a semicolon
    LEAVE lbl;
  END LOOP lbl;
END ;;
DELIMITER ;
/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;
/*!40014 SET FOREIGN_KEY_CHECKS=@OLD_FOREIGN_KEY_CHECKS */;
"""

DOLLARS = """DELIMITER $$
CREATE FUNCTION twice(x INT) RETURNS INT DETERMINISTIC
BEGIN
  DECLARE y INT DEFAULT 0;
  SET y = CASE WHEN x > 0 THEN x * 2 ELSE 0 END;
  RETURN y;
END$$
CREATE PROCEDURE fill(n INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE i < n DO
    INSERT INTO audit VALUES (twice(i), '$; not the end');
    SET i = i + 1;
  END WHILE;
END$$
DELIMITER ;
CALL fill(3);
"""


def test_a_mysqldump_file_and_a_dollar_delimited_file_apply_whole(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(folder, "V001__dump.sql", MYSQLDUMP)
    write(folder, "V002__functions.sql", DOLLARS)
    report = migrate(fresh_schema, settings(), folder)
    # Counted per file as the mysql client would send them.
    assert [(a.version, a.statements) for a in report.applied] == [(1, 21), (2, 3)]
    assert query(fresh_schema, "SELECT id, name, note FROM account ORDER BY id") == [
        (1, "semi;colon", "it's; fine"),
        (2, "back\\slash", "$$ and ;;"),
    ]
    # The trigger (sent inside /*!50003 ... */) fired for neither row: it came after the data.
    query(fresh_schema, "INSERT INTO account (name) VALUES ('x')")
    audit = query(fresh_schema, "SELECT account_id, what FROM audit ORDER BY account_id, what")
    filled = "$; not the end"
    assert audit == [(0, filled), (2, filled), (3, "insert;ed"), (3, "x"), (4, filled)]
    with connect(fresh_schema, settings()) as conn, conn.cursor() as cur:
        cur.execute("CALL count_accounts(@n)")
        cur.execute("SELECT @n")
        assert cur.fetchone() == (3,)
    assert progress(fresh_schema) == [(1, "applied", 21, None), (2, "applied", 3, None)]


def test_each_file_runs_in_a_fresh_session(fresh_schema: MysqlTarget, tmp_path: Path) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__set.sql", "SET @leak = 42;\nSET SESSION sql_mode = 'ANSI_QUOTES';\n")
    write(
        folder,
        "V2__use.sql",
        'CREATE TABLE seen (v INT, s VARCHAR(9));\nINSERT INTO seen VALUES (@leak, "dq");\n',
    )
    # Session statements that refuse to run inside a transaction, and a switch of database.
    write(
        folder,
        "V3__session.sql",
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;\nUSE information_schema;\n"
        "SELECT COUNT(*) FROM TABLES;\n",
    )
    report = migrate(fresh_schema, settings(), folder)
    assert [(a.version, a.statements) for a in report.applied] == [(1, 2), (2, 2), (3, 3)]
    # Without V1's session: @leak is NULL and "dq" is a string, not an identifier.
    assert query(fresh_schema, "SELECT v, s FROM seen") == [(None, "dq")]
    assert progress(fresh_schema)[-1] == (3, "applied", 3, None)


def test_a_foreign_definer_is_refused_before_anything_runs_then_stripped(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__table.sql", "CREATE TABLE t (id INT);")
    write(
        folder,
        "V2__proc.sql",
        "DELIMITER ;;\n/*!50003 CREATE*/ /*!50020 DEFINER=`root`@`localhost`*/ /*!50003 "
        "PROCEDURE p() BEGIN SELECT 1; END */;;\nDELIMITER ;\n",
    )
    with pytest.raises(MigrationDefinerError) as info:
        migrate(fresh_schema, settings(), folder)
    message = str(info.value)
    assert "V2__proc.sql: statement 1" in message and "`root`@`localhost`" in message
    assert "--strip-definer" in message
    assert "strip_definer = true under [migrations] in environments/<name>.toml" in message
    assert "t" not in tables(fresh_schema)  # V1 did not run either
    report = migrate(fresh_schema, settings(strip_definer=True), folder)
    assert [a.version for a in report.applied] == [1, 2]
    definer = query(
        fresh_schema,
        "SELECT DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()",
    )
    assert len(definer) == 1 and definer[0][0].startswith(f"{fresh_schema.user}@")


# --- resuming after a SIGKILL -----------------------------------------------------------------

_RUNNER = """
import sys
from stackflow.migrator.command import migrate
from stackflow.migrator.target import parse_mysql_url
from stackflow.settings import MigrationSettings
migrate(parse_mysql_url(sys.argv[1]), MigrationSettings(lock_timeout_s=30), protected=False, folder=__import__("pathlib").Path(sys.argv[2]))
"""


def _url(mariadb: LocalMariaDB, target: MysqlTarget) -> str:
    return mariadb.url.rsplit("/", 1)[0] + "/" + target.database


def kill_mid_file(mariadb: LocalMariaDB, target: MysqlTarget, folder: Path) -> None:
    """Run migrate in a subprocess, SIGKILL it while its SLEEP runs, and end that query too."""
    env = os.environ | {"PYTHONPATH": str(PROJECT_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, _url(mariadb, target), str(folder)], env=env
    )
    try:
        deadline = time.monotonic() + 30
        with mariadb.admin() as conn, conn.cursor() as cur:
            while True:
                assert proc.poll() is None, "the runner ended before it reached the SLEEP"
                assert time.monotonic() < deadline, "the runner never reached the SLEEP"
                cur.execute(
                    "SELECT id FROM information_schema.PROCESSLIST WHERE db = %s "
                    "AND info LIKE '%%SLEEP(%%' AND info NOT LIKE '%%PROCESSLIST%%'",
                    (target.database,),
                )
                rows = cur.fetchall()
                if rows:
                    break
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            # The server notices a dead client only when the query ends; end it now.
            for (conn_id,) in rows:
                cur.execute(f"KILL {int(conn_id)}")
    finally:
        if proc.poll() is None:
            proc.kill()


def sleepy_folder(tmp_path: Path, second: str) -> Path:
    folder = tmp_path / "m"
    write(
        folder,
        "V1__tables.sql",
        "CREATE TABLE runs (n INT);\nCREATE TABLE sleepy (s INT);\nINSERT INTO sleepy VALUES (1);\n",
    )
    write(
        folder,
        "V2__work.sql",
        f"INSERT INTO runs VALUES (1);\n{second}\nINSERT INTO runs VALUES (3);\n",
    )
    return folder


def test_a_killed_run_resumes_at_the_next_data_statement(
    mariadb: LocalMariaDB, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = sleepy_folder(
        tmp_path, "INSERT INTO runs SELECT 2 FROM sleepy WHERE SLEEP(s * 30) = 0 OR s = 0;"
    )
    kill_mid_file(mariadb, fresh_schema, folder)
    assert progress(fresh_schema) == [(1, "applied", 3, None), (2, "running", 1, None)]
    assert [r.state for r in status(fresh_schema, settings(), folder)] == ["applied", "partial"]
    query(fresh_schema, "UPDATE sleepy SET s = 0")  # no sleeping the second time
    report = migrate(fresh_schema, settings(), folder)
    (applied,) = report.applied
    assert (applied.version, applied.first_statement, applied.statements) == (2, 2, 3)
    # Statement 1 ran once, statement 2 (cut by the kill, rolled back) ran again in full.
    assert query(fresh_schema, "SELECT n FROM runs ORDER BY n") == [(1,), (2,), (3,)]
    assert progress(fresh_schema)[1] == (2, "applied", 3, None)


def test_a_run_killed_inside_a_lock_tables_region_resumes_at_the_next_statement(
    mariadb: LocalMariaDB, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    """mysqldump's default shape: rows between LOCK TABLES and UNLOCK TABLES still commit with
    their progress records, so a SIGKILL there resumes at the next statement, no repair."""
    folder = tmp_path / "m"
    write(
        folder,
        "V1__tables.sql",
        "CREATE TABLE runs (n INT PRIMARY KEY);\nCREATE TABLE sleepy (s INT);\n"
        "INSERT INTO sleepy VALUES (1);\n",
    )
    write(
        folder,
        "V2__dump.sql",
        "/*!40101 SET NAMES utf8mb4 */;\nLOCK TABLES `runs` WRITE, `sleepy` READ;\n"
        "/*!40000 ALTER TABLE `runs` DISABLE KEYS */;\nINSERT INTO `runs` VALUES (1),(2);\n"
        "INSERT INTO `runs` SELECT 3 FROM sleepy WHERE SLEEP(s * 30) = 0 OR s = 0;\n"
        "INSERT INTO `runs` VALUES (4);\n/*!40000 ALTER TABLE `runs` ENABLE KEYS */;\n"
        "UNLOCK TABLES;\n",
    )
    kill_mid_file(mariadb, fresh_schema, folder)
    # The first INSERT committed with its record; the one the kill cut rolled back with its own.
    assert progress(fresh_schema)[1] == (2, "running", 4, None)
    assert query(fresh_schema, "SELECT n FROM runs ORDER BY n") == [(1,), (2,)]
    assert [r.state for r in status(fresh_schema, settings(), folder)] == ["applied", "partial"]
    query(fresh_schema, "UPDATE sleepy SET s = 0")
    (applied,) = migrate(fresh_schema, settings(), folder).applied
    assert (applied.version, applied.first_statement, applied.statements) == (2, 5, 8)
    assert query(fresh_schema, "SELECT n FROM runs ORDER BY n") == [(1,), (2,), (3,), (4,)]
    assert progress(fresh_schema)[1] == (2, "applied", 8, None)


def test_a_run_killed_inside_ddl_refuses_until_repaired(
    mariadb: LocalMariaDB, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = sleepy_folder(
        tmp_path, "CREATE TABLE made AS SELECT SLEEP(s * 30) AS slept FROM sleepy;"
    )
    kill_mid_file(mariadb, fresh_schema, folder)
    assert progress(fresh_schema)[1] == (2, "running", 1, 2)
    for _ in range(2):  # refused every time, naming the file and statement
        with pytest.raises(MigrationInterrupted) as info:
            migrate(fresh_schema, settings(), folder)
        message = str(info.value)
        assert "V2__work.sql" in message and "interrupted at statement 2" in message
        assert "--repair --mark-ran" in message
    code, out, _ = cli(fresh_schema, "--status", "--dir", str(folder))
    assert code == 0 and "interrupted" in out
    # Checked: the CREATE did not happen, so repair without --mark-ran runs it again.
    assert "made" not in tables(fresh_schema)
    code, out, _ = cli(fresh_schema, "--repair", "--dir", str(folder))
    assert code == 0 and "V2" in out
    query(fresh_schema, "UPDATE sleepy SET s = 0")
    report = migrate(fresh_schema, settings(), folder)
    assert [(a.version, a.first_statement) for a in report.applied] == [(2, 2)]
    assert query(fresh_schema, "SELECT n FROM runs ORDER BY n") == [(1,), (3,)]
    assert "made" in tables(fresh_schema)


def test_repair_mark_ran_records_an_interrupted_statement_as_done(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = sleepy_folder(tmp_path, "CREATE TABLE made (id INT);")
    migrate(fresh_schema, settings(), folder)
    # As a kill after the CREATE and before its record would leave it:
    query(
        fresh_schema,
        f"UPDATE {HISTORY_TABLE} SET state='running', success=0, statements_done=1, in_flight_from=2, in_flight_to=2 WHERE version=2",
    )
    query(fresh_schema, "DELETE FROM runs WHERE n = 3")
    assert repair(fresh_schema, settings(), mark_ran=True) == ["V2"]
    report = migrate(fresh_schema, settings(), folder)
    assert [(a.version, a.first_statement) for a in report.applied] == [(2, 3)]
    assert query(fresh_schema, "SELECT n FROM runs ORDER BY n") == [(1,), (3,)]


# --- missing, dry run, baseline ---------------------------------------------------------------


def test_an_applied_file_gone_from_the_folder_is_reported_and_refused_unless_allowed(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = abc(tmp_path)
    third = (folder / "V3__c.sql").read_text()
    (folder / "V3__c.sql").unlink()
    migrate(fresh_schema, settings(), folder)
    (folder / "V2__b.sql").unlink()
    write(folder, "V3__c.sql", third)
    with pytest.raises(MigrationMissingFiles) as info:
        migrate(fresh_schema, settings(), folder)
    message = str(info.value)
    assert "V2 (b)" in message and "--allow-missing" in message
    assert "allow_missing = true under [migrations] in environments/<name>.toml" in message
    assert "c" not in tables(fresh_schema)
    code, out, _ = cli(fresh_schema, "--status", "--dir", str(folder))
    assert code == 0 and "missing" in out and "gone from the folder: V2" in out
    code, _, err = cli(fresh_schema, "--dir", str(folder))
    assert code == 1 and "--allow-missing" in err
    code, out, err = cli(fresh_schema, "--dir", str(folder), "--allow-missing")
    assert (code, err) == (0, "") and "gone from the folder (allowed): V2" in out
    assert "c" in tables(fresh_schema)


def test_dry_run_prints_the_statements_and_creates_nothing(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__dump.sql", MYSQLDUMP)
    code, out, err = cli(fresh_schema, "--dry-run", "--dir", str(folder))
    assert (code, err) == (0, "")
    assert "-- V1__dump.sql (21 statements)" in out and "-- statement 21\n" in out
    assert "CREATE DEFINER=CURRENT_USER PROCEDURE `count_accounts`" in out
    assert "-- destructive: statement 5: drop table" in out
    assert tables(fresh_schema) == set()  # not even the history table
    plan = pending_plan(fresh_schema, settings(dir=folder), protected=True)
    (pending,) = plan.pending
    assert pending.name == "V1__dump.sql" and len(pending.statements) == 21
    assert pending.statements[4] == "DROP TABLE IF EXISTS `account`"
    assert [(f.kind, f.statement, f.allowed) for f in pending.findings] == [
        ("drop_table", 5, False)
    ]
    assert plan.pinned == {"V1": pending.checksum} and len(plan.blocking) == 1
    assert tables(fresh_schema) == set()


def test_baseline_records_an_existing_schema_once(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = abc(tmp_path)
    query(fresh_schema, "CREATE TABLE a (id INT)")  # the schema as it was built by hand
    query(fresh_schema, "CREATE TABLE b (id INT)")
    code, out, err = cli(fresh_schema, "--baseline", "2", "--dir", str(folder))
    assert (code, err) == (0, "") and "up to V2" in out
    report = migrate(fresh_schema, settings(), folder)
    assert [a.version for a in report.applied] == [3]
    assert [(r.version, r.state) for r in status(fresh_schema, settings(), folder)] == [
        (1, "baseline"),
        (2, "baseline"),
        (3, "applied"),
    ]
    assert progress(fresh_schema) == [(2, "baseline", 0, None), (3, "applied", 1, None)]
    with pytest.raises(MigrationBaselineError, match="already has migration history"):
        baseline(fresh_schema, settings(), 3, folder)


# --- destructive changes ----------------------------------------------------------------------


def test_a_destructive_file_is_refused_in_prod_then_runs_with_the_marker(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__t.sql", "CREATE TABLE t (id BIGINT, name VARCHAR(255), note TEXT NULL);")
    migrate(fresh_schema, settings(), folder)
    narrow = write(
        folder,
        "V2__narrow.sql",
        "ALTER TABLE t MODIFY name VARCHAR(50);\nALTER TABLE t MODIFY COLUMN id INT;\n"
        "ALTER TABLE t CHANGE note note TEXT NOT NULL, DROP COLUMN name;\n"
        "ALTER TABLE t MODIFY note MEDIUMTEXT NULL;\n",
    )
    code, _, err = cli(fresh_schema, "--dir", str(folder), kind="prod")
    assert code == 1
    for expected in (
        "V2__narrow.sql: statement 1: narrow column (t.name: varchar(255) -> VARCHAR(50))",
        "V2__narrow.sql: statement 2: narrow column (t.id: bigint(20) -> INT)",
        "V2__narrow.sql: statement 3: narrow column (t.note: NOT NULL added",
        "V2__narrow.sql: statement 3: drop column (t.name)",
        "stackflow: destructive-ok <reason>",
    ):
        assert expected in err
    assert "statement 4" not in err  # widening is fine
    assert query(
        fresh_schema,
        "SELECT CHARACTER_MAXIMUM_LENGTH FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't' AND COLUMN_NAME = 'name'",
    ) == [(255,)]
    # Outside prod the same file would run; in prod the marker lets it.
    narrow.write_text(
        "-- stackflow: destructive-ok names are at most 50 chars (checked)\n" + narrow.read_text()
    )
    code, out, err = cli(fresh_schema, "--dir", str(folder), kind="prod")
    assert (code, err) == (0, "") and "applied V2__narrow.sql (4 statements" in out


def test_pinned_checksums_approve_findings_and_refuse_anything_else(
    prefect_server: PrefectServer, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    from prefect import flow

    from tasks.migrate import run_migrations

    folder = tmp_path / "m"
    write(folder, "V1__t.sql", "CREATE TABLE t (id INT);\nINSERT INTO t VALUES (1);")
    write(folder, "V2__wipe.sql", "DELETE FROM t;")
    mig = settings(dir=folder)
    plan = pending_plan(fresh_schema, mig, protected=True)
    assert [(p.version, [f.kind for f in p.findings]) for p in plan.pending] == [
        (1, []),
        (2, ["delete_without_where"]),
    ]
    with pytest.raises(MigrationDestructiveChange, match=r"V2__wipe.sql: statement 1"):
        migrate(fresh_schema, mig, protected=True)
    write(folder, "V3__late.sql", "CREATE TABLE late (id INT);")
    with pytest.raises(MigrationPlanChanged, match=r"added since approval: V3__late.sql"):
        migrate(fresh_schema, mig, protected=True, pinned=plan.pinned)
    (folder / "V3__late.sql").unlink()

    @flow(name="migrate-itest-pinned")
    def approved_run() -> MigrateReport:
        return run_migrations(fresh_schema, mig, "prod", True, pinned=plan.pinned)

    report = approved_run()
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)  # sent now, not retried at exit
    assert [a.version for a in report.applied] == [1, 2]
    assert query(fresh_schema, "SELECT COUNT(*) FROM t") == [(0,)]
    # A retry of the same approved run finds the files applied as approved: nothing to do.
    assert migrate(fresh_schema, mig, pinned=plan.pinned).applied == []
    write(folder, "V4__more.sql", "SELECT 1;")
    with pytest.raises(MigrationPlanChanged, match=r"changed since approval: V4__more.sql"):
        migrate(fresh_schema, mig, pinned=plan.pinned | {"V4": "0" * 64})
    assert [r.version for r in status(fresh_schema, mig) if r.state == "applied"] == [1, 2]


# --- limits and the older history table ------------------------------------------------------


def test_a_statement_over_max_allowed_packet_fails_before_it_is_sent(
    mariadb: LocalMariaDB, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    (limit,) = query(fresh_schema, "SELECT @@max_allowed_packet")[0]
    assert limit <= 64 * 1024 * 1024  # MariaDB's default is 16 MiB
    folder = tmp_path / "m"
    big = "INSERT INTO t VALUES ('" + "x" * int(limit) + "');"
    write(folder, "V1__big.sql", f"CREATE TABLE t (v LONGTEXT);\n{big}\n")
    with pytest.raises(MigrationStatementTooLarge) as info:
        migrate(fresh_schema, settings(), folder)
    assert "V1__big.sql: statement 2 (line 2)" in str(info.value)
    assert f"max_allowed_packet of {limit}" in str(info.value)
    assert tables(fresh_schema) == {HISTORY_TABLE}  # statement 1 did not run either
    assert query(fresh_schema, f"SELECT COUNT(*) FROM {HISTORY_TABLE}") == [(0,)]


# The history table as the first release created it.
_FIRST_RELEASE_DDL = f"""CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
    version BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    description VARCHAR(200) NOT NULL,
    checksum CHAR(64) NOT NULL,
    applied_at DATETIME(6) NOT NULL COMMENT 'UTC',
    duration_ms INT UNSIGNED NOT NULL,
    success TINYINT(1) NOT NULL,
    error TEXT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


def test_a_history_table_from_the_first_release_is_upgraded_in_place(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    from stackflow.migrator.files import load_migrations

    folder = abc(tmp_path)
    files = load_migrations(folder)
    query(fresh_schema, _FIRST_RELEASE_DDL)
    query(fresh_schema, "CREATE TABLE a (id INT)")
    insert = (
        f"INSERT INTO {HISTORY_TABLE} VALUES "
        "({v}, '{d}', '{c}', UTC_TIMESTAMP(6), 5, {ok}, {err})"
    )
    query(fresh_schema, insert.format(v=1, d="a", c=files[0].checksum, ok=1, err="NULL"))
    query(fresh_schema, insert.format(v=2, d="b", c=files[1].checksum, ok=0, err="'boom'"))
    # Read-only callers read the old shape as it is.
    assert [r.state for r in status(fresh_schema, settings(), folder)] == [
        "applied",
        "failed",
        "pending",
    ]
    with pytest.raises(MigrationFailedBefore, match="boom"):
        migrate(fresh_schema, settings(), folder)
    assert progress(fresh_schema) == [(1, "applied", 0, None), (2, "failed", 0, None)]
    assert repair(fresh_schema, settings()) == ["V2"]
    report = migrate(fresh_schema, settings(), folder)
    assert [a.version for a in report.applied] == [2, 3] and report.already_applied == 1
    assert progress(fresh_schema) == [
        (1, "applied", 0, None),
        (2, "applied", 1, None),
        (3, "applied", 1, None),
    ]


def test_unterminated_string_is_a_file_error_naming_the_line(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__bad.sql", "CREATE TABLE a (id INT);\nINSERT INTO a VALUES ('oops);\n")
    with pytest.raises(MigrationFileError, match=r"V1__bad.sql: line 2: unterminated string"):
        migrate(fresh_schema, settings(), folder)
    assert "a" not in tables(fresh_schema)
