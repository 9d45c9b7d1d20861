"""The cloud server's glue to its data plane: which data plane it runs, and the worker that tells
it about each successful mutating request, one at a time, in journal order."""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from stackflow.localcloud.dataplane.calls import ApiCall

log = logging.getLogger("stackflow.localcloud")


class DataplaneLike(Protocol):
    def before_api_call(self, call: ApiCall) -> None: ...
    def on_api_call(self, call: ApiCall) -> None: ...
    def start_all(self) -> object: ...
    def keep_alive(self) -> None: ...
    def stop_all(self) -> None: ...
    def endpoints(self) -> dict[str, Any]: ...


class NoDataplane:
    """The data plane of a server of moto alone (`--no-dataplane`): no databases, no apps."""

    def before_api_call(self, call: ApiCall) -> None:
        return None

    def on_api_call(self, call: ApiCall) -> None:
        return None

    def start_all(self) -> object:
        return []

    def keep_alive(self) -> None:
        return None

    def stop_all(self) -> None:
        return None

    def endpoints(self) -> dict[str, Any]:
        return {"databases": {}, "load_balancers": {}}


def load_dataplane(root: Path, endpoint: str, region: str) -> DataplaneLike:
    """The data plane of a cloud root (imported here: a server of moto alone never loads it)."""
    from stackflow.localcloud.dataplane import Dataplane

    return Dataplane(root, endpoint, region)


def api_call(service: str, action: str, params: Any, response: bytes) -> ApiCall:
    """What the data plane is told about one request."""
    from stackflow.localcloud.dataplane.calls import ApiCall

    return ApiCall(service=service, action=action, params=params, response=response)


class HookWorker:
    """Runs the data plane's hooks one at a time, in the order they were submitted."""

    def __init__(self, dataplane: DataplaneLike) -> None:
        self.dataplane = dataplane
        self._queue: queue.Queue[tuple[ApiCall, threading.Event]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, call: ApiCall) -> threading.Event:
        """Queue `call` for the data plane; the event is set once its hook has run."""
        done = threading.Event()
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dataplane-hooks", daemon=True
                )
                self._thread.start()
        self._queue.put((call, done))
        return done

    def _run(self) -> None:
        while True:
            call, done = self._queue.get()
            try:
                self.dataplane.on_api_call(call)
            except Exception:
                log.exception("the data plane's hook for %s %s failed", call.service, call.action)
            finally:
                done.set()
