"""The options several commands share, each added by one function (a command's table entry lists
the ones it takes), and the refusals argparse makes itself: a repeated option, an empty or
malformed --stacks list, a --heartbeat out of range, a tag with spaces.

Nothing heavy is imported here, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stackflow.errors import StackflowError, echo

if TYPE_CHECKING:
    from stackflow.dag import StackGraph


class Refused(StackflowError, ValueError):
    """A run the command line refuses before it starts (exit 2), with what to do instead."""


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


class Once(argparse.Action):
    """An option that may be given once: a second value is refused, never "the last one wins"."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option} given twice: give it once")
        setattr(namespace, self.dest, values)


class _StackList(argparse.Action):
    """`--stacks a,b`; repeating it adds to the list (a union). An empty list is refused: leaving
    the option out is how to run every stack."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option: str | None = None,
    ) -> None:
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


def environment(parser: argparse.ArgumentParser) -> None:
    """--env/-e: the environment whose file says what the command acts on."""
    parser.add_argument(
        "--env",
        "-e",
        dest="environment",
        action=Once,
        help="environment name: environments/<name>.toml says what it deploys (default: dev); "
        "give it once",
    )


def cloud(
    parser: argparse.ArgumentParser,
    help: str = "deploy here instead of where the environment's file says (`cloud`; local: "
    "moto on loopback, never AWS)",
) -> None:
    """--cloud: where to deploy, instead of where the environment's file says (`help` for a
    command whose default is another)."""
    parser.add_argument("--cloud", choices=("local", "aws"), action=Once, help=help)


def stacks(parser: argparse.ArgumentParser) -> None:
    """--stacks: the stacks to act on (read back with `chosen_stacks`)."""
    parser.add_argument(
        "--stacks",
        action=_StackList,
        help="comma-separated stacks to run (default: all); repeating it adds to the list",
    )


def live(parser: argparse.ArgumentParser) -> None:
    """--json, --verbose and --heartbeat: how a run (a flow, a rehearsal) shows itself."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the run's summary as one JSON object (progress goes to stderr)",
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also show Prefect's and Pulumi's own log lines as they come (they always go to "
        "the log file in the state folder)",
    )
    parser.add_argument(
        "--heartbeat",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="without a terminal, a line for a stack that has run quietly this long (1-3600, "
        "default 30)",
    )


def tags(parser: argparse.ArgumentParser) -> None:
    """--tag: tags of the run's flow run in Prefect."""
    parser.add_argument(
        "--tag",
        action="append",
        dest="tags",
        metavar="TAG",
        type=_tag,
        help="a tag for the run's flow run in Prefect (repeatable; a sync tags its runs gitops "
        "and commit:<id>)",
    )


def json_object(parser: argparse.ArgumentParser) -> None:
    """--json: the answer as one JSON object on stdout."""
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def chosen_stacks(args: argparse.Namespace, graph: StackGraph | None = None) -> list[str]:
    """The stacks --stacks names ([] when it is left out: every stack), checked against `graph`
    (default: the graph of the project STACKFLOW_PROJECT_DIR names, else this checkout).

    Raises:
        UnknownStackError: a name the graph does not declare, naming the accepted stacks.
    """
    names: list[str] = list(getattr(args, "stacks", None) or [])
    if graph is None:
        from stackflow.graphs import project_graph

        graph = project_graph()
    graph.select(names)
    return names
