"""`python -m stackflow.pulumi_cli [ensure|path|version]`, and `ensure_cli`: reuse or build."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from stackflow.errors import EngineUnavailable
from stackflow.pulumi_cli.build import Say, build_cli
from stackflow.pulumi_cli.cache import CLI_VERSION, cli_path, find_cli


def ensure_cli(say: Say = print) -> Path:
    """The Pulumi CLI v<CLI_VERSION> in the cache: reused if there (or on PATH), else built.

    Args:
        say: receives each progress line (default: print).

    Raises:
        EngineUnavailable: as `find_cli` and `build_cli`; the message says what to do.
    """
    found = find_cli()
    if found is None:
        return build_cli(say)
    target = f" (links to {os.readlink(found)})" if found.is_symlink() else ""
    say(f"Pulumi CLI v{CLI_VERSION}: reused {found}{target}")
    return found


def main(argv: list[str] | None = None) -> int:
    """`python -m stackflow.pulumi_cli [ensure|path|version]`; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m stackflow.pulumi_cli",
        description=f"The Pulumi CLI v{CLI_VERSION} that stackflow's automation engine runs.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="ensure",
        choices=["ensure", "path", "version"],
        help="ensure: reuse or build it (default); path: print where it is; version: the one needed",
    )
    command = parser.parse_args(argv).command
    try:
        if command == "version":
            print(f"v{CLI_VERSION}")
        elif command == "path":
            found = find_cli()
            if found is None:
                print(
                    f"no Pulumi CLI v{CLI_VERSION} in {cli_path().parent} or on PATH; "
                    "run `python -m stackflow.pulumi_cli ensure`",
                    file=sys.stderr,
                )
                return 1
            print(found)
        else:
            ensure_cli()
    except EngineUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0
