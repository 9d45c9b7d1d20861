"""A local Prefect server owned by the project (SQLite under the state folder).

`python flows/run.py` uses it when no PREFECT_API_URL is configured: started on first use, reused
by later runs (so they start in about a second and show up in its UI), stopped with
`python flows/run.py server stop`. Tests start their own with `start_prefect_server`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stackflow.errors import StackflowError
from stackflow.processes import free_port as free_port  # old home, for branches in flight
from stackflow.processes import runs, start_detached, stop
from stackflow.state import StateLayout


class PrefectServerError(StackflowError):
    """The local Prefect server did not start."""


@dataclass(frozen=True)
class PrefectServer:
    url: str
    home: Path
    pid: int
    log: Path

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"


def healthy(url: str, timeout: float = 2.0) -> bool:
    """Whether a Prefect server answers healthy at `url` (without /api)."""
    try:
        with urllib.request.urlopen(f"{url}/api/health", timeout=timeout) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def drain_prefect_queues(timeout: float = 10.0) -> None:
    """Send the logs and events Prefect still queues in this process while the server answers.

    Prefect's workers otherwise send them at interpreter exit, retrying (and warning) for a
    minute when the server is already gone. Best effort; nothing to do if Prefect is not loaded.
    """
    if "prefect" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    with contextlib.suppress(Exception):
        APILogWorker.drain_all(timeout=timeout, at_exit=False)
        EventsWorker.drain_all(timeout=timeout, at_exit=False)


def _prefect_executable() -> str:
    return shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"


def start_prefect_server(
    home: Path, port: int, *, ui: bool = True, timeout: float = 120.0
) -> PrefectServer:
    """Start `prefect server start` detached, with its own PREFECT_HOME; wait until healthy.

    Raises:
        PrefectServerError: with the tail of its log when it exits or does not answer in time.
    """
    home.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "true" if ui else "false",
        "PREFECT_UI_API_URL": f"{url}/api",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    env.pop("PREFECT_API_URL", None)
    log = home / "server.log"
    process = start_detached(
        [_prefect_executable(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        log=log,
        env=env,
        ready=lambda _process: healthy(url),
        what="prefect server",
        not_ready=f"did not answer on {url}",
        error=PrefectServerError,
        timeout_s=timeout,
        poll_s=0.3,
    )
    return PrefectServer(url, home, process.pid, log)


def stop_prefect_server(pid: int, timeout: float = 15.0) -> None:
    """Stop a server started by `start_prefect_server` (its whole process group)."""
    stop(pid, group=True, timeout_s=timeout)


def _is_prefect_server(pid: int) -> bool:
    """Whether pid is alive and runs `prefect server` (a recorded pid may have been reused)."""
    return runs(pid, "prefect", "server")


def ensure_local_prefect(
    state_dir: Path, port: int, say: Callable[[str], object] | None = None
) -> PrefectServer:
    """The project's local server: reuse the one recorded in the state folder, else start one."""
    home = StateLayout(state_dir).prefect
    record = home / "server.json"
    url = f"http://127.0.0.1:{port}"
    if record.exists():
        info = json.loads(record.read_text())
        if info.get("url") == url and healthy(url):
            return PrefectServer(url, home, int(info["pid"]), home / "server.log")
        old_pid = int(info.get("pid", 0))
        if info.get("url") != url and _is_prefect_server(old_pid):
            # One database, one server: the folder's server moves to the new port.
            if say is not None:
                say(
                    f"stopping this state folder's Prefect server on {info.get('url')}: moving to {url}"
                )
            stop_prefect_server(old_pid)
        record.unlink(missing_ok=True)
    if healthy(url):
        raise PrefectServerError(
            f"port {port} already answers as a Prefect server that stackflow did not start; set "
            f"PREFECT_API_URL={url}/api to use it, or STACKFLOW_LOCAL_PREFECT_PORT to another port"
        )
    if say is not None:
        say(f"starting a local Prefect server on {url} (first run takes ~15 s; UI at {url})")
    server = start_prefect_server(home, port)
    record.write_text(json.dumps({"url": server.url, "pid": server.pid}))
    return server


def stop_local_prefect(state_dir: Path) -> bool:
    """Stop the state folder's local Prefect server; whether one was recorded."""
    record = StateLayout(state_dir).prefect / "server.json"
    if not record.exists():
        return False
    stop_prefect_server(int(json.loads(record.read_text())["pid"]))
    record.unlink(missing_ok=True)
    return True
