"""Split a migration file into statements the way the mysql client does, in one linear pass.

* `DELIMITER <d>` lines change the delimiter (`;;`, `$$`, `//` ...) until the next `DELIMITER`.
* Strings ('', "", with backslash escapes and doubled quotes), backtick identifiers and comments
  (`-- `, `#`, `/* */`) never split. MySQL's conditional comments (`/*!50003 ... */`) are SQL:
  their text is kept and scanned as code.
* With the default `;` delimiter, compound statements (CREATE PROCEDURE/FUNCTION/TRIGGER/EVENT
  bodies and MariaDB's anonymous blocks) stay whole: nested BEGIN ... END, labelled LOOP, REPEAT,
  WHILE and FOR, IF and CASE statements, handlers and cursors. With any other delimiter only the
  delimiter splits, exactly as in the mysql client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackflow.migrator.errors import MigrationFileError


@dataclass(frozen=True)
class Statement:
    """One SQL statement of a migration file: its 1-based number and the line it starts on."""

    number: int
    line: int
    sql: str

    @property
    def keyword(self) -> str:
        """The statement's first word, upper case, looking inside a conditional comment."""
        match = _FIRST_WORD_RE.match(self.sql)
        return match[1].upper() if match else ""


_FIRST_WORD_RE = re.compile(r"(?:\s|/\*!\d*)*([A-Za-z_]+)")


def one_line(sql: str, limit: int = 120) -> str:
    """A statement on one line, cut at `limit` characters (for plans, refusals and logs)."""
    text = " ".join(sql.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# One token per match; the unrolled string patterns stay linear on long literals.
_STRING = r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\""
_QUOTED_NAME = r"`[^`]*(?:``[^`]*)*`"
_LINE_COMMENT = r"(?:--(?=\s|$)|#)[^\n]*"
_TOKEN = (
    r"(?P<ws>\s+)"
    rf"|(?P<str>{_STRING})"
    rf"|(?P<bq>{_QUOTED_NAME})"
    rf"|(?P<line>{_LINE_COMMENT})"
    r"|(?P<exec>/\*[!]\d*)"
    r"|(?P<block>/\*.*?\*/)"
    r"|(?P<open>['\"`]|/\*)"  # an opener the patterns above could not close
    r"|(?P<close>\*/)"
)
_WORD = r"[A-Za-z0-9_$\x80-\U0010ffff]"
_DEFAULT_RE = re.compile(_TOKEN + rf"|(?P<word>{_WORD}+)|(?P<delim>;)|(?P<other>.)", re.DOTALL)
_DELIMITER_CMD_RE = re.compile(r"(?i:delimiter)(?:[ \t]+(\S+))?(?=\s|$)[^\n]*(?:\n|$)")

# Words that open a block closed by END (or END <word>) when they start a statement in a body.
_OPENERS = {"BEGIN", "IF", "CASE", "LOOP", "REPEAT", "WHILE", "FOR"}
_END_WORDS = {"IF", "CASE", "LOOP", "REPEAT", "WHILE", "FOR"}
_BLOCK_STATEMENTS = {"IF", "LOOP", "REPEAT", "WHILE", "FOR"}
# After these, a body statement starts (so IF is the IF statement, not the IF() function).
_STARTERS = {";", "BEGIN", "ATOMIC", "THEN", "ELSE", "DO", "LOOP", "REPEAT", ":"}
# A routine body may follow its header directly: after `)`, FOR EACH ROW, or a characteristic.
_HEADER_ENDS = {")", "ROW", "DETERMINISTIC", "SQL", "DATA", "INVOKER", "DEFINER", "'"}
_ROUTINES = {"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"}
_OBJECTS = _ROUTINES | {
    "TABLE",
    "VIEW",
    "INDEX",
    "UNIQUE",
    "FULLTEXT",
    "SPATIAL",
    "DATABASE",
    "SCHEMA",
    "USER",
    "ROLE",
    "SEQUENCE",
    "SERVER",
    "TABLESPACE",
    "TEMPORARY",
    "LOGFILE",
}


_SPECIAL = "'\"`#/*-"
# The quoted forms again, possessive: a run never backtracks into what it matched (each piece
# starts with its own character), which keeps the engine at ~80 MB/s on a dump's INSERTs.
_RUN_PIECES = (
    r"'[^'\\]*+(?:(?:\\.|'')[^'\\]*+)*+'",
    r"\"[^\"\\]*+(?:(?:\\.|\"\")[^\"\\]*+)*+\"",
    r"`[^`]*+(?:``[^`]*+)*+`",
    r"(?:--(?=\s|$)|#)[^\n]*+",
    r"(?>/\*(?!!).*?\*/)",  # a plain comment; /*! and */ end the run (conditional comments)
    r"/(?!\*)",
    r"-(?!-(?=\s|$))",
    r"\*(?!/)",
)


def _fast_re(delimiter: str) -> re.Pattern[str]:
    """Inside a statement that needs no block tracking: as much plain text, quoted text and
    comment as one match can take (up to the delimiter, a conditional comment's ends or anything
    unterminated), so a long multi-row INSERT costs a few matches, not one per value."""
    d = re.escape(delimiter)
    plain = f"[^{re.escape(_SPECIAL + delimiter[0])}]"
    if delimiter[0] in _SPECIAL:  # an odd delimiter: plain runs only, token by token otherwise
        return re.compile(rf"(?P<run>{plain}+)|(?P<delim>{d})|" + _TOKEN + r"|(?P<other>.)", re.S)
    pieces = list(_RUN_PIECES)
    if len(delimiter) > 1:  # the delimiter's first character alone is plain text
        pieces.append(rf"{re.escape(delimiter[0])}(?!{re.escape(delimiter[1:])})")
    quoted = "(?:" + "|".join(pieces) + ")"
    run = rf"(?:{plain}++|{quoted})(?:{plain}*+{quoted})*+{plain}*+"
    return re.compile(rf"(?P<run>{run})|(?P<delim>{d})|" + _TOKEN + r"|(?P<other>.)", re.S)


_DEFAULT_FAST_RE = _fast_re(";")


def _custom_re(delimiter: str) -> re.Pattern[str]:
    d = re.escape(delimiter)
    # A word stops where the delimiter starts (END$$), as in the mysql client's byte scan.
    return re.compile(
        rf"(?P<delim>{d})|" + _TOKEN + rf"|(?P<word>(?:(?!{d}){_WORD})+)|(?P<other>.)", re.DOTALL
    )


class _Blocks:
    """Block depth of one statement (default delimiter only), fed its significant tokens.

    A token is an upper-case word, a punctuation character, "'" for a string or "`" for a quoted
    identifier. Depth is tracked only in compound statements: stored-program bodies (CREATE
    PROCEDURE/FUNCTION/TRIGGER/EVENT/PACKAGE) and MariaDB's blocks outside them.
    """

    def __init__(self) -> None:
        # "" (nothing yet), "create", "begin" (BEGIN seen first), "label?" (a word seen first),
        # "compound", "routine" or "plain" (never tracked).
        self.kind = ""
        self.stack: list[str] = []
        self.prev = ""
        self.skip_end_word = False

    @property
    def open(self) -> bool:
        return bool(self.stack)

    def feed(self, tok: str, label_colon: bool = False) -> None:
        kind = self.kind
        if kind == "":
            if tok == "CREATE":
                self.kind = "create"
            elif tok == "BEGIN":
                self.kind = "begin"
            elif tok in _OPENERS:
                self.kind = "compound"
                self.prev = ";"
                self._track(tok)
            elif tok[0].isalpha() or tok in ("'", "`"):
                self.kind = "label?"
            else:
                self.kind = "plain"
        elif kind == "create":
            if self.prev not in ("=", "@") and tok in _OBJECTS:
                self.kind = "routine" if tok in _ROUTINES else "plain"
        elif kind == "begin":
            # `BEGIN NOT ATOMIC` opens a block; BEGIN [WORK] starts a transaction.
            if tok == "NOT":
                self.kind, self.stack = "compound", ["BEGIN"]
            else:
                self.kind = "plain"
        elif kind == "label?":
            if label_colon:
                self.kind = "compound"
            else:
                self.kind = "plain"
        else:
            if kind != "plain":
                self._track(tok)
        self.prev = tok

    def _track(self, tok: str) -> None:
        if self.skip_end_word:
            self.skip_end_word = False
            if tok in _END_WORDS:
                return
        top = self.stack[-1] if self.stack else ""
        starts = self.prev in _STARTERS and not (
            self.prev in ("THEN", "ELSE") and top == "CASE-EXPR"
        )
        if not self.stack and self.kind == "routine":
            starts = starts or self.prev in _HEADER_ENDS
        if tok == "END":
            if self.stack:
                self.stack.pop()
            self.skip_end_word = True
        elif tok == "BEGIN" and (starts or self.stack or self.kind == "routine"):
            self.stack.append("BEGIN")
        elif tok == "CASE":
            self.stack.append("CASE" if starts else "CASE-EXPR")
        elif tok in _BLOCK_STATEMENTS and starts:
            self.stack.append(tok)


def split_statements(sql: str, *, source: str = "<sql>") -> tuple[Statement, ...]:
    """Split SQL text into statements as the mysql client does, keeping compound bodies whole.

    Comment-only and empty statements are dropped; each statement loses its delimiter. Runs in
    time linear in the text's length.

    Args:
        sql: the text of a migration file.
        source: the file name, for error messages.

    Raises:
        MigrationFileError: an unterminated string, identifier or comment, a DELIMITER line
            without a delimiter, or a DELIMITER never set back to `;`; the message names the
            file and line.
    """
    out: list[Statement] = []
    n = len(sql)
    pos = 0
    delimiter, delimiter_line = ";", 0
    pattern, fast = _DEFAULT_RE, _DEFAULT_FAST_RE
    start = -1  # offset of the statement's first code token, -1 before it
    blocks = _Blocks()
    in_exec = False
    line_starts_at = 0  # offset of the current line's start, for DELIMITER detection
    line_no_cache = [0, 1]  # (offset, line) of the last line count, to count lines linearly

    def line_of(offset: int) -> int:
        last_offset, last_line = line_no_cache
        line = last_line + sql.count("\n", last_offset, offset)
        line_no_cache[0], line_no_cache[1] = offset, line
        return line

    def finish(end: int) -> None:
        nonlocal start, blocks
        if start >= 0:
            body = sql[start:end].strip()
            out.append(Statement(len(out) + 1, line_of(start), body))
        start = -1
        blocks = _Blocks()

    while pos < n:
        if start < 0 and pos == line_starts_at:
            cmd = _DELIMITER_CMD_RE.match(sql, pos)
            if cmd is not None:
                new = cmd[1] or ""
                if not new or "\\" in new:
                    raise MigrationFileError(
                        f"{source}: line {line_of(pos)}: DELIMITER needs a delimiter, e.g. "
                        "DELIMITER ;; or DELIMITER $$"
                    )
                delimiter, delimiter_line = new, line_of(pos)
                if new == ";":
                    pattern, fast = _DEFAULT_RE, _DEFAULT_FAST_RE
                else:
                    pattern, fast = _custom_re(new), _fast_re(new)
                pos = line_starts_at = cmd.end()
                continue
        skim = start >= 0 and (delimiter != ";" or blocks.kind == "plain")
        m = (fast if skim else pattern).match(sql, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        end = m.end()
        if kind == "run":
            pos = end
            continue
        if kind == "ws":
            if pos == line_starts_at or "\n" in m[0]:
                line_starts_at = end  # a DELIMITER command may follow on this line
            pos = end
            continue
        if kind in ("line", "block"):
            pos = end
            continue
        if kind == "open":
            what = {"'": "string", '"': "string", "`": "identifier"}.get(m[0], "comment")
            raise MigrationFileError(
                f"{source}: line {line_of(pos)}: unterminated {what} (opened here and never closed)"
            )
        if kind == "exec":
            in_exec = True
            if start < 0:
                start = pos
            pos = end
            continue
        if kind == "close" and in_exec:
            in_exec = False
            pos = end
            continue
        if kind == "delim" and not (delimiter == ";" and blocks.open):
            finish(pos)
            pos = end
            continue
        if start < 0:
            start = pos
        if delimiter == ";":
            if kind == "word":
                blocks.feed(m[0].upper())
            elif kind in ("str", "bq"):
                blocks.feed(m[0][0] if kind == "bq" else "'")
            elif kind != "exec":
                ch = m[0]
                blocks.feed(ch, label_colon=ch == ":" and sql[end : end + 1] != "=")
        pos = end
    if in_exec:
        raise MigrationFileError(f"{source}: a conditional comment /*! ... is never closed")
    if delimiter != ";":
        # The mysql client would send what follows as one statement, failing after the
        # statements before it ran: refused before anything runs.
        raise MigrationFileError(
            f"{source}: line {delimiter_line}: DELIMITER {delimiter} is never set back; end "
            "the part that needs it with a line `DELIMITER ;` (as mysqldump does)"
        )
    finish(n)
    return tuple(out)
