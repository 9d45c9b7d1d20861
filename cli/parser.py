"""The command line's parser, built from the table of commands (cli/commands/__init__.py): one
subcommand per entry, with the help line and the options the entry gives.

Nothing heavy is imported here, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from cli.command import CodeCommand, Command
from cli.commands import COMMANDS
from cli.report import print_outcome
from stackflow import exits


class Parser(argparse.ArgumentParser):
    """argparse's parser, except that a refused command line that asks for --json also gets its
    one JSON object on stdout (as every other outcome does); the refusal is on stderr as ever."""

    def __init__(self, *args: Any, asked: dict[str, bool] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.root = asked is None  # the parser of the whole command line, not a subcommand's
        self.asked = {} if asked is None else asked  # shared with its subcommands' parsers

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads, one body here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.root:
            self.asked["json"] = "--json" in (sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if self.asked.get("json"):
            print_outcome(message, exits.USAGE, f"`{self.prog} --help` says what it accepts")
        super().error(message)


def build_parser(commands: Sequence[Command | CodeCommand] = COMMANDS) -> argparse.ArgumentParser:
    """The parser of `python flows/run.py`: one subcommand per entry of `commands` (default: the
    table of commands), in order."""
    parser = Parser(
        prog="python flows/run.py",
        description="Deploy a whole environment (networking, database, app) as one Prefect pipeline.",
        epilog="What an environment deploys comes from environments/<name>.toml in the project; "
        "what belongs to this machine from STACKFLOW_* variables and .env (see docs/concepts/configuration.md). The real "
        "Pulumi engine deploys where the environment's file says (`cloud`), local by default: "
        "the local cloud (moto on loopback); nothing reaches AWS unless the file says "
        'cloud = "aws" (or --cloud aws).\n\n' + exits.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands:
        p = sub.add_parser(
            command.name,
            asked=parser.asked,
            help=command.help,
            description=command.help,
            epilog=exits.help_text(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        for add_options in command.options:
            add_options(p)
    return parser
