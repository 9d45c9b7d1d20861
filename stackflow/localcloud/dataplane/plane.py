"""The data plane of one local cloud: its databases and load balancers, behind one lock."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stackflow.localcloud.dataplane.addresses import Addresses
from stackflow.localcloud.dataplane.balancers import Balancers
from stackflow.localcloud.dataplane.calls import ApiCall
from stackflow.localcloud.dataplane.databases import Databases
from stackflow.localcloud.dataplane.keeper import Keeper
from stackflow.localcloud.paths import dataplane_dir


class Dataplane:
    """The data plane of one local cloud (see the package docstring).

    Thread-safe: the cloud server calls it from its request threads.

    Args:
        root: the cloud root (`<state_dir>/localcloud`); the data plane lives in root/dataplane.
        endpoint: the cloud server's URL, which the app stand-ins read AWS through.
        region: the region of the local cloud.
        log: receives one-line progress messages (default: this module's logger, at INFO).
    """

    def __init__(
        self, root: Path, endpoint: str, region: str, *, log: Callable[[str], None] | None = None
    ) -> None:
        self.root = Path(root)
        self.dir = dataplane_dir(self.root)
        self.endpoint, self.region = endpoint, region
        self._log = log or logging.getLogger(__name__).info
        self._lock = threading.RLock()
        addresses = Addresses(self.root, self.dir)
        self.databases = Databases(self.dir, addresses, self._log)
        self.balancers = Balancers(self.dir, addresses, endpoint, region, self._log)
        self._handlers = {**self.databases.handlers(), **self.balancers.handlers()}
        self.keeper = Keeper(self.databases, self._lock, self._log)

    @property
    def start_times(self) -> dict[str, float]:
        """Seconds each database took to start last (copy included), by identifier."""
        return self.databases.start_times

    @property
    def template_seconds(self) -> float | None:
        """How long the template data folder took to initialise (None: reused)."""
        return self.databases.template_seconds

    def before_api_call(self, call: ApiCall) -> None:
        """Prepare what a mutating AWS request will need, before the cloud acts on it: the data
        folder every database copies (initialised once) before `CreateDBInstance`.

        Raises:
            LocalDatabaseError: the data folder could not be initialised (names the log).
        """
        self.databases.prepare(call)

    def on_api_call(self, call: ApiCall) -> None:
        """Bring the data plane in line with one successful mutating AWS request.

        Calls that concern neither RDS instances nor ELBv2 load balancers and listeners are ignored.
        Makes no AWS call itself (the server may hold its request lock meanwhile).

        Raises:
            DataplaneError: a name the data plane cannot use, or a port it cannot bind.
            LocalDatabaseError: a database server failed to start or to take the change.
        """
        handler = self._handlers.get((call.service, call.action))
        if handler is not None:
            with self._lock:
                handler(call)

    def start_all(self) -> list[str]:
        """Start every recorded database (unless stopped through the API) and every stand-in.

        Works from the files alone (no secrets needed). One failure does not stop the others.

        Returns:
            One message per database or listener that could not be started (also logged).
        """
        with self._lock:
            problems = self.databases.start_all() + self.balancers.start_all()
        for problem in problems:
            self._log(f"local cloud data plane: {problem}")
        return problems

    def keep_alive(self) -> None:
        """From now on, start again a database whose server dies (see keeper.py); `stop_all`
        ends this first."""
        self.keeper.start()

    def stop_all(self) -> None:
        """Stop every database server and app stand-in; their records stay for `start_all`."""
        self.keeper.stop()  # not under the lock: the keeper may be waiting for it
        with self._lock:
            self.balancers.stop_all()
            self.databases.stop_all()

    def endpoints(self) -> dict[str, Any]:
        """Where each database and load balancer is served (the GET /_stackflow/dataplane body).

        Reads the records only (written whole by rename), so it never waits for a hook at work.
        """
        return {
            "databases": self.databases.endpoints(),
            "load_balancers": self.balancers.endpoints(),
        }
