"""Migration versions as Flyway reads them: numbers separated by dots or underscores (`1`, `1.1`,
`1_1`, `2.0.1`, `001`), compared part by part as numbers, trailing zero parts ignored (`1.0` is
`1`). The text is kept as Flyway records it (underscores become dots, leading zeros stay)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackflow.schema_history import version_parts

MAX_VERSION_CHARS = 50  # the history table's version column, as in Flyway's own table
EXAMPLES = "1, 1.1, 1_1, 2.0.1"


class VersionError(ValueError):
    """A version that is not numbers separated by dots or underscores; says which part."""


@dataclass(frozen=True, eq=False)
class Version:
    """A migration version: `text` as recorded (`1_1` -> `1.1`), `parts` as compared."""

    text: str
    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Version:
        """Read a version as Flyway does.

        Raises:
            VersionError: naming the part that is not a number (or the empty one).
        """
        normalised = text.replace("_", ".")
        parts = version_parts(text)
        if parts is None:
            raise VersionError(_what_is_wrong(text))
        if len(normalised) > MAX_VERSION_CHARS:
            raise VersionError(
                f"the version {text!r} is longer than {MAX_VERSION_CHARS} characters"
            )
        return cls(normalised, parts)

    @classmethod
    def of_record(cls, value: object) -> Version | None:
        """The version of a history row (text, or a number from an older table); None for NULL
        (a repeatable migration) or anything that is not a version."""
        if value is None:
            return None
        parts = version_parts(str(value))
        return None if parts is None else cls(str(value).replace("_", "."), parts)

    @property
    def number_or_text(self) -> int | str:
        """For JSON and records: a number when the version is one (`009` -> 9), its text
        otherwise (`2.0.1`), so readers of whole-number versions see numbers as before."""
        return int(self.text) if self.text.isdigit() else self.text

    @property
    def canonical(self) -> str:
        """The text every way of writing this version shares (`001`, `1.0` and `1` -> `1`)."""
        return ".".join(str(p) for p in self.parts)

    def __eq__(self, other: object) -> bool:
        # A one-number version is that number: V3 == 3, as before versions had parts.
        if isinstance(other, int) and not isinstance(other, bool):
            return self.parts == (other,)
        return isinstance(other, Version) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts[0] if len(self.parts) == 1 else self.parts)

    def __lt__(self, other: Version) -> bool:
        return self.parts < other.parts

    def __le__(self, other: Version) -> bool:
        return self.parts <= other.parts

    def __gt__(self, other: Version) -> bool:
        return self.parts > other.parts

    def __ge__(self, other: Version) -> bool:
        return self.parts >= other.parts

    def __str__(self) -> str:
        return self.text


def _what_is_wrong(text: str) -> str:
    """Which part of a version is wrong, in words."""
    if not text:
        return "the version is empty"
    for number, part in enumerate(re.split(r"[._]", text), 1):
        where = f"part {number} of the version {text!r}"
        if not part:
            return f"{where} is empty (two separators in a row, or one at an end)"
        if not (part.isascii() and part.isdigit()):
            digits = " (versions are ASCII digits 0-9)" if part.isdigit() else ""
            return f"{where}, {part!r}, is not a number{digits}"
    return f"the version {text!r} is not numbers separated by dots or underscores"
