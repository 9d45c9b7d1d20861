"""Migration files: `V<version>__<description>.sql` and `R__<description>.sql` in one folder
(names: stackflow.migrator.names), loaded versioned first by version, then repeatable by
description (the order Flyway applies them in), each with the sha256 of its text (line endings
normalised) and Flyway's CRC32, and its statements split on first use."""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from stackflow.migrator.errors import MigrationFileError
from stackflow.migrator.lint import destructive_ok_reason
from stackflow.migrator.names import FILE_PATTERN, MigrationNameError, is_candidate, parse_name
from stackflow.migrator.splitter import Statement, split_statements
from stackflow.migrator.version import Version

MAX_DESCRIPTION_CHARS = 200  # the history table's description column, as in Flyway's

# Comments, whitespace, semicolons and DELIMITER lines at the start of a file; MySQL's executable
# comments (/*! ... */) are real SQL. A file that is all of this has no statements.
_NOT_SQL_RE = re.compile(
    r"(?:--[^\n]*|#[^\n]*|/\*(?!!).*?\*/|\s+|;|^[ \t]*delimiter[^\n]*)*", re.S | re.I | re.M
)


@dataclass(frozen=True)
class Migration:
    """One migration file: version (None: repeatable), description, where it is, its text and
    sha256 checksum."""

    version: Version | None
    description: str
    path: Path
    sql: str
    checksum: str

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def repeatable(self) -> bool:
        """An `R__` file: applied after the versioned ones, again whenever it changes."""
        return self.version is None

    @property
    def key(self) -> str:
        """What identifies it across runs and approvals: `V<version>` (`V1.1`; `V001` and `V1`
        are one version) or `R__<description>`."""
        return f"V{self.version.canonical}" if self.version else f"R__{self.description}"

    @cached_property
    def flyway_checksum(self) -> int:
        """Flyway's checksum of the file (what its history table records)."""
        return flyway_checksum(self.sql)

    @cached_property
    def statements(self) -> tuple[Statement, ...]:
        """The file's statements, split on first use so a no-op run parses nothing.

        Raises:
            MigrationFileError: the file has no statements, an unterminated string or comment,
                or a DELIMITER that is never set back.
        """
        statements = split_statements(self.sql, source=self.filename)
        if not statements:
            raise MigrationFileError(_empty_file_message(self.path))
        return statements

    @cached_property
    def destructive_ok(self) -> str | None:
        """The reason given by the file's `-- stackflow: destructive-ok <reason>` marker."""
        return destructive_ok_reason(self.sql)


def _empty_file_message(path: Path) -> str:
    return f"{path}: has no SQL statements (only comments or whitespace); expected {FILE_PATTERN}"


def checksum_of(text: str) -> str:
    """sha256 of a file's text with line endings normalised, so a CRLF checkout matches."""
    normalised = text.removeprefix("\ufeff").replace("\r\n", "\n")
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def flyway_checksum(text: str) -> int:
    """Flyway's checksum of a file: CRC32 over the UTF-8 bytes of each line without its line
    break (a byte-order mark dropped), as a signed 32-bit number. The CRC of the lines one after
    another is the CRC of the text with its line breaks removed."""
    lines = text.removeprefix("\ufeff").replace("\r", "").replace("\n", "")
    value = zlib.crc32(lines.encode("utf-8"))
    return value - (1 << 32) if value >= 1 << 31 else value


def _order(m: Migration) -> tuple[int, tuple[int, ...], str]:
    return (1, (), m.description) if m.version is None else (0, m.version.parts, "")


def load_migrations(folder: Path) -> list[Migration]:
    """Read every migration file in `folder`: versioned ones by version, then repeatable ones by
    description.

    Files that look like neither a migration nor SQL (README.md, .gitkeep) are ignored.

    Args:
        folder: the migrations folder.

    Raises:
        MigrationFileError: the folder is missing or empty, or a file has a malformed name (the
            message names the part that is wrong), a duplicate version or repeatable
            description, is a folder or a symbolic link, is unreadable or has no statements; the
            message names the file.
    """
    if not folder.is_dir():
        raise MigrationFileError(
            f"migrations folder {folder} does not exist; it should hold {FILE_PATTERN} files"
        )
    found: dict[str, Migration] = {}
    for path in sorted(folder.iterdir()):
        if not is_candidate(path.name):
            continue
        if path.is_symlink():
            raise MigrationFileError(
                f"{path}: is a symbolic link (to {path.readlink()}), not a file; migrations must "
                "be regular files in the folder: copy the file in instead"
            )
        if path.is_dir():
            raise MigrationFileError(
                f"{path}: is a folder, not a migration file; move it out of the migrations folder"
            )
        try:
            name = parse_name(path.name)
        except MigrationNameError as exc:
            raise MigrationFileError(
                f"{path}: malformed migration file name: {exc}; accepted: {FILE_PATTERN}"
            ) from None
        if not path.is_file():
            raise MigrationFileError(f"{path}: is not a regular file; accepted: {FILE_PATTERN}")
        try:
            text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        except (OSError, UnicodeDecodeError) as exc:
            raise MigrationFileError(f"{path}: cannot be read as UTF-8 text ({exc})") from exc
        m = Migration(
            name.version, name.description[:MAX_DESCRIPTION_CHARS], path, text, checksum_of(text)
        )
        if m.key in found:
            what = (
                f"duplicate version {m.version}"
                if m.version
                else f"duplicate repeatable description {m.description!r}"
            )
            raise MigrationFileError(
                f"{path}: {what} (also {found[m.key].filename}); each file needs its own: "
                f"{FILE_PATTERN}"
            )
        found[m.key] = m
        if _NOT_SQL_RE.match(text).end() == len(text):  # type: ignore[union-attr]
            raise MigrationFileError(_empty_file_message(path))
    if not found:
        raise MigrationFileError(
            f"migrations folder {folder} has no migration files; expected {FILE_PATTERN}"
        )
    return sorted(found.values(), key=_order)
