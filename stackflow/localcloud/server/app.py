"""The cloud server's WSGI app: moto behind a middleware that

1. answers `/_stackflow/*` itself (routes.py);
2. runs every AWS request under one process-wide lock;
3. before a mutating request seeds moto's randomness from the journal's sequence number and
   freezes moto's clock, so replaying the same requests in the same order gives the same ids and
   timestamps, whatever reads were interleaved (determinism.py);
4. lets the data plane prepare what a request needs first (a database's data folder): its failure
   fails the request with an AWS-shaped error, and nothing is created;
5. appends each successful mutating request to the journal, its secret fields sealed (journal.py);
6. tells the data plane about it and answers once the data plane has followed (hooks.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import io
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackflow.errors import StackflowError
from stackflow.localcloud.errors import JournalError
from stackflow.localcloud.paths import journal_key, journal_path
from stackflow.localcloud.server.determinism import Clock, seed_for
from stackflow.localcloud.server.hooks import DataplaneLike, HookWorker, api_call
from stackflow.localcloud.server.journal import Journal
from stackflow.localcloud.server.motoapp import warm_backends
from stackflow.localcloud.server.requests import READ_METHODS, AwsRequest, parse_request
from stackflow.localcloud.server.routes import serve_control
from stackflow.localcloud.server.wsgi import (
    Response,
    aws_error,
    call_app,
    headers_of,
    json_response,
    read_body,
)

if TYPE_CHECKING:
    from stackflow.localcloud.knobs import KnobStore

log = logging.getLogger("stackflow.localcloud")


class CloudApp:
    """moto's WSGI app behind the middleware described in the module docstring.

    Args:
        root: the cloud root (journal, knobs, passphrase, data plane).
        region: the default region.
        endpoint: the URL this server answers on (for the data plane's own calls).
        moto_app: moto's WSGI application (DomainDispatcherApplication).
        dataplane: the data plane (or its stand-in).
        knobs: the knob store.
    """

    def __init__(
        self,
        root: Path,
        region: str,
        endpoint: str,
        moto_app: Callable[..., Iterable[bytes]],
        dataplane: DataplaneLike,
        knobs: KnobStore,
    ) -> None:
        self.root = root
        self.region = region
        self.endpoint = endpoint
        self.moto_app = moto_app
        self.dataplane = dataplane
        self.knobs = knobs
        self.journal = Journal(journal_path(root), journal_key(root))
        self.ready = False
        self.stopping = False
        self.stop_requested = threading.Event()
        self.replayed = 0
        self.replay_failures = 0
        self.replay_s = 0.0
        self._lock = threading.Lock()  # every AWS request, one at a time: deterministic seeding
        self._hook_worker = HookWorker(dataplane)

    # -- serving --

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith("/_stackflow/") or path == "/_stackflow":
            return serve_control(self, environ, start_response)
        if self.stopping:
            return json_response(
                start_response, {"error": "the local cloud is stopping"}, "503 SERVICE UNAVAILABLE"
            )
        if path.startswith("/moto-api") and environ.get("REQUEST_METHOD") not in READ_METHODS:
            # moto's own reset/seed/state calls would bypass the journal and the seeding.
            return json_response(
                start_response,
                {
                    "error": "the local cloud refuses moto's own state API (/moto-api/ "
                    "changes); its state is the journal: `python flows/run.py cloud stop`, then "
                    f"delete {journal_path(self.root)} to start empty"
                },
                "403 FORBIDDEN",
            )
        body = read_body(environ)
        response, hook = self.handle(environ, body)
        if hook is not None:
            hook.wait()  # the answer comes once the data plane has followed (a database is up)
        start_response(response.status, response.headers)
        return [response.body]

    def handle(
        self,
        environ: dict[str, Any],
        body: bytes,
        *,
        replay: Mapping[str, Any] | None = None,
    ) -> tuple[Response, Any]:
        """Serve one AWS request through moto.

        Args:
            environ: the WSGI environ (its input is replaced by `body`).
            body: the request body as received.
            replay: the journal entry being replayed (None: a live request).

        Returns:
            (moto's response, the event set when the data plane has followed, or None).
        """
        method = str(environ.get("REQUEST_METHOD", "GET"))
        path = str(environ.get("PATH_INFO", "/"))
        query = str(environ.get("QUERY_STRING", ""))
        headers = headers_of(environ)
        plain = body
        if headers.get("Content-Encoding", "").lower() == "gzip" and body:
            with contextlib.suppress(OSError, EOFError):
                plain = gzip.decompress(body)
        request = parse_request(method, path, query, headers, plain)
        if replay is None and request.mutating:
            refusal = self._prepare(request)
            if refusal is not None:
                return refusal, None
        started = time.monotonic()
        hook: Any = None
        with self._lock:
            seq = self.journal.next_seq if replay is None else int(replay["seq"])
            at = (
                dt.datetime.now(dt.UTC)
                if replay is None
                else dt.datetime.fromisoformat(str(replay["at"]))
            )
            if request.mutating or replay is not None:
                seed_for(seq)
                Clock.frozen = at
            try:
                environ["wsgi.input"] = io.BytesIO(body)
                environ["CONTENT_LENGTH"] = str(len(body))
                response = call_app(self.moto_app, environ)
            finally:
                Clock.frozen = None
            ok = 200 <= response.code < 300
            if request.mutating and ok and replay is None:
                entry = self.journal.entry(seq, at, request, method, path, query, headers)
                try:
                    self.journal.append(entry, plain)
                except JournalError as exc:
                    log.error("%s %s not journaled: %s", request.service, request.action, exc)
                    response = aws_error(
                        request,
                        "InternalFailure",
                        f"the local cloud could not record {request.action} in its journal "
                        f"({exc}); the running cloud has the change, a restart would lose it",
                    )
                else:
                    # Queued under the AWS lock: hooks run in journal order, but outside the
                    # lock (a hook may call this server).
                    hook = self._hook_worker.submit(
                        api_call(request.service, request.action, request.params, response.body)
                    )
            if replay is None:
                log.info(
                    "%s %s %s -> %d (%.0f ms)%s",
                    method,
                    request.service,
                    request.action,
                    response.code,
                    (time.monotonic() - started) * 1000,
                    f" journal #{seq}" if hook is not None else "",
                )
        return response, hook

    def _prepare(self, request: AwsRequest) -> Response | None:
        """Let the data plane prepare what a request will need (a database's data folder) before
        moto makes the resource; its failure fails the request, so nothing is made half."""
        call = api_call(request.service, request.action, request.params, b"")
        try:
            self.dataplane.before_api_call(call)
        except StackflowError as exc:
            reason = str(exc).splitlines()[0]
            log.warning("%s %s refused: %s", request.service, request.action, reason)
            return aws_error(
                request,
                "InternalFailure",
                f"the local cloud's data plane could not prepare {request.action}: {reason}",
            )
        return None

    def warm(self) -> None:
        """`warm_backends` under the AWS lock (requests wait rather than race it)."""
        started = time.monotonic()
        with self._lock:
            try:
                warm_backends(self.region)
            except Exception:
                log.exception("warming moto's backends failed; they will be created on first use")
                return
        log.info("moto's backends ready in %.2fs", time.monotonic() - started)

    # -- replay --

    def replay(self) -> int:
        """Send every journal entry again, in order, with its seed and time; no journal writes,
        no data plane hooks. Returns how many entries were replayed."""
        from werkzeug.test import EnvironBuilder

        started = time.monotonic()
        entries = self.journal.entries()
        for entry in entries:
            query, body, headers = self.journal.request_of(entry)
            builder = EnvironBuilder(
                path=str(entry.get("path") or "/"),
                method=str(entry.get("method") or "POST"),
                query_string=query,
                headers=[(k, v) for k, v in headers.items() if k != "Content-Type"],
                data=body,
                content_type=headers.get("Content-Type"),
                base_url=self.endpoint,
            )
            try:
                environ = builder.get_environ()
            finally:
                builder.close()
            if "Host" in headers:
                environ["HTTP_HOST"] = headers["Host"]
            response, _ = self.handle(environ, body, replay=entry)
            if not 200 <= response.code < 300:
                self.replay_failures += 1
                log.warning(
                    "journal entry #%s (%s %s) answered %s on replay: %s",
                    entry.get("seq"),
                    entry.get("service"),
                    entry.get("action"),
                    response.status,
                    response.body[:300].decode(errors="replace"),
                )
        self.replayed = len(entries)
        self.replay_s = time.monotonic() - started
        return self.replayed

    # -- what the control API reports --

    def health(self) -> dict[str, Any]:
        """The body of GET /_stackflow/health."""
        return {
            "ok": self.ready,
            "pid": os.getpid(),
            "root": str(self.root),
            "region": self.region,
            "journal_entries": self.journal.next_seq,
            "replayed": self.replayed,
            "replay_failures": self.replay_failures,
            "replay_s": round(self.replay_s, 3),
        }
