"""The one client of the local cloud server's control API (`/_stackflow/*`; see server/routes.py).

Every caller goes through it: the plugins (knobs, health), the resource entries (the data plane's
endpoints), the knobs functions, the command line and the server's own lifecycle (health,
shutdown). A refusal or a server that does not answer is a `ControlApiError` naming the server and
the route, with the server's own reason.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import urllib.error
import urllib.request
from typing import Any

from stackflow.localcloud.errors import ControlAnswerCutOff, ControlApiError

PREFIX = "/_stackflow"
DEFAULT_TIMEOUT_S = 60.0


class ControlClient:
    """Calls to one cloud server's control API.

    Args:
        url: the server's URL, e.g. http://127.0.0.1:4566.
        timeout_s: how long a call may take unless it says otherwise.
    """

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def call(self, route: str, payload: Any = None, *, timeout_s: float | None = None) -> Any:
        """GET `route` (no payload) or POST the payload as JSON; returns the JSON answer.

        Raises:
            ControlApiError: the server refused the call (with its reason), did not answer, or
                answered something that is not JSON (not stackflow's cloud server).
        """
        route = route.strip("/")
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            f"{self.url}{PREFIX}/{route}",
            data=data,
            method="GET" if data is None else "POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            with contextlib.suppress(ValueError, AttributeError):
                detail = str(json.loads(detail).get("error", detail))
            raise ControlApiError(
                f"the local cloud at {self.url} refused {route}: {detail or exc.reason}"
            ) from None
        except OSError as exc:
            raise ControlApiError(
                f"the local cloud at {self.url} did not answer {route}: {exc}"
            ) from None
        except http.client.HTTPException as exc:
            raise ControlAnswerCutOff(
                f"the local cloud at {self.url} cut off its answer to {route}: {exc!r}"
            ) from None
        try:
            return json.loads(body) if body.strip() else None
        except ValueError:
            raise ControlApiError(
                f"{self.url} answered {route} with something that is not JSON: it is not "
                "stackflow's local cloud server"
            ) from None

    def health(self, timeout_s: float = 2.0) -> dict[str, Any] | None:
        """The server's health (`ok` false while it starts), or None when nothing of ours answers."""
        request = urllib.request.Request(f"{self.url}{PREFIX}/health")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 503 while it starts: the body still says who
            try:
                answer = json.loads(exc.read())
            except ValueError:
                return None
        except (OSError, ValueError):
            return None
        return answer if isinstance(answer, dict) else None

    def dataplane(self) -> dict[str, Any]:
        """Where the data plane serves each database and load balancer."""
        answer: dict[str, Any] = self.call("dataplane")
        return answer

    def knobs(self) -> Any:
        """The knob spec the server applies now (as JSON)."""
        return self.call("knobs")

    def set_knobs(self, spec: Any) -> Any:
        """Replace the server's knobs; returns the spec it keeps."""
        return self.call("knobs", spec)

    def clear_knobs(self) -> Any:
        return self.call("knobs/clear", {})

    def take_knobs(self, node: str, environment: str, type: str, operation: str) -> Any:
        """One resource operation's latency and fault (consuming one fault count)."""
        payload = {"node": node, "environment": environment, "type": type, "operation": operation}
        return self.call("knobs/take", payload)

    def shutdown(self, *, dataplane: bool = True, timeout_s: float = 30.0) -> None:
        """Ask the server to stop (with its data plane unless `dataplane` is False) and exit."""
        # The server exits as it answers: an answer cut off means the call was taken.
        with contextlib.suppress(ControlAnswerCutOff):
            self.call("shutdown", {} if dataplane else {"dataplane": False}, timeout_s=timeout_s)
