"""The cloud server's control API, `/_stackflow/*` (its one client is `localcloud.control`):

GET  health         ok once serving, pid, root, region, journal and replay counts
GET  knobs          the latency and fault knobs in force
POST knobs          replace them (a KnobSpec)
POST knobs/clear    no latency, no faults
POST knobs/take     one resource operation's latency and fault (a fault's count is consumed)
GET  dataplane      where each database and load balancer is served
POST shutdown       stop the data plane (unless {"dataplane": false}) and exit
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from stackflow.localcloud.errors import KnobsError
from stackflow.localcloud.knobs import KnobCall, KnobSpec
from stackflow.localcloud.server.hooks import DataplaneLike
from stackflow.localcloud.server.wsgi import json_response, read_body

if TYPE_CHECKING:
    from stackflow.localcloud.knobs import KnobStore


class CloudApp(Protocol):
    """What the control API reads and sets on the cloud server's app (`app.CloudApp`, which
    imports this module: the routes never import the app)."""

    ready: bool
    stopping: bool
    stop_requested: threading.Event
    knobs: KnobStore
    dataplane: DataplaneLike

    def health(self) -> dict[str, Any]: ...


log = logging.getLogger("stackflow.localcloud")
PREFIX = "/_stackflow"
Answer = tuple[Any, str]  # (JSON payload, HTTP status line)


def _health(app: CloudApp, _payload: Any) -> Answer:
    return app.health(), "200 OK" if app.ready else "503 SERVICE UNAVAILABLE"


def _knobs(app: CloudApp, _payload: Any) -> Answer:
    return app.knobs.get().dump(), "200 OK"


def _set_knobs(app: CloudApp, payload: Any) -> Answer:
    return app.knobs.replace(KnobSpec.parse(payload)).dump(), "200 OK"


def _clear_knobs(app: CloudApp, _payload: Any) -> Answer:
    return app.knobs.clear().dump(), "200 OK"


def _take_knobs(app: CloudApp, payload: Any) -> Answer:
    body = payload if isinstance(payload, dict) else {}
    call = KnobCall(
        node=str(body.get("node") or ""),
        environment=str(body.get("environment") or ""),
        type=str(body.get("type") or ""),
        operation=str(body.get("operation") or ""),
    )
    return app.knobs.take(call), "200 OK"


def _dataplane(app: CloudApp, _payload: Any) -> Answer:
    return app.dataplane.endpoints(), "200 OK"


def _shutdown(app: CloudApp, payload: Any) -> Answer:
    app.stopping = True
    if not (isinstance(payload, dict) and payload.get("dataplane") is False):
        app.dataplane.stop_all()
    app.stop_requested.set()
    return {"ok": True, "pid": os.getpid()}, "200 OK"


ROUTES: dict[tuple[str, str], Callable[[CloudApp, Any], Answer]] = {
    ("GET", "health"): _health,
    ("GET", "knobs"): _knobs,
    ("POST", "knobs"): _set_knobs,
    ("POST", "knobs/clear"): _clear_knobs,
    ("POST", "knobs/take"): _take_knobs,
    ("GET", "dataplane"): _dataplane,
    ("POST", "shutdown"): _shutdown,
}


def serve_control(
    app: CloudApp, environ: dict[str, Any], start_response: Callable[..., Any]
) -> list[bytes]:
    """Answer one `/_stackflow/*` request (JSON in, JSON out; errors as {"error": ...})."""
    method = str(environ.get("REQUEST_METHOD", "GET"))
    route = str(environ.get("PATH_INFO", "")).removeprefix(PREFIX).strip("/")
    handler = ROUTES.get((method, route))
    if handler is None:
        served = ", ".join(f"{m} {r}" for m, r in ROUTES)
        return json_response(
            start_response,
            {"error": f"no control endpoint {method} {PREFIX}/{route}; served: {served}"},
            "404 NOT FOUND",
        )
    try:
        raw = read_body(environ)
        payload = json.loads(raw) if raw.strip() else None
    except ValueError:
        return json_response(start_response, {"error": "the body is not JSON"}, "400 BAD REQUEST")
    try:
        answer, status = handler(app, payload)
    except KnobsError as exc:
        return json_response(start_response, {"error": str(exc)}, "400 BAD REQUEST")
    except Exception as exc:
        log.exception("control call %s %s failed", method, route)
        return json_response(
            start_response, {"error": f"{type(exc).__name__}: {exc}"}, "500 INTERNAL SERVER ERROR"
        )
    return json_response(start_response, answer, status)
