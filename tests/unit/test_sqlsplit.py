"""The statement splitter, statement kinds, file names and the destructive-change lint (no server)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from cli.commands.migrate import add_arguments
from stackflow.migrator.errors import MigrationFileError
from stackflow.migrator.files import load_migrations
from stackflow.migrator.lint import (
    LiveColumn,
    destructive_ok_reason,
    foreign_definers,
    lint_statements,
    strip_definer,
)
from stackflow.migrator.splitter import Statement, split_statements
from stackflow.migrator.units import (
    lock_with_history,
    session_replay,
    statement_kind,
    units_of,
)


def sqls(text: str) -> list[str]:
    return [s.sql for s in split_statements(text)]


PROCEDURE = """CREATE PROCEDURE p(IN n INT)
BEGIN
  DECLARE done INT DEFAULT 0;
  DECLARE c CURSOR FOR SELECT id FROM t;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  outer_loop: LOOP
    IF n > 3 THEN LEAVE outer_loop; ELSEIF n = 2 THEN SET n = IF(n > 1, 1, 2); ELSE SET n = n + 1; END IF;
  END LOOP outer_loop;
  WHILE n < 10 DO SET n = n + 1; END WHILE;
  again: REPEAT SET n = n - 1; UNTIL n < 0 END REPEAT again;
  CASE n WHEN 1 THEN SELECT 1; ELSE SELECT CASE WHEN n THEN 2 ELSE 3 END; END CASE;
  BEGIN SELECT 1; BEGIN SELECT 2; END; END;
  FOR i IN 1..3 DO SELECT i; END FOR;
END"""


@pytest.mark.parametrize(
    "compound",
    [
        PROCEDURE,
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.a = 1; SET NEW.b = 2; END",
        "CREATE DEFINER=user@localhost PROCEDURE q() IF 1 THEN SELECT 1; SELECT 2; END IF",
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN DELETE FROM t; SELECT 1; END",
        "CREATE FUNCTION f() RETURNS INT BEGIN DECLARE x INT; SET x = 1; RETURN x; END",
        "BEGIN NOT ATOMIC DECLARE x INT; SET x = 1; END",
        "IF @a THEN SELECT 1; SELECT 2; END IF",
        "lbl: WHILE 1 DO SELECT 1; LEAVE lbl; END WHILE lbl",
        "/*!50003 CREATE*/ /*!50003 TRIGGER t1 AFTER INSERT ON t FOR EACH ROW BEGIN\n"
        "  SET @a = 1;\nEND */",
    ],
)
def test_compound_statements_stay_whole_with_the_default_delimiter(compound: str) -> None:
    assert sqls(f"SELECT 0;\n{compound};\nSELECT 9;") == ["SELECT 0", compound, "SELECT 9"]


def test_plain_statements_around_compound_words_still_split() -> None:
    text = (
        "BEGIN; INSERT INTO t VALUES (1); COMMIT;\n"
        "CREATE TABLE event (id INT);\n"
        "CREATE FUNCTION f(x INT) RETURNS INT DETERMINISTIC RETURN IF(x > 0, 1, 0);\n"
        "CREATE TRIGGER tr2 BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1;\n"
        "SELECT CASE WHEN 1 THEN 2 END; SET @x := 1;\n"
    )
    assert len(sqls(text)) == 8


def test_delimiter_commands_as_the_mysql_client_reads_them() -> None:
    text = (
        "CREATE TABLE t (a INT);\n"
        "DELIMITER ;;\n"
        "CREATE PROCEDURE a() BEGIN SELECT ';;' ; SELECT 1; END;;\n"
        "  delimiter $$\n"
        "CREATE PROCEDURE b() BEGIN SELECT '$$'; END$$\n"
        'SELECT `$$`, "$$" -- $$\n$$\n'
        "DELIMITER ;\n"
        "SELECT 3"
    )
    statements = split_statements(text)
    assert [s.sql for s in statements] == [
        "CREATE TABLE t (a INT)",
        "CREATE PROCEDURE a() BEGIN SELECT ';;' ; SELECT 1; END",
        "CREATE PROCEDURE b() BEGIN SELECT '$$'; END",
        'SELECT `$$`, "$$" -- $$',
        "SELECT 3",
    ]
    assert [s.line for s in statements] == [1, 3, 5, 6, 9]


@pytest.mark.parametrize(
    ("text", "what", "line"),
    [
        ("SELECT 1;\nINSERT INTO t VALUES ('oops);\n", "string", 2),
        ("SELECT `odd;\n", "identifier", 1),
        ("SELECT 1;\n\n/* never closed;\n", "comment", 3),
    ],
)
def test_unterminated_strings_and_comments_name_the_line(text: str, what: str, line: int) -> None:
    with pytest.raises(MigrationFileError, match=f"V1__x.sql: line {line}: unterminated {what}"):
        split_statements(text, source="V1__x.sql")


def test_splitting_work_grows_linearly() -> None:
    """Lines of the splitter executed (counted with a trace function: the same count whatever
    else the machine does, unlike a timing) for 8x the text: linear is ~8x, quadratic ~64x."""
    import sys

    import stackflow.migrator.splitter as splitter

    chunk = (
        "INSERT INTO t VALUES (1, 'a;b', \"c\"), (2, 'it''s', `x`); -- note; here\n"
        "/*!40101 SET NAMES utf8mb4 */;\n"
        "CREATE PROCEDURE p() BEGIN IF 1 THEN SELECT 1; END IF; END;\n"
    )
    source = splitter.__file__

    def work(copies: int) -> int:
        executed = 0

        def trace(frame: Any, event: str, _arg: Any) -> Any:
            nonlocal executed
            if frame.f_code.co_filename != source:
                return None
            if event == "line":
                executed += 1
            return trace

        sys.settrace(trace)
        try:
            count = len(split_statements(chunk * copies))
        finally:
            sys.settrace(None)
        assert count == 3 * copies
        return executed

    small, large = work(250), work(2_000)
    assert small > 0
    assert large / small < 12, (small, large)


def test_statement_kinds_and_units_of_a_dump() -> None:
    statements = split_statements(
        "/*!40101 SET NAMES utf8mb4 */;\nCREATE TABLE t (a INT);\nLOCK TABLES t WRITE;\n"
        "INSERT INTO t VALUES (1);\nUNLOCK TABLES;\nINSERT INTO t VALUES (2);\n"
        "START TRANSACTION;\nDELETE FROM t WHERE a = 1;\nCOMMIT;\n/*!40101 SET GLOBAL x = 1 */;\n"
    )
    kinds = [statement_kind(s) for s in statements]
    assert kinds == [
        "session", "ddl", "open", "data", "close", "data", "open", "data", "close", "ddl",
    ]  # fmt: skip
    units = [(u.first, u.last, u.atomic, u.lock) for u in units_of(statements)]
    # A mysqldump LOCK TABLES region keeps progress per statement (its rows commit with their
    # records); an explicit transaction stays one unit, marked in flight.
    assert units == [
        (1, 1, True, 0),
        (2, 2, False, 0),
        (3, 3, False, 3),
        (4, 4, True, 3),
        (5, 5, False, 3),
        (6, 6, True, 0),
        (7, 9, False, 0),
        (10, 10, False, 0),
    ]


def test_lock_regions_that_end_a_transaction_stay_one_unit_and_resumes_relock() -> None:
    dump = split_statements(
        "SET NAMES utf8mb4;\nLOCK TABLES `t` WRITE;\n/*!40000 ALTER TABLE `t` DISABLE KEYS */;\n"
        "INSERT INTO `t` VALUES (1);\nSET @x = 1;\nINSERT INTO `t` VALUES (2);\n"
        "/*!40000 ALTER TABLE `t` ENABLE KEYS */;\nUNLOCK TABLES;\n"
    )
    assert [(u.first, u.atomic, u.lock) for u in units_of(dump)] == [
        (1, True, 0), (2, False, 2), (3, False, 2), (4, True, 2), (5, True, 2), (6, True, 2),
        (7, False, 2), (8, False, 2),
    ]  # fmt: skip
    # Resumed at statement 6: the SETs before it, and the LOCK of the region it is inside.
    assert [s.number for s in session_replay(dump, 6)] == [1, 2, 5]
    assert [s.number for s in session_replay(dump, 8)] == [1, 2, 5]
    locked = lock_with_history(dump[1].sql, "app")
    assert locked == "LOCK TABLES `app`.stackflow_schema_history WRITE, `t` WRITE"
    # mysqldump --no-autocommit: a COMMIT inside the region ends a transaction: one unit.
    committed = split_statements(
        "LOCK TABLES t WRITE;\nset autocommit=0;\nINSERT INTO t VALUES (1);\ncommit;\n"
        "UNLOCK TABLES;\n"
    )
    assert [(u.first, u.last, u.lock) for u in units_of(committed)] == [(1, 4, 0), (5, 5, 0)]


# --- file names -------------------------------------------------------------------------------


def test_versions_in_other_digits_are_refused(tmp_path: Path) -> None:
    (tmp_path / "V\u0661\u0662__arabic_indic.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationFileError, match=r"versions are ASCII digits 0-9"):
        load_migrations(tmp_path)


def test_folders_and_symlinks_are_reported_as_what_they_are(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.txt"
    real.write_text("SELECT 1;")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "V1__ok.sql").write_text("SELECT 1;")
    (folder / "V2__link.sql").symlink_to(real)
    with pytest.raises(MigrationFileError, match=r"V2__link.sql: is a symbolic link \(to "):
        load_migrations(folder)
    (folder / "V2__link.sql").unlink()
    (folder / "V3__dir.sql").mkdir()
    with pytest.raises(MigrationFileError, match=r"V3__dir.sql: is a folder, not a migration"):
        load_migrations(folder)


# --- lint -------------------------------------------------------------------------------------


def one(sql: str) -> list[Statement]:
    return list(split_statements(sql))


LIVE = {
    ("t", "name"): LiveColumn("varchar", "varchar(255)", 255, None, None, True),
    ("t", "id"): LiveColumn("bigint", "bigint(20) unsigned", None, 20, 0, False),
    ("t", "price"): LiveColumn("decimal", "decimal(10,2)", None, 10, 2, True),
    ("t", "body"): LiveColumn("mediumtext", "mediumtext", 16777215, None, None, True),
}


def live(table: str, column: str) -> LiveColumn | None:
    return LIVE.get((table.lower(), column.lower()))


@pytest.mark.parametrize(
    ("sql", "kinds"),
    [
        ("DROP TABLE t", ["drop_table"]),
        ("DROP TEMPORARY TABLE t", []),
        ("DROP DATABASE d", ["drop_database"]),
        ("TRUNCATE TABLE t", ["truncate"]),
        ("DELETE FROM t", ["delete_without_where"]),
        ("DELETE FROM t WHERE id = 1", []),
        ("UPDATE t SET name = 'x'", ["update_without_where"]),
        ("UPDATE t SET name = 'WHERE'", ["update_without_where"]),
        ("UPDATE t SET name = 'x' WHERE id = 2", []),
        (
            "ALTER TABLE t DROP COLUMN name, DROP INDEX i, DROP name2",
            ["drop_column", "drop_column"],
        ),
        ("ALTER TABLE t DROP PRIMARY KEY, DROP FOREIGN KEY fk", []),
        ("ALTER TABLE `t` MODIFY `name` VARCHAR(50)", ["narrow_column"]),
        ("ALTER TABLE t MODIFY name VARCHAR(255) NULL", []),
        ("ALTER TABLE t MODIFY name VARCHAR(300)", []),
        ("ALTER TABLE t MODIFY name VARCHAR(255) NOT NULL", ["narrow_column"]),
        ("ALTER TABLE t MODIFY id INT UNSIGNED NOT NULL", ["narrow_column"]),
        ("ALTER TABLE t MODIFY id BIGINT NOT NULL", ["narrow_column"]),
        ("ALTER TABLE t MODIFY id BIGINT UNSIGNED NOT NULL", []),
        ("ALTER TABLE t CHANGE price cost DECIMAL(8,2)", ["narrow_column"]),
        ("ALTER TABLE t CHANGE COLUMN price price DECIMAL(12,2)", []),
        ("ALTER TABLE t MODIFY body TEXT", ["narrow_column"]),
        ("ALTER TABLE t MODIFY name INT", ["narrow_column"]),
        ("ALTER TABLE other MODIFY name VARCHAR(1)", []),  # not in the live schema
        ("/*!40000 ALTER TABLE t DISABLE KEYS */", []),
    ],
)
def test_lint_finds_what_can_lose_data(sql: str, kinds: list[str]) -> None:
    assert [f.kind for f in lint_statements(one(sql), False, live)] == kinds


def test_lint_names_the_statement_and_narrowing_and_the_marker_allows() -> None:
    statements = one("CREATE TABLE x (a INT);\nALTER TABLE t MODIFY name VARCHAR(50);")
    (finding,) = lint_statements(statements, False, live)
    assert (finding.statement, finding.allowed) == (2, False)
    assert finding.describe() == "statement 2: narrow column (t.name: varchar(255) -> VARCHAR(50))"
    assert lint_statements(statements, True, live)[0].allowed
    marked = "-- stackflow: destructive-ok   the column was checked: max 31 chars\nSELECT 1;"
    assert destructive_ok_reason(marked) == "the column was checked: max 31 chars"
    assert destructive_ok_reason("-- stackflow: destructive-ok\nSELECT 1;") is None
    assert destructive_ok_reason("SELECT '-- stackflow: destructive-ok x';") is None


def test_foreign_definers_are_found_and_stripped() -> None:
    statements = one(
        "CREATE DEFINER=`root`@`localhost` PROCEDURE a() SELECT 1;\n"
        "/*!50017 DEFINER='app'@'%'*/ SELECT 2;\n"
        "CREATE DEFINER=CURRENT_USER() PROCEDURE c() SELECT 3;\n"
        "CREATE DEFINER = other@'10.0.0.1' VIEW v AS SELECT 4;\n"
    )
    found = foreign_definers(statements, "app")
    assert found == [(1, "DEFINER=`root`@`localhost`"), (4, "DEFINER = other@'10.0.0.1'")]
    assert strip_definer(statements[0].sql) == "CREATE  PROCEDURE a() SELECT 1"


def test_cli_versions_are_ascii_digits() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--baseline", "12", "--allow-missing", "--strip-definer"])
    assert (args.baseline, args.allow_missing, args.strip_definer) == ("12", True, True)
    assert parser.parse_args(["--dry-run"]).dry_run
    with pytest.raises(SystemExit):
        parser.parse_args(["--baseline", "\u0661\u0662"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--dry-run", "--repair"])


def test_a_delimiter_never_set_back_is_refused_naming_its_line() -> None:
    """The mysql client would send everything after the last `$$` as one statement, which the
    server refuses after the statements before it ran: refused when the file is split, before
    anything runs."""
    text = (
        "CREATE TABLE t (a INT);\n"
        "DELIMITER $$\n"
        "CREATE PROCEDURE p() BEGIN SELECT 1; END$$\n"
        "INSERT INTO t VALUES (1);\nINSERT INTO t VALUES (2);\n"
    )
    with pytest.raises(MigrationFileError) as info:
        split_statements(text, source="V2__p.sql")
    assert "V2__p.sql: line 2: DELIMITER $$ is never set back" in str(info.value)
    assert "DELIMITER ;" in str(info.value)
    fixed = text.replace("END$$\n", "END$$\nDELIMITER ;\n")
    assert [s.keyword for s in split_statements(fixed)] == ["CREATE", "CREATE", "INSERT", "INSERT"]
