"""What every view of a run shares: the board it draws, the approval handed to the terminal, and
printing a line as it is."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TextIO

from cli.live.board import Board
from stackflow.progress import ApprovalDecided, ApprovalRequested, ProgressEvent


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
