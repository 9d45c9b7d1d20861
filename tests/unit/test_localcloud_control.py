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


def _read_request(connection: socket.socket) -> None:
    """Read one whole request (its headers and the body their Content-Length gives): a socket
    closed with bytes unread answers the client with a reset, which is another failure."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            return
        body += chunk


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
                _read_request(connection)
                connection.sendall(CUT_OFF)
                # close with nothing unread, so the client sees the answer end (FIN), not a reset
                connection.shutdown(socket.SHUT_WR)

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
