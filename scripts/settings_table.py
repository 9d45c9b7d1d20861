"""Print the README's configuration table from the settings classes (docs follow the code)."""

from __future__ import annotations

from stackflow.settings import settings_table


def main() -> None:
    print("| variable | default | what it is |")
    print("|---|---|---|")
    for name, default, description in settings_table():
        shown = f"`{default}`" if default else ""
        print(f"| `{name}` | {shown} | {description.replace('|', '/')} |")


if __name__ == "__main__":
    main()
