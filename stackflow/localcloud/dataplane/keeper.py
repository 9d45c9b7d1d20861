"""Keeps the data plane's databases running: a server that died (killed, crashed, taken by the
OOM killer) while its instance is available is started again, as RDS recovers an instance.

A thread of the cloud server's own waits on the servers' processes (Linux pidfds: it wakes when
one exits, not on a timer) and looks again every few seconds for servers started meanwhile. A
server that will not start is tried again after a pause, not in a loop.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable

from stackflow.errors import StackflowError
from stackflow.localcloud.dataplane.databases import Databases
from stackflow.localdb import running_server

LOOK_AGAIN_S = 2.0  # picks up servers started since the last look
RETRY_AFTER_S = 30.0  # a server that failed to start is not tried again sooner


class Keeper:
    """Starts again the databases whose server died.

    Args:
        databases: the data plane's databases.
        lock: the data plane's lock (held while a server is checked and started: a hook that
            stops or deletes a database is never undone).
        log: receives one-line messages.
    """

    def __init__(
        self, databases: Databases, lock: threading.RLock, log: Callable[[str], None]
    ) -> None:
        self.databases = databases
        self.lock = lock
        self._log = log
        self._stop = threading.Event()
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._not_before: dict[str, float] = {}
        self.restarts: dict[str, int] = {}

    def start(self) -> None:
        """Start watching (once)."""
        if self._thread is not None:
            return
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="dataplane-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (before the servers are stopped on purpose); waits for the thread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        thread.join(timeout=60)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._stop.clear()

    def revive(self) -> list[str]:
        """Start every database that should run and does not; returns their identifiers."""
        started = []
        with self.lock:
            for record in self.databases.records():
                base = self.databases.base(record.identifier)
                if record.stopped or running_server(base) is not None:
                    continue
                if time.monotonic() < self._not_before.get(record.identifier, 0.0):
                    continue
                try:
                    self.databases.ensure_running(record)
                except StackflowError as exc:
                    self._not_before[record.identifier] = time.monotonic() + RETRY_AFTER_S
                    self._log(
                        f"local-cloud database {record.identifier} is not running and could not "
                        f"be started again (next try in {RETRY_AFTER_S:g}s): {exc}"
                    )
                    continue
                self._not_before.pop(record.identifier, None)
                self.restarts[record.identifier] = self.restarts.get(record.identifier, 0) + 1
                self._log(
                    f"local-cloud database {record.identifier} was not running (its mariadbd "
                    "exited); started it again"
                )
                started.append(record.identifier)
        return started

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wait_for_an_exit()
            if not self._stop.is_set():
                self.revive()

    def _wait_for_an_exit(self) -> None:
        """Until a watched server exits, LOOK_AGAIN_S passes, or `stop` is called."""
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        opened = []
        try:
            for record in self.databases.records():
                server = running_server(self.databases.base(record.identifier))
                if server is None:
                    continue
                with contextlib.suppress(OSError):  # exited meanwhile: the next look sees it
                    fd = os.pidfd_open(server.pid)
                    opened.append(fd)
                    poller.register(fd, select.POLLIN)
            poller.poll(LOOK_AGAIN_S * 1000)
        finally:
            for fd in opened:
                os.close(fd)
