"""A survey: a preview in which the plugins answer for the types and functions they do not serve
instead of refusing the first one, and write each one down, so one preview names all of them.

The engine asks for it by naming a file in SURVEY_ENV for one preview's `pulumi` (its plugins
inherit the variable). Outside a survey, and in any update, an unserved type is refused as before.
The aws and random plugins are separate processes: each appends whole lines (O_APPEND), the reader
drops repeats.
"""

from __future__ import annotations

import os
from pathlib import Path

SURVEY_ENV = "STACKFLOW_LOCALCLOUD_SURVEY"  # the file a survey preview's plugins write to
RESOURCE = "resource"
FUNCTION = "function"


class Survey:
    """The file one survey preview's plugins write the unserved tokens to."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def from_environment(cls) -> Survey | None:
        """The survey this plugin process takes part in, if the engine asked for one."""
        named = os.environ.get(SURVEY_ENV)
        return cls(Path(named)) if named else None

    def record(self, kind: str, token: str) -> None:
        """Write down one unserved resource type or function (a line: kind, a tab, the token)."""
        line = f"{kind}\t{token}\n".encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def read_survey(path: Path) -> list[tuple[str, str]]:
    """What a survey found: (kind, token) pairs, sorted, each once; [] when nothing was written."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found = {tuple(line.split("\t", 1)) for line in text.splitlines() if "\t" in line}
    return sorted((kind, token) for kind, token in found)
