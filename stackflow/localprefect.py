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
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stackflow.errors import StackflowError


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
    try:
        with urllib.request.urlopen(f"{url}/api/health", timeout=timeout) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    with log.open("ab") as out:
        process = subprocess.Popen(
            [_prefect_executable(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PrefectServerError(
                f"prefect server exited early (log {log}):\n{log.read_text()[-2000:]}"
            )
        if healthy(url):
            return PrefectServer(url, home, process.pid, log)
        time.sleep(0.3)
    process.kill()
    raise PrefectServerError(
        f"prefect server did not answer on {url} within {timeout:.0f}s (log {log})"
    )


def stop_prefect_server(pid: int, timeout: float = 15.0) -> None:
    """Stop a server started by `start_prefect_server` (its whole process group)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _is_prefect_server(pid: int) -> bool:
    """Whether pid is alive and runs `prefect server` (a recorded pid may have been reused)."""
    if pid <= 0 or _gone(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"prefect" in cmdline and b"server" in cmdline


def _gone(pid: int) -> bool:
    try:
        # Our own exited child stays a zombie (and answers kill 0) until it is reaped.
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass  # not our child
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def ensure_local_prefect(
    state_dir: Path, port: int, say: Callable[[str], object] | None = None
) -> PrefectServer:
    """The project's local server: reuse the one recorded in the state folder, else start one."""
    home = state_dir / "prefect"
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
    record = state_dir / "prefect" / "server.json"
    if not record.exists():
        return False
    stop_prefect_server(int(json.loads(record.read_text())["pid"]))
    record.unlink(missing_ok=True)
    return True
