"""What the command line shows while a run works, and where the engine's own log lines go.

On a terminal: a live view (rich), one line per stack and step with its state, updated in place,
and under a running stack the resource operation in progress. Elsewhere (CI, pipes): one line
with a timestamp per state change, and a heartbeat line for a node that has run quietly for a
while. Prefect's and Pulumi's log lines go to a log file in the state folder (and, as always, to
the Prefect server); `-v` also shows them as they come.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from stackflow.engine.base import ChangeCounts
from stackflow.progress import (
    FINAL_STATES,
    ApprovalDecided,
    ApprovalRequested,
    NodeChanged,
    NodeState,
    ProgressEvent,
    ResourceProgress,
    ResourcesDeclared,
    RunStarted,
    elapsed,
)

HEARTBEAT_S = 30.0  # a quiet node gets a line this often without a terminal
KEEP_LOGS = 30  # log files kept per state folder
_VERB = {
    "create": "creating",
    "update": "updating",
    "replace": "replacing",
    "delete": "deleting",
    "refresh": "reading",
}
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


def _counted(resource_type: str) -> bool:
    """Resources a program declares (the engine's own stack and providers are not)."""
    return not resource_type.startswith(("pulumi:providers:", "pulumi:pulumi:Stack"))


def describe_changes(changes: ChangeCounts | None, would: bool = False) -> str:
    """`3 created, 1 updated` (`3 to create, 1 to update` for what a preview would do), or
    `no changes`."""
    if changes is None:
        return ""
    words = ("create", "update", "replace", "delete")
    done = ("created", "updated", "replaced", "deleted")
    counts = (changes.create, changes.update, changes.replace, changes.delete)
    parts = [
        f"{n} to {verb}" if would else f"{n} {past}"
        for n, verb, past in zip(counts, words, done, strict=True)
        if n
    ]
    return ", ".join(parts) or "no changes"


@dataclass
class _Node:
    state: NodeState = NodeState.WAITING
    started: float | None = None  # monotonic, when it first ran
    ended: float | None = None
    status: str = ""
    detail: str = ""
    changes: ChangeCounts | None = None
    attempt: int = 1
    next_attempt_at: float | None = None
    total: int | None = None  # resources the program declared
    done: int = 0
    active: dict[str, tuple[str, float]] = field(default_factory=dict)  # urn -> (label, since)
    last_line: float = 0.0  # monotonic, when a plain line last spoke of it


class Board:
    """The state of the runs this command shows, built from progress events; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.nodes: dict[str, _Node] = {}
        self.title = ""
        self.flow_run_id: str | None = None  # the run shown (to end it if the CLI must stop)
        self.started = time.monotonic()
        self.would = False  # the phase only looks (plan, preview): counts are what it would do

    def apply(self, event: ProgressEvent) -> list[str]:
        """Take in `event`; the plain lines it deserves (none for a resource's progress)."""
        with self._lock:
            return self._apply(event)

    def _apply(self, event: ProgressEvent) -> list[str]:
        if isinstance(event, RunStarted):
            self.nodes = {name: _Node() for name in event.nodes}
            self.started = time.monotonic()
            self.title = f"{event.operation} {event.environment}  [{event.target}]"
            self.flow_run_id = event.flow_run_id
            self.would = event.operation in ("plan", "preview", "drift")
            return [f"{self.title}: {', '.join(event.nodes)}"]
        if isinstance(event, ResourcesDeclared):
            node = self.nodes.setdefault(event.node, _Node())
            node.total = event.total
            return []
        if isinstance(event, ResourceProgress):
            node = self.nodes.setdefault(event.node, _Node())
            if event.status == "started" and event.change in _VERB and _counted(event.type):
                label = f"{_VERB[event.change]} {event.type} {event.name}"
                node.active[event.urn] = (label, time.monotonic())
            elif event.status in ("done", "failed"):
                node.active.pop(event.urn, None)
                if event.status == "done" and _counted(event.type):
                    node.done += 1
            return []
        if isinstance(event, NodeChanged):
            return self._node_changed(event)
        return []

    def _node_changed(self, event: NodeChanged) -> list[str]:
        node = self.nodes.setdefault(event.node, _Node())
        now = time.monotonic()
        if event.state is NodeState.RUNNING and node.started is None:
            node.started = now
        if event.state is NodeState.RUNNING and node.state is NodeState.RETRYING:
            node.done, node.active = 0, {}  # a new attempt counts again
        if event.state in FINAL_STATES:
            node.ended = now
            node.active = {}
        repeated = event.state is node.state and event.detail == node.detail
        node.state, node.detail, node.attempt = event.state, event.detail, event.attempt
        node.status = event.status or node.status
        node.changes = event.changes if event.changes is not None else node.changes
        node.next_attempt_at = event.next_attempt_at
        if repeated:
            return []
        node.last_line = now
        return [f"{event.node}: {self._words(event.node, node)}"]

    def _words(self, name: str, node: _Node) -> str:
        """A node's state as one line of words (plain mode; the live view's note column)."""
        state = node.state
        took = f" in {elapsed(self._took(node))}" if node.started is not None else ""
        if state is NodeState.RUNNING:
            again = f" (attempt {node.attempt})" if node.attempt > 1 else ""
            return f"running{again}" + (f": {node.detail}" if node.detail else "")
        if state is NodeState.WAITING:
            return "waiting" + (f": {node.detail}" if node.detail else "")
        if state is NodeState.RETRYING:
            when = ""
            if node.next_attempt_at is not None:
                moment = datetime.fromtimestamp(node.next_attempt_at).strftime("%H:%M:%S")
                when = f"; attempt {node.attempt + 1} at {moment}"
                when += f" (in {elapsed(node.next_attempt_at - time.time())})"
            return f"attempt {node.attempt} failed: {headline(node.detail)}{when}"
        if state is NodeState.DONE:
            what = (
                describe_changes(node.changes, self.would)
                if node.changes is not None
                else node.detail
            )
            return f"{node.status or 'done'}" + (f" ({what})" if what else "") + took
        if state is NodeState.SKIPPED:
            return f"{node.status or 'skipped'}" + (f": {node.detail}" if node.detail else "")
        if state is NodeState.FAILED:
            return f"failed{took}: {headline(node.detail)}"
        return f"{state.value}" + (f": {_short(node.detail)}" if node.detail else "")

    @staticmethod
    def _took(node: _Node) -> float:
        assert node.started is not None
        return (node.ended or time.monotonic()) - node.started

    def heartbeat(self, every: float) -> list[str]:
        """A line for each node that has run without a line for `every` seconds."""
        with self._lock:
            now, lines = time.monotonic(), []
            for name, node in self.nodes.items():
                if node.state not in (NodeState.RUNNING, NodeState.WAITING, NodeState.RETRYING):
                    continue
                if node.state is NodeState.WAITING and node.started is None:
                    continue  # waiting for its upstream: the upstream's line says enough
                if now - node.last_line < every:
                    continue
                node.last_line = now
                lines.append(f"{name}: still {self._progress(node)}")
            return lines

    def _progress(self, node: _Node) -> str:
        """`running 1m10s, 3/7 resources; creating aws:rds/instance:Instance db (58s)`."""
        text = f"{node.state.value} {elapsed(self._took(node))}" if node.started else "waiting"
        if node.total is not None:
            text += f", {node.done}/{node.total} resources"
        elif node.done:
            text += f", {node.done} resources done"
        current = self._current(node)
        return text + (f"; {current}" if current else "")

    @staticmethod
    def _current(node: _Node) -> str:
        if not node.active:
            return ""
        label, since = max(node.active.values(), key=lambda item: item[1])
        more = f" and {len(node.active) - 1} more" if len(node.active) > 1 else ""
        return f"{label} ({elapsed(time.monotonic() - since)}){more}"

    def render(self) -> Any:
        """The live view: a title, then one row per node, the resource in progress beneath."""
        with self._lock:
            table = Table.grid(padding=(0, 2))
            for _ in range(4):
                table.add_column(no_wrap=True)
            table.add_column(no_wrap=True, overflow="ellipsis")
            for name, node in self.nodes.items():
                state = node.state
                mark: Any = (
                    Spinner("dots", style="cyan")
                    if state is NodeState.RUNNING
                    else Text("ok" if state in (NodeState.DONE, NodeState.SKIPPED) else "")
                )
                word = node.status if state in FINAL_STATES and node.status else state.value
                clock = elapsed(self._took(node)) if node.started is not None else ""
                table.add_row(
                    mark,
                    Text(name, style="bold"),
                    Text(word, style=_STYLE.get(state, "")),
                    Text(f"{clock:>6}"),
                    Text(_short(self._note(node), 100)),
                )
                current = self._current(node) if state is NodeState.RUNNING else ""
                if current:
                    table.add_row("", "", "", "", Text(current, style="dim"))
            head = Text(f"{self.title}   {elapsed(time.monotonic() - self.started)}", style="bold")
            return Group(head, table)

    def _note(self, node: _Node) -> str:
        """The live view's last column for a node."""
        state = node.state
        if state is NodeState.RUNNING:
            count = (
                f"{node.done}/{node.total} resources"
                if node.total is not None
                else f"{node.done} resources done"
                if node.done
                else ""
            )
            again = f"attempt {node.attempt}" if node.attempt > 1 else ""
            return ", ".join(part for part in (count, again, node.detail) if part)
        if state is NodeState.DONE:
            if node.changes is not None:
                return describe_changes(node.changes, self.would)
            return node.detail
        if state is NodeState.RETRYING:
            return self._words("", node)
        return node.detail


def headline(reason: str) -> str:
    """A failure's reason without the engine's lines it quotes: `AWS throttled the requests
    (Throttling on EC2 CreateVpc)` (the summary and the log keep the rest)."""
    flat = " ".join(reason.split())
    cut = flat.find("): ")
    return _short(flat[: cut + 1] if cut > 0 else flat)


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class View:
    """Shows a run; `on_event` is its progress subscriber. Subclasses draw."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.board = Board()
        self._lock = threading.Lock()
        self.approval: ApprovalRequested | None = None  # an approval waiting for this terminal
        self.approval_open: ApprovalRequested | None = None  # the one being asked about now
        self.decided: ApprovalDecided | None = None

    def on_event(self, event: ProgressEvent) -> None:
        if isinstance(event, ApprovalRequested):
            with self._lock:
                self.approval, self.decided = event, None
            return
        if isinstance(event, ApprovalDecided):
            with self._lock:
                self.decided, self.approval = event, None
            return
        for line in self.board.apply(event):
            self.say(line)

    def take_approval(self) -> ApprovalRequested | None:
        with self._lock:
            request, self.approval = self.approval, None
            return request

    def decided_elsewhere(self) -> ApprovalDecided | None:
        with self._lock:
            return self.decided

    def say(self, line: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def echo(self, text: str) -> None:
        """Print `text` as it is (a log line with -v, the plan, a prompt's answer)."""
        with self._lock:
            print(text, file=self.stream, flush=True)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The screen is the caller's inside (to show the plan and ask)."""
        yield

    def __enter__(self) -> View:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class PlainView(View):
    """Without a terminal: a timestamped line per state change, and a heartbeat."""

    def __init__(self, stream: TextIO, heartbeat_s: float = HEARTBEAT_S) -> None:
        super().__init__(stream)
        self.heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def say(self, line: str) -> None:
        self.echo(f"{datetime.now().strftime('%H:%M:%S')} {line}")

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(self.heartbeat_s, 1.0)):
            for line in self.board.heartbeat(self.heartbeat_s):
                self.say(line)

    def __enter__(self) -> View:
        self._beat = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=2)


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
            get_renderable=self.board.render,
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


def make_view(stream: TextIO, heartbeat_s: float = HEARTBEAT_S) -> View:
    """A live view on a terminal (and not a dumb one), plain lines otherwise."""
    console = Console(file=stream)
    if stream.isatty() and not console.is_dumb_terminal:
        return LiveView(stream)
    return PlainView(stream, heartbeat_s)


# --- log lines ----------------------------------------------------------------------------------


def new_log_file(state_dir: Path, command: str, environment: str) -> Path:
    """A fresh log file for one command, in <state>/logs (the oldest beyond KEEP_LOGS go)."""
    folder = state_dir / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    old = sorted(folder.glob("*.log"), key=lambda p: p.stat().st_mtime)
    for path in old[: max(0, len(old) - KEEP_LOGS + 1)]:
        path.unlink(missing_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = folder / f"{command}-{environment}-{stamp}.log"
    path.touch(mode=0o600)
    return path


class _Echo(logging.Handler):
    def __init__(self, echo: Callable[[str], None]) -> None:
        super().__init__()
        self.echo = echo

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.echo(self.format(record))
        except Exception:  # a log line must never break the run
            self.handleError(record)


@contextlib.contextmanager
def routed_logs(log_file: Path, echo: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Inside, log lines that Prefect would print (its own, the flow's and tasks', Pulumi's output
    through them, warnings) go to `log_file`, and to `echo` when given (-v); Prefect's console
    handlers print nothing. Lines still reach the Prefect server as before."""
    from prefect.logging.handlers import PrefectConsoleHandler

    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s", "%H:%M:%S"
    )
    to_file = logging.FileHandler(log_file, encoding="utf-8")
    to_file.setFormatter(formatter)
    added: list[logging.Handler] = [to_file]
    if echo is not None:
        shown = _Echo(echo)
        shown.setFormatter(
            logging.Formatter("%(asctime)s | %(levelname)-7s | %(message)s", "%H:%M:%S")
        )
        added.append(shown)
    loggers = [logging.getLogger()] + [
        item
        for item in logging.Logger.manager.loggerDict.values()
        if isinstance(item, logging.Logger)
    ]
    removed: list[tuple[logging.Logger, logging.Handler]] = []
    for logger in loggers:
        for handler in list(logger.handlers):
            if isinstance(handler, PrefectConsoleHandler):
                logger.removeHandler(handler)
                removed.append((logger, handler))
    root = logging.getLogger()
    for handler in added:
        root.addHandler(handler)
    logging.captureWarnings(True)  # library warnings go to the log, not between the view's lines
    try:
        yield log_file
    finally:
        logging.captureWarnings(False)
        for handler in added:
            root.removeHandler(handler)
            handler.close()
        for logger, handler in removed:
            logger.addHandler(handler)
