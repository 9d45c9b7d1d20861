"""The command line's arguments: commands, options, and the refusals argparse makes itself (a
repeated option, an empty or malformed --stacks list, a --heartbeat out of range).

Nothing heavy is imported here, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.commands import cloud, migrate, rehearse, status, team
from stackflow import exits
from stackflow.errors import echo

COMMANDS = {
    "up": "deploy the environment: networking, database, migrations, app, verification",
    "preview": "show what `up` would change, changing nothing",
    "refresh": "update state from what exists in the cloud",
    "destroy": "destroy the environment's stacks in reverse order",
    "drift": "check every stack for drift; exits 3 when drift is found",
    "outputs": "print the stacks' outputs (secrets masked)",
    "graph": "print the stack graph as Mermaid",
    "migrate": "run schema migrations against the environment's database or --database-url",
    "server": "start, stop or show the local Prefect server the CLI starts when PREFECT_API_URL is unset; stop also stops the local cloud",
    "cloud": "start, stop, show or list the local cloud (moto's AWS APIs on loopback, a MariaDB per database); `up` starts it on demand",
    "team": "team operations: import a one-machine state folder into the team's backend, rotate the team's passphrase",
    "status": "every recorded environment: per stack its last operation, result, commit and condition (ready, reconciling, failed, drifted, expired, waiting for approval)",
    "rehearse": "deploy a Pulumi Python project of your own (a folder with Pulumi.yaml) with stackflow's engine, on the local cloud unless --cloud aws",
}
RUN_COMMANDS = ("up", "preview", "refresh", "destroy", "drift")  # the commands that run a flow


def _seconds(text: str) -> float:
    """A --heartbeat value: seconds, 1 to 3600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{echo(text)} is not a number of seconds") from None
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{value:g} is out of range: use 1 to 3600 seconds")
    return value


def _tag(text: str) -> str:
    """A --tag value: 1-100 printable characters without spaces."""
    if not 1 <= len(text) <= 100 or not text.isprintable() or " " in text:
        raise argparse.ArgumentTypeError(
            f"{echo(text)} is not a tag: 1-100 printable characters, no spaces"
        )
    return text


class _Once(argparse.Action):
    """An option that may be given once: a second value is refused, never "the last one wins"."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option} given twice: give it once")
        setattr(namespace, self.dest, values)


class _StackList(argparse.Action):
    """`--stacks a,b`; repeating it adds to the list (a union). An empty list is refused: leaving
    the option out is how to run every stack."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        names = [n.strip() for n in str(values).split(",")]
        if not any(names):
            parser.error(
                f"{option} {echo(str(values))} names no stack: leave it out to run every stack, "
                "or name some (comma-separated)"
            )
        if "" in names:
            parser.error(f"{option} {echo(str(values))} has an empty name between commas")
        chosen = list(getattr(namespace, self.dest, None) or [])
        setattr(namespace, self.dest, chosen + [n for n in names if n not in chosen])


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python flows/run.py`: one subcommand per entry of COMMANDS."""
    parser = argparse.ArgumentParser(
        prog="python flows/run.py",
        description="Deploy a whole environment (networking, database, app) as one Prefect pipeline.",
        epilog="What an environment deploys comes from environments/<name>.toml in the project; "
        "what belongs to this machine from STACKFLOW_* variables and .env (see README). The real "
        "Pulumi engine deploys where the environment's file says (`cloud`), local by default: "
        "the local cloud (moto on loopback); nothing reaches AWS unless the file says "
        'cloud = "aws" (or --cloud aws).\n\n' + exits.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, text in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=text,
            description=text,
            epilog=exits.help_text(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name != "rehearse":  # a rehearsal names its project's own stack (--stack)
            p.add_argument(
                "--env",
                "-e",
                dest="environment",
                action=_Once,
                help="environment name: environments/<name>.toml says what it deploys (default: "
                "dev); give it once",
            )
        p.add_argument(
            "--cloud",
            choices=("local", "aws"),
            action=_Once,
            help="where to rehearse: local (the default: moto on loopback, never AWS) or aws"
            if name == "rehearse"
            else "deploy here instead of where the environment's file says (`cloud`; local: "
            "moto on loopback, never AWS)",
        )
        if name in ("up", "preview", "refresh", "destroy", "drift", "outputs"):
            p.add_argument(
                "--stacks",
                action=_StackList,
                help="comma-separated stacks to run (default: all); repeating it adds to the list",
            )
        if name in (*RUN_COMMANDS, "rehearse"):
            p.add_argument(
                "--json",
                action="store_true",
                help="print the run's summary as one JSON object (progress goes to stderr)",
            )
            p.add_argument(
                "--verbose",
                "-v",
                action="store_true",
                help="also show Prefect's and Pulumi's own log lines as they come (they always go "
                "to the log file in the state folder)",
            )
            p.add_argument(
                "--heartbeat",
                type=_seconds,
                default=30.0,
                metavar="SECONDS",
                help="without a terminal, a line for a stack that has run quietly this long "
                "(1-3600, default 30)",
            )
        if name in RUN_COMMANDS:
            p.add_argument(
                "--tag",
                action="append",
                dest="tags",
                metavar="TAG",
                type=_tag,
                help="a tag for the run's flow run in Prefect (repeatable; a sync tags its runs "
                "gitops and commit:<id>)",
            )
        if name == "up":
            p.add_argument("--force", action="store_true", help="update stacks even if unchanged")
            p.add_argument(
                "--approve-in-ui",
                action="store_true",
                help="a protected environment's plan waits for a decision in the Prefect UI, "
                "with no terminal asked (what a sync's run does)",
            )
            p.add_argument(
                "--yes",
                "-y",
                action="store_true",
                help="approve the plan of a protected (prod) environment: it is printed, recorded "
                "as approved at this command line, and applied",
            )
        if name == "destroy":
            p.add_argument(
                "--yes",
                "-y",
                action="store_true",
                help="confirm destroying a protected (prod) environment",
            )
        if name == "outputs":
            p.add_argument(
                "--json", action="store_true", help="print one JSON object keyed by stack"
            )
        if name in ("graph", "server"):
            p.add_argument("--json", action="store_true", help="print one JSON object")
        if name == "server":
            p.add_argument(
                "action",
                choices=("start", "stop", "status", "automation", "backup", "restore"),
                help="what to do (automation: install the crashed-run automation on the server "
                "PREFECT_API_URL names, a team's own; backup FILE / restore FILE: every database "
                "of the project's PostgreSQL, team mode on this machine)",
            )
            p.add_argument(
                "file",
                nargs="?",
                type=Path,
                metavar="FILE",
                help="backup, restore: the backup file (written 0600; a restore replaces exactly "
                "the databases it holds, with the Prefect server stopped)",
            )
            p.add_argument(
                "--database",
                choices=("sqlite", "postgres"),
                help="start: the server's database. sqlite (the default: one person) or postgres "
                "(team mode on this machine: the project's own PostgreSQL, which also holds the "
                "Pulumi state and stackflow's records; Prefect's basic auth on)",
            )
        if name == "migrate":
            migrate.add_arguments(p)
        if name == "cloud":
            cloud.add_arguments(p)
        if name == "status":
            status.add_arguments(p)
        if name == "rehearse":
            p.add_argument(
                "--stack",
                "-s",
                metavar="NAME",
                action=_Once,
                help="the project's stack: whose Pulumi.<stack>.yaml config to use and whose "
                "name to deploy under (default: the project's only stack file, else dev); give "
                "it once",
            )
            rehearse.add_arguments(p)
        if name == "team":
            team.add_arguments(p)
    return parser


def chosen_stacks(args: argparse.Namespace) -> list[str]:
    """The stacks --stacks names ([] when it is left out: every stack).

    Raises:
        UnknownStackError: a name the graph does not declare, naming the accepted stacks.
    """
    names: list[str] = list(getattr(args, "stacks", None) or [])
    from graph import GRAPH

    GRAPH.select(names)
    return names
