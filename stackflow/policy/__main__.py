"""`python -m stackflow.policy ready [PACK ...]`: make each pack's virtualenv now (setup runs it
for the repository's pack), so the first run that checks with it does not wait for pip."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stackflow import PROJECT_ROOT
from stackflow.errors import StackflowError
from stackflow.policy.packs import read_pack
from stackflow.policy.venv import ensure_venv


def main(argv: list[str] | None = None) -> int:
    """Make the virtualenv of each pack named (default: policies/stackflow); the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m stackflow.policy",
        description="Make policy packs' virtualenvs (pulumi-policy from the package index).",
    )
    parser.add_argument("command", choices=["ready"])
    parser.add_argument(
        "packs", nargs="*", type=Path, default=[PROJECT_ROOT / "policies/stackflow"]
    )
    args = parser.parse_args(argv)
    try:
        for folder in args.packs:
            venv = ensure_venv(read_pack(folder).requirements, folder.name, print)
            print(f"policy pack {folder.name}: virtualenv ready ({venv})")
    except StackflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.what_to_do:
            print(f"  what to do: {exc.what_to_do}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
