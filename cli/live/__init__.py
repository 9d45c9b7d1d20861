"""What the command line shows while a run works, and where the engine's own log lines go.

On a terminal: a live view (rich), one line per stack and step with its state, updated in place,
and under a running stack the resource operation in progress (`terminal`). Elsewhere (CI, pipes):
one line with a timestamp per state change, and a heartbeat line for a node that has run quietly
for a while (`plain`). Both read one `board`. Prefect's and Pulumi's log lines go to a log file in
the state folder (and, as always, to the Prefect server); `-v` also shows them as they come (`logs`).
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console

from cli.live.board import Board
from cli.live.logs import new_log_file, routed_logs
from cli.live.plain import HEARTBEAT_S, PlainView
from cli.live.terminal import LiveView
from cli.live.view import View

__all__ = [
    "HEARTBEAT_S",
    "Board",
    "LiveView",
    "PlainView",
    "View",
    "make_view",
    "new_log_file",
    "routed_logs",
]


def make_view(stream: TextIO, heartbeat_s: float = HEARTBEAT_S) -> View:
    """A live view on a terminal (and not a dumb one), plain lines otherwise."""
    console = Console(file=stream)
    if stream.isatty() and not console.is_dumb_terminal:
        return LiveView(stream)
    return PlainView(stream, heartbeat_s)
