"""Destructive-change lint for pending migration files, and the DEFINER check.

A finding is a statement that can lose data: DROP TABLE/DATABASE, DROP COLUMN, TRUNCATE,
DELETE/UPDATE without WHERE, and a MODIFY/CHANGE that narrows a column as the live schema has it
(shorter strings, smaller integers, lost signedness or precision, NOT NULL added). A statement the
lint cannot see into (dynamic SQL through PREPARE/EXECUTE, CALL of a procedure, an anonymous
compound block) is a finding that "needs review". A file that carries
`-- stackflow: destructive-ok <reason>` allows its findings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from stackflow.migrator.splitter import Statement

FindingKind = Literal[
    "drop_table",
    "drop_database",
    "drop_column",
    "truncate",
    "delete_without_where",
    "update_without_where",
    "narrow_column",
    "dynamic_sql",
    "procedure_call",
    "compound_block",
]
# Statements whose effect the lint cannot see: a person has to read them.
REVIEW_KINDS: frozenset[FindingKind] = frozenset(
    {"dynamic_sql", "procedure_call", "compound_block"}
)

MARKER = "-- stackflow: destructive-ok <reason>"
# Statements that only add rows: what makes a dump large, and what no check here looks into.
ROW_STATEMENTS = frozenset({"INSERT", "REPLACE"})
_MARKER_RE = re.compile(r"^[ \t]*--[ \t]+stackflow:[ \t]*destructive-ok[ \t]+(\S[^\n]*)$", re.M)


@dataclass(frozen=True)
class LintFinding:
    """A statement that can lose data (or that the lint cannot see into): its kind, number,
    text, and whether the file allows it."""

    kind: FindingKind
    statement: int
    text: str
    allowed: bool
    detail: str = ""

    @property
    def needs_review(self) -> bool:
        """The lint cannot tell what the statement does (not that it loses data)."""
        return self.kind in REVIEW_KINDS

    @property
    def label(self) -> str:
        """What a plan calls it: "needs review" or "destructive"."""
        return "needs review" if self.needs_review else "destructive"

    def describe(self) -> str:
        """`statement <n>: <what> (<detail>)` as plans and refusals show it."""
        what = self.kind.replace("_", " ").replace(" sql", " SQL")
        extra = f" ({self.detail})" if self.detail else ""
        return f"statement {self.statement}: {what}{extra}"


@dataclass(frozen=True)
class LiveColumn:
    """A column as information_schema has it."""

    data_type: str  # lower case: varchar, int, ...
    column_type: str  # lower case: varchar(255), int(10) unsigned, ...
    char_length: int | None
    precision: int | None
    scale: int | None
    nullable: bool


ColumnLookup = Callable[[str, str], LiveColumn | None]  # (table, column) -> live column


def destructive_ok_reason(text: str) -> str | None:
    """The reason of the file's `-- stackflow: destructive-ok <reason>` marker, or None."""
    match = _MARKER_RE.search(text) if "stackflow:" in text else None
    return match[1].strip() if match else None


# Comments and conditional-comment markers removed, so keywords can be matched plainly.
_COMMENT_RE = re.compile(r"--\s[^\n]*|#[^\n]*|/\*(?!!).*?\*/|/\*!\d*|\*/", re.S)
_STRING_RE = re.compile(r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\"")
IDENT = r"(?:`[^`]+`|[A-Za-z0-9_$]+)"
QUALIFIED = rf"{IDENT}(?:\s*\.\s*{IDENT})?"


def normalise(sql: str) -> str:
    """A statement without comments (conditional-comment markers too), strings emptied, on one
    line, so keywords and names can be matched plainly."""
    text = _STRING_RE.sub("''", _COMMENT_RE.sub(" ", sql))
    return " ".join(text.split())


def unquote_name(name: str) -> str:
    """The last part of a maybe-qualified name, without backticks (`db`.`t` -> t)."""
    last = re.split(r"\s*\.\s*(?=[`A-Za-z0-9_$])", name.strip())[-1]
    return last.strip("`")


def _top_level_parts(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


_ALTER_RE = re.compile(
    rf"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?({QUALIFIED})\s+(.*)$",
    re.I | re.S,
)
_DROP_COLUMN_RE = re.compile(
    r"^DROP\s+(?!INDEX\b|KEY\b|PRIMARY\b|FOREIGN\b|CONSTRAINT\b|CHECK\b|PARTITION\b|PERIOD\b|"
    r"SYSTEM\b|FULLTEXT\b|SPATIAL\b|UNIQUE\b)(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?(" + IDENT + ")",
    re.I,
)
_MODIFY_RE = re.compile(
    rf"^MODIFY\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({IDENT})\s+(.*)$", re.I | re.S
)
_CHANGE_RE = re.compile(
    rf"^CHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({IDENT})\s+{IDENT}\s+(.*)$", re.I | re.S
)
_COMPOUND_RE = re.compile(
    rf"^(?:{IDENT}\s*:\s*)?(?:BEGIN\s+NOT\s+ATOMIC|IF|CASE|LOOP|REPEAT|WHILE|FOR)\b", re.I
)
_TYPE_RE = re.compile(r"^([A-Za-z]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?", re.I)
_INT_RANK = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 5}
_TEXT_RANK = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
_TEXT_RANK |= {k.replace("text", "blob"): v for k, v in _TEXT_RANK.items()}
_STRINGS = {"char", "varchar", "binary", "varbinary"} | set(_TEXT_RANK)
_DECIMALS = {"decimal", "numeric", "dec", "fixed"}


def _narrowing(live: LiveColumn, definition: str) -> str | None:
    """Why the new column definition narrows `live`, or None."""
    match = _TYPE_RE.match(definition)
    if match is None:
        return None
    new_type = match[1].lower()
    length = int(match[2]) if match[2] else None
    scale = int(match[3]) if match[3] else None
    rest = definition[match.end() :].upper()
    old, was = live.data_type, live.column_type
    now = definition[: match.end()].strip()
    if "NOT NULL" in rest and live.nullable:
        return f"NOT NULL added to a nullable column ({was} NULL -> {now} NOT NULL)"
    if old in _INT_RANK and new_type in _INT_RANK:
        if _INT_RANK[new_type] < _INT_RANK[old]:
            return f"{was} -> {now}"
        if ("unsigned" in was) != ("UNSIGNED" in rest):
            return f"signedness changes: {was} -> {now} {'UNSIGNED' if 'UNSIGNED' in rest else ''}".strip()
        return None
    if old in _STRINGS and new_type in _STRINGS:
        old_len = _TEXT_RANK.get(old, live.char_length or 0)
        new_len = _TEXT_RANK.get(new_type, length if length is not None else 1)
        return f"{was} -> {now}" if new_len < old_len else None
    if old in _DECIMALS and new_type in _DECIMALS:
        p, s = length or 10, scale or 0
        old_p, old_s = live.precision or 10, live.scale or 0
        return f"{was} -> {now}" if (p - s) < (old_p - old_s) or s < old_s else None
    if old != new_type and not (old == "int" and new_type == "integer"):
        return f"type changes: {was} -> {now}"
    return None


def lint_statements(
    statements: Sequence[Statement], allowed: bool, columns: ColumnLookup | None = None
) -> list[LintFinding]:
    """The destructive statements among `statements`.

    Args:
        statements: a file's statements.
        allowed: the file carries the destructive-ok marker.
        columns: looks up a live column, to judge MODIFY/CHANGE; None skips that check.
    """
    out: list[LintFinding] = []

    def add(kind: FindingKind, st: Statement, detail: str = "") -> None:
        out.append(LintFinding(kind, st.number, st.sql, allowed, detail))

    for st in statements:
        if st.keyword in ROW_STATEMENTS:
            continue  # a dump's bulk: nothing in it can match, and normalising it is costly
        text = normalise(st.sql)
        upper = text.upper()
        if re.match(r"^DROP\s+TABLE\b", upper):
            add("drop_table", st)
        elif re.match(r"^DROP\s+(DATABASE|SCHEMA)\b", upper):
            add("drop_database", st)
        elif re.match(r"^TRUNCATE\b", upper):
            add("truncate", st)
        elif re.match(r"^DELETE\b", upper) and not re.search(r"\bWHERE\b", upper):
            add("delete_without_where", st)
        elif re.match(r"^UPDATE\b", upper) and not re.search(r"\bWHERE\b", upper):
            add("update_without_where", st)
        elif re.match(r"^(PREPARE|EXECUTE)\b", upper):
            add("dynamic_sql", st, "what it runs is built when it runs")
        elif re.match(r"^CALL\b", upper):
            add("procedure_call", st, "the lint cannot see what the procedure does")
        elif _COMPOUND_RE.match(text):
            add("compound_block", st, "the lint cannot see into it")
        elif (alter := _ALTER_RE.match(text)) is not None:
            table = unquote_name(alter[1])
            for part in _top_level_parts(alter[2]):
                if (drop := _DROP_COLUMN_RE.match(part)) is not None:
                    add("drop_column", st, f"{table}.{unquote_name(drop[1])}")
                    continue
                change = _MODIFY_RE.match(part) or _CHANGE_RE.match(part)
                if change is None or columns is None:
                    continue
                live = columns(table, unquote_name(change[1]))
                if live is not None and (why := _narrowing(live, change[2])) is not None:
                    add("narrow_column", st, f"{table}.{unquote_name(change[1])}: {why}")
    return out


_DEFINER_RE = re.compile(
    r"\bDEFINER\s*=\s*(?P<user>CURRENT_USER(?:\s*\(\s*\))?|`[^`]*`|'[^']*'|\"[^\"]*\"|[\w.$-]+)"
    r"(?:\s*@\s*(?:`[^`]*`|'[^']*'|\"[^\"]*\"|[\w.%$:-]+))?",
    re.I,
)


def foreign_definers(statements: Sequence[Statement], user: str) -> list[tuple[int, str]]:
    """(statement number, clause) of each DEFINER= that names a user other than `user`.

    Rows (INSERT, REPLACE) hold no DEFINER clause, only values, which are never rewritten."""
    out = []
    for st in statements:
        if st.keyword in ROW_STATEMENTS:
            continue
        for match in _DEFINER_RE.finditer(st.sql):
            name = match["user"]
            if name.upper().startswith("CURRENT_USER"):
                continue
            if name[:1] in "`'\"":
                name = name[1:-1]
            if name != user:
                out.append((st.number, match[0]))
    return out


def strip_definer(sql: str) -> str:
    """The statement without its DEFINER= clause (the object is then owned by the runner)."""
    return _DEFINER_RE.sub("", sql)
