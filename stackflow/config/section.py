"""What every settings section shares: unknown keys refused, no control characters in text."""

from __future__ import annotations

import unicodedata
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


def no_control_characters(value: Any) -> Any:
    """Refuse a string (or one inside a list) holding a control character such as a newline: a
    setting never needs one, and one that slipped in through a file or variable changes names."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, str) and any(unicodedata.category(c) == "Cc" for c in item):
            raise ValueError("contains a control character (a newline, tab or the like): remove it")
    return value


class Section(BaseModel):
    """A settings section: unknown keys are refused (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _plain_text(cls, value: Any) -> Any:
        return no_control_characters(value)
