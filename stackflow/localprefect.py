"""A local Prefect server owned by the project: on SQLite under the state folder (one person,
the default), or on the PostgreSQL the project owns (team mode on one machine, with Prefect's
basic auth on).

`python flows/run.py` uses it when no PREFECT_API_URL is configured: started on first use, reused
by later runs (so they start in about a second and show up in its UI), stopped with
`python flows/run.py server stop`. Tests start their own with `start_prefect_server`. Every server
started here gets the zombie automation (`stackflow.crashes`), and none inherits a secret: its
own auth string is in its PREFECT_HOME's profile (0600), never in its environment.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackflow.errors import StackflowError
from stackflow.infrastructure import replace_file
from stackflow.processes import (
    clean_environment,
    port_free,
    port_holder,
    runs,
    start_detached,
    stop,
    stop_under,
)
from stackflow.state import StateLayout


class PrefectServerError(StackflowError):
    """The local Prefect server did not start."""


class PrefectPortBusy(PrefectServerError):
    """Another program holds the port the local Prefect server is to listen on."""

    def __init__(self, port: int) -> None:
        holder = port_holder(port) or "another program (which one is not visible to this user)"
        super().__init__(
            f"port {port} (STACKFLOW_LOCAL_PREFECT_PORT) is held by {holder}: the local Prefect "
            "server cannot listen there. Nothing was started.",
            what_to_do=f"set STACKFLOW_LOCAL_PREFECT_PORT to a free port (in .env or the "
            f"environment), or stop what holds port {port}; or set PREFECT_API_URL to use a "
            "Prefect server of your own",
        )
        self.port = port


@dataclass(frozen=True)
class PrefectServer:
    url: str
    home: Path
    pid: int
    log: Path
    database: str = "sqlite"  # or "postgres"
    auth_string: str | None = field(default=None, repr=False)  # user:password (team mode)

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"


def _auth_header(auth_string: str | None) -> dict[str, str]:
    if not auth_string:
        return {}
    token = base64.b64encode(auth_string.encode()).decode()
    return {"Authorization": f"Basic {token}"}


def healthy(url: str, timeout: float = 2.0, auth_string: str | None = None) -> bool:
    """Whether a Prefect server answers healthy at `url` (without /api)."""
    return _ok(f"{url}/api/health", timeout, auth_string)


def ready(url: str, timeout: float = 2.0, auth_string: str | None = None) -> bool:
    """Whether the Prefect server at `url` (without /api) reaches its database (`/api/ready`:
    it answers 503 while its database does not)."""
    return _ok(f"{url}/api/ready", timeout, auth_string)


def _ok(address: str, timeout: float, auth_string: str | None) -> bool:
    request = urllib.request.Request(address, headers=_auth_header(auth_string))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def auth_string(home: Path) -> str:
    """The basic auth a team-mode server asks for (`stackflow:<random>`), generated once and kept
    0600 in its home; a second worker on this machine reads it from there."""
    path = home / "auth"
    with contextlib.suppress(FileNotFoundError):
        found = path.read_text().strip()
        if found:
            return found
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = f"stackflow:{secrets.token_urlsafe(24)}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value)
    return value


def _write_secrets(home: Path, auth: str | None) -> None:
    """The server's own settings that are secrets live in a `.env` file (0600) in its working
    folder, which Prefect reads, not in its process environment (`/proc/<pid>/environ`)."""
    path = home / ".env"
    lines = []
    if auth:
        lines.append(f"PREFECT_SERVER_API_AUTH_STRING={json.dumps(auth)}")
        lines.append(f"PREFECT_API_AUTH_STRING={json.dumps(auth)}")  # its own services' client
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def drain_prefect_queues(timeout: float = 10.0) -> None:
    """Send the logs and events Prefect still queues in this process while the server answers.

    Prefect's workers otherwise send them at interpreter exit, retrying (and warning) for a
    minute when the server is already gone. Best effort; nothing to do if Prefect is not loaded.
    """
    if "prefect" not in sys.modules:
        return
    import logging

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    # best effort: a server that cannot take them (its database gone) prints nothing here
    raising, logging.raiseExceptions = logging.raiseExceptions, False
    try:
        with contextlib.suppress(Exception):
            APILogWorker.drain_all(timeout=timeout, at_exit=False)
            EventsWorker.drain_all(timeout=timeout, at_exit=False)
    finally:
        logging.raiseExceptions = raising


def _prefect_executable() -> str:
    return shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"


def start_prefect_server(
    home: Path,
    port: int,
    *,
    ui: bool = True,
    timeout: float = 120.0,
    database_url: str | None = None,
    auth: str | None = None,
    automation: bool = True,
) -> PrefectServer:
    """Start `prefect server start` detached, with its own PREFECT_HOME; wait until healthy.

    Args:
        database_url: its database (SQLAlchemy URL); default SQLite in `home`.
        auth: `user:password` for Prefect's basic auth (team mode); None: none.
        automation: install the zombie automation (`stackflow.crashes`) once it answers.

    Raises:
        PrefectPortBusy: another program holds `port` (named when /proc says which).
        PrefectServerError: with the tail of what this start wrote to its log when it exits or
            does not answer in time.
    """
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    url = f"http://127.0.0.1:{port}"
    _write_secrets(home, auth)
    env = clean_environment(
        {
            "PREFECT_HOME": str(home),
            "PREFECT_API_DATABASE_CONNECTION_URL": database_url
            or f"sqlite+aiosqlite:///{home / 'prefect.db'}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": "true" if ui else "false",
            "PREFECT_UI_API_URL": f"{url}/api",
            # its own services talk to it through the client: without this they would start a
            # temporary server of their own (and scheduled runs would land in its database)
            "PREFECT_API_URL": f"{url}/api",
            "PREFECT_LOGGING_LEVEL": "WARNING",
            # leases of concurrency slots kept on disk, not in memory: a restarted server still
            # expires the slots runs held when it stopped (else they stay taken forever)
            "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": (
                "prefect.server.concurrency.lease_storage.filesystem"
            ),
        }
    )
    log = home / "server.log"
    if not port_free(port):
        raise PrefectPortBusy(port)
    try:
        process = start_detached(
            [_prefect_executable(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            log=log,
            env=env,
            cwd=home,  # its .env (the secrets) is read from here
            ready=lambda _process: healthy(url, auth_string=auth),
            what="prefect server",
            not_ready=f"did not answer on {url}",
            error=lambda text: PrefectServerError(text, log_file=log),
            timeout_s=timeout,
            poll_s=0.3,
            tail_chars=400,  # the end of its traceback fits the one `error:` line
        )
    except PrefectServerError:
        if not port_free(port):  # taken meanwhile: Prefect's own advice names a flag we lack
            raise PrefectPortBusy(port) from None
        raise
    server = PrefectServer(
        url, home, process.pid, log, "postgres" if database_url else "sqlite", auth
    )
    if automation:
        try:
            install_automation(server)
        except Exception as exc:
            stop_prefect_server(server.pid)
            raise PrefectServerError(
                f"the Prefect server on {url} started, but its crash automation could not be "
                f"installed ({type(exc).__name__}: {exc}); it was stopped (log {log})"
            ) from None
    return server


def install_automation(server: PrefectServer) -> None:
    """The zombie automation (`stackflow.crashes`) on `server`, once."""
    from prefect.client.orchestration import SyncPrefectClient

    from stackflow.crashes import install_zombie_automation

    with SyncPrefectClient(server.api_url, auth_string=server.auth_string) as client:
        install_zombie_automation(client)


def stop_prefect_server(pid: int, timeout: float = 15.0) -> None:
    """Stop a server started by `start_prefect_server` (its whole process group)."""
    stop(pid, group=True, timeout_s=timeout)


def _is_prefect_server(pid: int) -> bool:
    """Whether pid is alive and runs `prefect server` (a recorded pid may have been reused)."""
    return runs(pid, "prefect", "server")


def _record(home: Path) -> dict[str, Any] | None:
    try:
        found = json.loads((home / "server.json").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raise PrefectServerError(
            f"{home / 'server.json'} is damaged: stop the server that may run from it "
            "(`python flows/run.py server stop`), or delete the file, then start again"
        ) from None
    return found if isinstance(found, dict) else None


def ensure_local_prefect(
    state_dir: Path,
    port: int,
    say: Callable[[str], object] | None = None,
    database: str | None = None,
) -> PrefectServer:
    """The project's local server: reuse the one recorded in the state folder, else start one.

    Args:
        database: "sqlite" (one person), "postgres" (team mode on this machine: the project's
            PostgreSQL, Prefect's basic auth on), or None: whichever runs, else SQLite.

    Raises:
        PrefectPortBusy: another program holds the port (named when /proc says which).
        PrefectServerError: the folder's server runs on another port or database (it is never
            stopped under a run that may use it: `server stop` first), or it did not start.
    """
    home = StateLayout(state_dir).prefect
    url = f"http://127.0.0.1:{port}"
    info = _record(home)
    if info is not None and _is_prefect_server(int(info.get("pid", 0))):
        running_on = str(info.get("database", "sqlite"))
        auth = auth_string(home) if running_on == "postgres" else None
        if info.get("url") != url:
            raise PrefectServerError(
                f"this state folder's Prefect server runs on {info.get('url')}, not {url}; "
                "runs may be using it, so it is not moved: use "
                f"STACKFLOW_LOCAL_PREFECT_PORT={str(info.get('url')).rsplit(':', 1)[-1]}, or "
                "stop it first with `python flows/run.py server stop`"
            )
        if database is not None and database != running_on:
            raise PrefectServerError(
                f"this state folder's Prefect server runs on {running_on}, not {database}: stop "
                "it first with `python flows/run.py server stop`, then start it again"
            )
        answers = _answers(url, auth, running_on, wait_s=0.0)  # the usual case: at once
        if not answers and running_on == "postgres":
            from stackflow.postgres.team import TeamDatabase  # psycopg: only in team mode

            TeamDatabase(state_dir, say)  # its PostgreSQL, started again if it died
            answers = _answers(url, auth, running_on)  # ... and reached again by the server
        if answers:
            return PrefectServer(url, home, int(info["pid"]), home / "server.log", running_on, auth)
        if say is not None:  # alive but not answering, or not reaching its database: restarted
            say(f"the Prefect server on {url} does not answer or reach its database: restarting it")
        stop_prefect_server(int(info["pid"]))
    (home / "server.json").unlink(missing_ok=True)
    if not port_free(port):  # named before anything starts (team mode: its PostgreSQL)
        if healthy(url):
            raise PrefectServerError(
                f"port {port} already answers as a Prefect server that stackflow did not start; "
                f"set PREFECT_API_URL={url}/api to use it, or STACKFLOW_LOCAL_PREFECT_PORT to "
                "another port"
            )
        raise PrefectPortBusy(port)
    team = database == "postgres"
    if say is not None:
        where = "PostgreSQL (team mode)" if team else "SQLite"
        say(f"starting a local Prefect server on {url}, on {where} (~15 s; UI at {url})")
    database_url, extra = None, {}
    if team:
        from stackflow.postgres.team import TeamDatabase

        db = TeamDatabase(state_dir, say)
        database_url = db.prefect_url
        extra = {"backend_url": db.backend_url, "records_url": db.records_url}
    server = start_prefect_server(
        home, port, database_url=database_url, auth=auth_string(home) if team else None
    )
    record = {"url": server.url, "pid": server.pid, "database": server.database, **extra}
    replace_file(home / "server.json", json.dumps(record))
    return server


def _answers(url: str, auth: str | None, database: str, wait_s: float = 30.0) -> bool:
    """Whether a running server answers healthy and, on PostgreSQL, reaches its database within
    `wait_s` (its pool reconnects once a restarted PostgreSQL accepts connections)."""
    if not healthy(url, auth_string=auth):
        return False
    if database != "postgres":
        return True
    deadline = time.monotonic() + wait_s
    while not ready(url, auth_string=auth):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def server_record(state_dir: Path) -> dict[str, Any] | None:
    """What the state folder's local server record says (url, pid, database, the team URLs)."""
    return _record(StateLayout(state_dir).prefect)


def stop_local_prefect(state_dir: Path) -> bool:
    """Stop the state folder's local Prefect server (and, in team mode, its PostgreSQL); whether
    one was running or recorded.

    A damaged or lost record does not leave a server running: whatever still runs from the
    folder's Prefect home (found by its PREFECT_HOME) is stopped too, and so is a PostgreSQL
    running from the folder's `postgres/`.
    """
    layout = StateLayout(state_dir)
    home = layout.prefect
    try:
        info = _record(home)
    except PrefectServerError:  # damaged: what it would have named is found below
        info = None
    pid = int((info or {}).get("pid", 0))
    stopped = _is_prefect_server(pid) and stop(pid, group=True, timeout_s=15.0)
    leftovers = stop_under(home, variables=("PREFECT_HOME",)) if home.is_dir() else []
    database = False
    if layout.postgres.is_dir():  # only when one runs from this folder
        from stackflow.postgres import stop_postgres

        database = stop_postgres(layout.postgres)
    recorded = (home / "server.json").exists()
    (home / "server.json").unlink(missing_ok=True)
    return bool(stopped or leftovers or database or recorded)
