"""The view on a terminal: the board drawn with rich, redrawn in place, one row per stack and
step and the resource operation in progress beneath a running one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from cli.live.board import Board
from cli.live.view import View
from stackflow.progress import NodeState

_STYLE = {
    NodeState.WAITING: "dim",
    NodeState.RUNNING: "cyan",
    NodeState.RETRYING: "yellow",
    NodeState.DONE: "green",
    NodeState.SKIPPED: "green",
    NodeState.FAILED: "bold red",
    NodeState.CANCELLED: "yellow",
    NodeState.NOT_RUN: "dim",
}


def render(board: Board) -> Any:
    """The live view: a title, then one row per node, the resource in progress beneath."""
    title, rows = board.rows()
    table = Table.grid(padding=(0, 2))
    for _ in range(4):
        table.add_column(no_wrap=True)
    table.add_column(no_wrap=True, overflow="ellipsis")
    for row in rows:
        mark: Any = (
            Spinner("dots", style="cyan")
            if row.state is NodeState.RUNNING
            else Text("ok" if row.state in (NodeState.DONE, NodeState.SKIPPED) else "")
        )
        table.add_row(
            mark,
            Text(row.name, style="bold"),
            Text(row.word, style=_STYLE.get(row.state, "")),
            Text(f"{row.clock:>6}"),
            Text(row.note),
        )
        if row.current:
            table.add_row("", "", "", "", Text(row.current, style="dim"))
    return Group(Text(title, style="bold"), table)


class LiveView(View):
    """On a terminal: the board, redrawn in place four times a second (rich's Live)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.console = Console(file=stream, highlight=False)
        self._live: Live | None = None

    def say(self, line: str) -> None:
        return None  # the board shows it

    def echo(self, text: str) -> None:
        # printed above the live board; markup off: log lines may hold brackets
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _start(self) -> None:
        self._live = Live(
            get_renderable=lambda: render(self.board),
            console=self.console,
            refresh_per_second=4,
            transient=True,  # the summary table replaces it
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def _stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        self._stop()
        try:
            yield
        finally:
            self._start()

    def __enter__(self) -> View:
        self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()
