"""Migration file names as Flyway reads them: `V<version>__<description>.sql` (versioned, run once)
and `R__<description>.sql` (repeatable, run again whenever the file changes). The description
follows the first `__`; its underscores read as spaces, and it may hold dots and spaces. A name
that is wrong is refused, naming the part that is wrong: the prefix, the version (and which part of
it), the `__` separator, the description or the suffix."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackflow.migrator.version import EXAMPLES, Version, VersionError

FILE_PATTERN = (
    "V<version>__<description>.sql or R__<description>.sql (e.g. V001__create_hello_pulumi.sql, "
    f"V2.1__add_index.sql, R__views.sql; versions like {EXAMPLES})"
)
SEPARATOR = "__"
SUFFIX = ".sql"
# Flyway runs files named after these events as callbacks, never as migrations.
FLYWAY_CALLBACKS = frozenset(
    [
        "beforeMigrate",
        "beforeEachMigrate",
        "beforeEachMigrateStatement",
        "afterEachMigrateStatement",
        "afterEachMigrateStatementError",
        "afterEachMigrate",
        "afterEachMigrateError",
        "beforeRepeatables",
        "afterVersioned",
        "afterMigrateApplied",
        "afterMigrate",
        "afterMigrateError",
        "beforeClean",
        "afterClean",
        "afterCleanError",
        "beforeValidate",
        "afterValidate",
        "afterValidateError",
        "beforeBaseline",
        "afterBaseline",
        "afterBaselineError",
        "beforeRepair",
        "afterRepair",
        "afterRepairError",
        "beforeInfo",
        "afterInfo",
        "afterInfoError",
        "beforeUndo",
        "beforeEachUndo",
        "beforeEachUndoStatement",
        "afterEachUndoStatement",
        "afterEachUndoStatementError",
        "afterEachUndo",
        "afterEachUndoError",
        "afterUndo",
        "afterUndoError",
        "createSchema",
        "beforeCreateSchema",
        "beforeConnect",
        "afterConnect",
    ]
)
# Anything that looks like it was meant to be a migration must parse. (Unicode digits too, so an
# Arabic-Indic version is reported instead of ignored.)
_CANDIDATE_RE = re.compile(r"(^[VvRr]\d)|(^[Rr]__)|(\.sql$)", re.IGNORECASE)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


class MigrationNameError(ValueError):
    """A file name that is not a migration's; the message says which part is wrong."""


@dataclass(frozen=True)
class MigrationName:
    """A parsed file name: its version (None: repeatable) and description (underscores read as
    spaces)."""

    version: Version | None
    description: str


def is_candidate(name: str) -> bool:
    """The file looks meant to be a migration (or is SQL), so its name must parse."""
    return not name.startswith(".") and _CANDIDATE_RE.search(name) is not None


def parse_name(name: str) -> MigrationName:
    """Read a migration file's name as Flyway does.

    Raises:
        MigrationNameError: naming the part that is wrong and what is accepted there.
    """
    if not name.endswith(SUFFIX):
        raise MigrationNameError(
            f"the suffix is wrong: migration files end in {SUFFIX} (lower case)"
        )
    stem = name[: -len(SUFFIX)]
    callback = stem.split(SEPARATOR, 1)[0]
    if callback in FLYWAY_CALLBACKS:
        raise MigrationNameError(
            f"is a Flyway callback ({callback}), which stackflow does not run; move it out of "
            "the migrations folder (or put its SQL in a migration)"
        )
    prefix, rest = stem[:1], stem[1:]
    if prefix == "U" and rest[:1].isdigit():
        raise MigrationNameError(
            "is a Flyway undo migration (U<version>__...), which stackflow does not run; move it "
            "out of the migrations folder"
        )
    if prefix in ("v", "r"):
        raise MigrationNameError(f"the prefix is a lower-case {prefix!r}: it is {prefix.upper()!r}")
    if prefix not in ("V", "R"):
        raise MigrationNameError(
            "the prefix is wrong: V (versioned) or R (repeatable) starts the name"
        )
    head, found, description = rest.partition(SEPARATOR)
    if prefix == "R":
        if head or not found:
            raise MigrationNameError(
                "a repeatable migration has no version: R__<description>.sql (two underscores "
                "after the R)"
            )
        return MigrationName(None, _description(description))
    if not found:
        hint = " (one underscore is not enough: V1__create_table.sql)" if "_" in head else ""
        raise MigrationNameError(
            f"no {SEPARATOR} (two underscores) between the version and the description{hint}"
        )
    if not head:
        raise MigrationNameError(f"the version is missing between V and {SEPARATOR}")
    try:
        version = Version.parse(head)
    except VersionError as exc:
        raise MigrationNameError(f"{exc}; versions look like {EXAMPLES}") from None
    return MigrationName(version, _description(description))


def _description(text: str) -> str:
    if not text:
        raise MigrationNameError(f"the description after {SEPARATOR} is empty")
    if _CONTROL_RE.search(text):
        raise MigrationNameError(
            "the description holds a control character (a line break, a tab ...)"
        )
    return text.replace("_", " ")
