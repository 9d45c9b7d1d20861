"""What a migration may never run (its own database, the history table, mysql client commands),
what the lint cannot check ("needs review"), and which statements a resumed file replays; no
server needed."""

from __future__ import annotations

import pytest

from stackflow.migrator.guard import refusals
from stackflow.migrator.lint import lint_statements
from stackflow.migrator.splitter import split_statements
from stackflow.migrator.units import session_replay, statement_kind

pytestmark = pytest.mark.unit

SAKILA_HEAD = """-- Sakila Sample Database Schema
-- Version 1.5

SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0;
SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0;

DROP SCHEMA IF EXISTS sakila;
CREATE SCHEMA sakila;
USE sakila;
CREATE TABLE actor (actor_id SMALLINT UNSIGNED NOT NULL);
"""


def refused(
    sql: str, database: str = "app", start: int = 1, fold_case: bool = False
) -> list[tuple[int, int, str]]:
    """(statement, line, text) of each refusal."""
    found = refusals("V1__x.sql", split_statements(sql), database, start, fold_case)
    return [(r.statement, r.line, r.text) for r in found]


def test_dropping_the_database_being_migrated_is_refused_naming_statement_and_line() -> None:
    (refusal,) = refusals("V1__sakila.sql", split_statements(SAKILA_HEAD), "sakila")
    assert (refusal.statement, refusal.line) == (3, 7)
    message = refusal.describe()
    assert message.startswith("V1__sakila.sql: statement 3 (line 7) `DROP SCHEMA IF EXISTS sakila`")
    assert "stackflow_schema_history" in message and "strip the schema lines of a dump" in message
    # The same file against another database drops only another schema: the client allows it.
    assert refused(SAKILA_HEAD, "app") == []
    # Names compare as the server compares them: `App` is another database unless the server
    # ignores case (lower_case_table_names 1 or 2).
    assert refused("CREATE OR REPLACE DATABASE `App`;", fold_case=True) == [
        (1, 1, "CREATE OR REPLACE DATABASE `App`")
    ]
    assert refused("CREATE OR REPLACE DATABASE `App`;") == []
    assert refused("DROP DATABASE Chinook;", "chinook") == []
    assert refused("DROP DATABASE Chinook;", "chinook", fold_case=True) != []
    assert refused("/*!40000 DROP DATABASE app */;") != []


@pytest.mark.parametrize(
    "sql",
    [
        "DROP TABLE stackflow_schema_history",
        "DROP TABLE IF EXISTS a, `app`.`stackflow_schema_history`",
        "TRUNCATE TABLE stackflow_schema_history",
        "RENAME TABLE a TO b, stackflow_schema_history TO old_history",
        "ALTER TABLE stackflow_schema_history RENAME TO old_history",
        "ALTER TABLE app.stackflow_schema_history DROP COLUMN checksum",
        "CREATE OR REPLACE TABLE stackflow_schema_history (id INT)",
        "USE other; DROP TABLE app.stackflow_schema_history",
    ],
)
def test_statements_that_destroy_the_history_table_are_refused(sql: str) -> None:
    found = refusals("V1__x.sql", split_statements(sql + ";"), "app")
    assert len(found) == 1 and "the history table stackflow_schema_history" in found[0].why


def test_history_table_names_compare_as_the_server_compares_them() -> None:
    sql = "TRUNCATE Stackflow_Schema_History;"
    assert refused(sql, fold_case=True) != []  # lower_case_table_names 1 or 2
    assert refused(sql) == []  # 0: another table


@pytest.mark.parametrize(
    "sql",
    [
        "DROP TEMPORARY TABLE stackflow_schema_history",  # only ever a temporary table
        "USE other; DROP TABLE stackflow_schema_history",  # another schema's table
        "DROP TABLE stackflow_schema_history_old",
        "DROP DATABASE other",  # flagged by the lint, allowed as the client allows it
        "SELECT * FROM stackflow_schema_history",
        "INSERT INTO t VALUES ('\\\\. not a command', \"\\\\g\"), (\\N, 1)",
        "CREATE TABLE `odd\\g` (id INT)",
    ],
)
def test_other_schemas_strings_and_null_shorthand_are_left_alone(sql: str) -> None:
    assert refused(sql + ";") == []


@pytest.mark.parametrize(
    ("text", "shown", "line"),
    [
        (
            "CREATE TABLE a (id INT);\nsource tables.sql\nCREATE TABLE b (id INT);",
            "source tables.sql",
            2,
        ),
        ("CREATE TABLE a (id INT);\n\\. tables.sql\nCREATE TABLE b (id INT);", "\\. tables.sql", 2),
        ("SELECT 1\n\\g\nSELECT 2;", "\\g", 2),
        ("system rm -rf /tmp/x;", "system rm -rf /tmp/x", 1),
    ],
)
def test_mysql_client_commands_are_refused_naming_their_line(
    text: str, shown: str, line: int
) -> None:
    found = refusals("V2__load.sql", split_statements(text), "app")
    assert [(r.line, r.text) for r in found] == [(line, shown)]
    assert "mysql client command" in found[0].why and "SQL only" in found[0].todo


def test_a_resumed_file_is_judged_from_where_it_resumes_with_its_earlier_use_in_mind() -> None:
    sql = "USE other;\nDROP TABLE stackflow_schema_history;\nUSE app;\nTRUNCATE stackflow_schema_history;"
    assert [s for s, _, _ in refused(sql)] == [4]
    assert refused(sql, start=5) == []


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("PREPARE s FROM @q", "dynamic_sql"),
        ("EXECUTE s", "dynamic_sql"),
        ("EXECUTE IMMEDIATE 'DROP TABLE t'", "dynamic_sql"),
        ("CALL wipe()", "procedure_call"),
        ("/*!50003 CALL wipe() */", "procedure_call"),
        ("BEGIN NOT ATOMIC DROP TABLE t; END", "compound_block"),
        ("outer: BEGIN NOT ATOMIC DELETE FROM t; END", "compound_block"),
        ("IF @x THEN DROP TABLE t; END IF", "compound_block"),
    ],
)
def test_statements_the_lint_cannot_see_into_need_review(sql: str, kind: str) -> None:
    (finding,) = lint_statements(split_statements(sql + ";"), allowed=False)
    assert finding.kind == kind and finding.needs_review and finding.label == "needs review"
    assert finding.describe().startswith("statement 1: ")
    assert lint_statements(split_statements("DEALLOCATE PREPARE s;"), allowed=False) == []
    (drop,) = lint_statements(split_statements("DROP TABLE t;"), allowed=False)
    assert not drop.needs_review and drop.label == "destructive"


def test_use_is_a_session_statement_replayed_when_a_file_resumes() -> None:
    statements = split_statements(
        "SET NAMES utf8mb4;\nUSE other;\nCREATE TABLE a (id INT);\nSELECT 1;"
    )
    assert [statement_kind(s) for s in statements] == ["session", "session", "ddl", "data"]
    assert [s.number for s in session_replay(statements, 4)] == [1, 2]
