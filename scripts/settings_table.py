"""Print the README's configuration table from the settings classes (docs follow the code).

`--write` replaces the table in README.md instead (the test in tests/unit/test_settings.py
fails while the two differ).
"""

from __future__ import annotations

import sys
from pathlib import Path

from stackflow.settings import settings_table

README = Path(__file__).resolve().parents[1] / "README.md"
HEADER = "| variable | default | what it is |"


def table() -> list[str]:
    lines = [HEADER, "|---|---|---|"]
    for name, default, description in settings_table():
        shown = f"`{default}`" if default else ""
        lines.append(f"| `{name}` | {shown} | {description.replace('|', '/')} |")
    return lines


def write(readme: Path = README) -> None:
    """Replace the README's table (from its header row to the first line not in the table)."""
    lines = readme.read_text().splitlines()
    start = lines.index(HEADER)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    readme.write_text("\n".join([*lines[:start], *table(), *lines[end:]]) + "\n")


def main(argv: list[str]) -> None:
    if argv == ["--write"]:
        write()
    elif not argv:
        print("\n".join(table()))
    else:
        sys.exit("usage: python scripts/settings_table.py [--write]")


if __name__ == "__main__":
    main(sys.argv[1:])
