"""Migration files: `V<version>__<description>.sql` in one folder, loaded sorted by version, each
with the sha256 of its text (line endings normalised) and its statements split on first use."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from stackflow.migrator.errors import MigrationFileError
from stackflow.migrator.lint import destructive_ok_reason
from stackflow.migrator.splitter import Statement, split_statements

FILE_PATTERN = "V<version>__<description>.sql (e.g. V001__create_hello_pulumi.sql)"
MAX_DESCRIPTION_CHARS = 200  # the history table's description column

# Versions are stored as BIGINT; 18 digits leaves room for timestamps like 20250101120000.
_NAME_RE = re.compile(
    r"^V(?P<version>[0-9]{1,18})__(?P<description>[A-Za-z0-9][A-Za-z0-9_-]*)\.sql$", re.ASCII
)
# Anything that looks like it was meant to be a migration must match the pattern exactly.
# (Unicode digits too, so an Arabic-Indic version is reported instead of ignored.)
_CANDIDATE_RE = re.compile(r"(^[Vv]\d)|(\.sql$)", re.IGNORECASE)
# Comments, whitespace and semicolons; MySQL's executable comments (/*! ... */) are real SQL.
_NOT_SQL_RE = re.compile(
    r"--[^\n]*|#[^\n]*|/\*(?!!).*?\*/|\s+|;|^[ \t]*delimiter[^\n]*", re.S | re.I | re.M
)


@dataclass(frozen=True)
class Migration:
    """One migration file: version, description, where it is, its text and sha256 checksum."""

    version: int
    description: str
    path: Path
    sql: str
    checksum: str

    @property
    def filename(self) -> str:
        return self.path.name

    @cached_property
    def statements(self) -> tuple[Statement, ...]:
        """The file's statements, split on first use so a no-op run parses nothing.

        Raises:
            MigrationFileError: the file has no statements, or an unterminated string or comment.
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


def load_migrations(folder: Path) -> list[Migration]:
    """Read every `V<version>__<description>.sql` file in `folder`, sorted by version.

    Files that look like neither a migration nor SQL (README.md, .gitkeep) are ignored.

    Args:
        folder: the migrations folder.

    Raises:
        MigrationFileError: the folder is missing or empty, or a file has a malformed name (a
            version in other than ASCII digits too), a duplicate version, is a folder or a
            symbolic link, is unreadable or has no statements; the message names the file.
    """
    if not folder.is_dir():
        raise MigrationFileError(
            f"migrations folder {folder} does not exist; it should hold {FILE_PATTERN} files"
        )
    found: dict[int, Migration] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not _CANDIDATE_RE.search(path.name):
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
        match = _NAME_RE.match(path.name)
        if match is None or not path.is_file():
            hint = " (versions are ASCII digits 0-9)" if re.match(r"^V\d", path.name) else ""
            raise MigrationFileError(
                f"{path}: malformed migration file name{hint}; accepted: {FILE_PATTERN}"
            )
        version = int(match["version"])
        if version in found:
            raise MigrationFileError(
                f"{path}: duplicate version {version} (also {found[version].filename}); "
                f"each file needs its own version: {FILE_PATTERN}"
            )
        try:
            text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        except (OSError, UnicodeDecodeError) as exc:
            raise MigrationFileError(f"{path}: cannot be read as UTF-8 text ({exc})") from exc
        description = match["description"].replace("_", " ")[:MAX_DESCRIPTION_CHARS]
        found[version] = Migration(version, description, path, text, checksum_of(text))
        if not _NOT_SQL_RE.sub("", text):
            raise MigrationFileError(_empty_file_message(path))
    if not found:
        raise MigrationFileError(
            f"migrations folder {folder} has no migration files; expected {FILE_PATTERN}"
        )
    return [found[v] for v in sorted(found)]
