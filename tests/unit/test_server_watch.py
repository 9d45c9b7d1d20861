"""When a command-line run takes its Prefect server for lost (`cli.supervise.ServerWatch`): a port
that refuses connections is a server gone, soon; a server that takes connections but answers
nothing may be stalled on its own database lock (SQLite's 60 s busy timeout) and is waited out."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from prefect.settings import PREFECT_API_URL, temporary_settings

from cli.supervise import ServerWatch
from stackflow.processes import free_port

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _watch(url: str, clock: Clock) -> Iterator[ServerWatch]:
    with temporary_settings({PREFECT_API_URL: f"{url}/api"}):
        watch = ServerWatch()
        watch._clock = clock
        watch._next = 0.0
        yield watch


def _ask(watch: ServerWatch, clock: Clock, after_s: float) -> bool:
    clock.now += after_s
    return watch.lost()


def test_a_port_that_refuses_connections_is_a_server_gone_after_ten_seconds() -> None:
    clock = Clock()
    for watch in _watch(f"http://127.0.0.1:{free_port()}", clock):  # nothing listens there
        assert not _ask(watch, clock, 0)
        assert not _ask(watch, clock, ServerWatch.GONE_AFTER_S - ServerWatch.EVERY_S)
        assert _ask(watch, clock, ServerWatch.EVERY_S)


def test_a_server_that_takes_connections_but_answers_nothing_is_waited_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import stackflow.localprefect

    monkeypatch.setattr(stackflow.localprefect, "healthy", lambda *a, **k: False)
    clock = Clock()
    with socket.create_server(("127.0.0.1", 0)) as listening:  # takes connections, answers none
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        for watch in _watch(url, clock):
            assert not _ask(watch, clock, 0)
            assert not _ask(watch, clock, 60.0)  # SQLite's busy timeout: a stall, not a loss
            assert _ask(watch, clock, ServerWatch.LOST_AFTER_S - 60.0)
