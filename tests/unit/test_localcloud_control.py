"""The control API's client when the cloud server exits in the middle of its answer (as it may on
`shutdown`, which it answers as it stops): a stand-in server on loopback that sends the headers
and a part of the body, then closes the connection."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from stackflow.localcloud.control import ControlClient
from stackflow.localcloud.errors import ControlAnswerCutOff, ControlApiError

pytestmark = pytest.mark.unit

CUT_OFF = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 26\r\n"
    b"Connection: close\r\n\r\n"
    b'{"ok": tr'
)


@pytest.fixture
def cutting_server() -> Iterator[str]:
    """A loopback server that answers every request with `CUT_OFF` and closes; its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # the listener was closed: the test is over
            with connection:
                connection.recv(65536)
                connection.sendall(CUT_OFF)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        listener.close()
        thread.join(timeout=5)


def test_a_cut_off_answer_to_a_call_is_a_control_api_error_naming_the_route(
    cutting_server: str,
) -> None:
    with pytest.raises(ControlAnswerCutOff, match="cut off its answer to knobs/clear"):
        ControlClient(cutting_server, timeout_s=5).clear_knobs()
    assert issubclass(ControlAnswerCutOff, ControlApiError)  # callers that stop on either


def test_a_cut_off_answer_to_shutdown_means_the_server_took_it(cutting_server: str) -> None:
    assert ControlClient(cutting_server, timeout_s=5).shutdown(timeout_s=5) is None
