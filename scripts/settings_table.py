"""Print the three settings tables of docs/reference/settings.md from the settings models (docs
follow the code).

`--write` replaces the tables in that page instead (tests/unit/test_settings.py fails while they
differ). Each table starts at its header row and ends at the first line that is not a table row.
"""

from __future__ import annotations

import sys
from pathlib import Path

from stackflow.config.tables import HOMES_IN_ORDER, settings_rows

README = Path(__file__).resolve().parents[1] / "docs" / "reference" / "settings.md"
HEADERS = {
    "environment": "| key in environments/<name>.toml | default | what it is |",
    "project": "| key in stackflow.toml | default | what it is |",
    "machine": "| variable (or .env) | default | what it is |",
}


def table(home: str) -> list[str]:
    lines = [HEADERS[home], "|---|---|---|"]
    for name, default, description in settings_rows(home):
        shown = f"`{default}`" if default else ""
        lines.append(f"| `{name}` | {shown} | {description.replace('|', '/')} |")
    return lines


def write(readme: Path = README) -> None:
    """Replace each table in the README (from its header row to the first line not in it)."""
    lines = readme.read_text().splitlines()
    for home in HOMES_IN_ORDER:
        start = lines.index(HEADERS[home])
        end = start
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        lines = [*lines[:start], *table(home), *lines[end:]]
    readme.write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> None:
    if argv == ["--write"]:
        write()
    elif not argv:
        for home in HOMES_IN_ORDER:
            print("\n".join(table(home)) + "\n")
    else:
        sys.exit("usage: python scripts/settings_table.py [--write]")


if __name__ == "__main__":
    main(sys.argv[1:])
