"""A local webhook for notification tests: an HTTP endpoint on loopback, in the test's process,
that keeps every JSON body posted to it (what a Prefect notification block sends)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Listener:
    """Records the JSON bodies posted to `url`, in the order they came; `close()` stops it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        received, lock = self.received, self._lock

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with lock:
                    received.append(body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def messages(self) -> list[dict[str, Any]]:
        """What was posted so far."""
        with self._lock:
            return list(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
