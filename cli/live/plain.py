"""The view without a terminal (CI, pipes): a timestamped line per state change, and a heartbeat
line for a node that has run quietly for a while."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import TextIO

from cli.live.view import View

HEARTBEAT_S = 30.0  # a quiet node gets a line this often without a terminal


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
