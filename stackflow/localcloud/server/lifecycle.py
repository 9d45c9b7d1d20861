"""Managing the local cloud's server from other processes: start (or reuse), status, stop.

In the style of `stackflow.localprefect` and `stackflow.localdb`, through `stackflow.processes`:
one server per cloud root (a lock in the root makes concurrent callers take turns), found again
through its record, recognised by its command line (a recorded pid may have been reused).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from stackflow import PROJECT_ROOT
from stackflow.localcloud.control import ControlClient
from stackflow.localcloud.errors import CloudServerError, ControlApiError
from stackflow.localcloud.paths import dataplane_dir, passphrase, server_log
from stackflow.localcloud.server.hooks import load_dataplane
from stackflow.localcloud.server.motoapp import ACM_VALIDATION_WAIT
from stackflow.localcloud.server.record import (
    DEFAULT_PORT,
    DEFAULT_REGION,
    CloudServer,
    forget_record,
    read_record,
)
from stackflow.processes import (
    clean_environment,
    folder_lock,
    processes_under,
    runs,
    start_detached,
    stop,
    stop_under,
    wait_gone,
    wait_port_free,
)

if TYPE_CHECKING:
    from stackflow.settings import Settings

MODULE = "stackflow.localcloud.server"  # what the server process runs (`python -m`)
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 30.0
_LOCK = ".server.lock"

log = logging.getLogger("stackflow.localcloud")


def _is_cloud_server(pid: int, root: Path) -> bool:
    """Whether pid is alive and is this root's cloud server (a recorded pid may have been reused)."""
    return runs(pid, MODULE, str(root))


def cloud_status(root: Path) -> CloudServer | None:
    """The state folder's local cloud server if its process is alive, else None. A server whose
    record is damaged or lost is found by its command line (it names this root) all the same."""
    root = root.resolve()
    server = read_record(root)
    if server is not None and _is_cloud_server(server.pid, root):
        return server
    return _found_running(root)


def _found_running(root: Path) -> CloudServer | None:
    """The root's server as its own command line describes it (its record cannot tell)."""
    for pid in processes_under(root):
        if not _is_cloud_server(pid, root):
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue

        port = int(_option(argv, "--port", str(DEFAULT_PORT)))
        region = _option(argv, "--region", DEFAULT_REGION)
        url = f"http://127.0.0.1:{port}"
        return CloudServer(url, pid, root, port, region, "--no-dataplane" not in argv)
    return None


def _option(argv: list[str], name: str, default: str) -> str:
    """The value after `name` in a command line (default: not there)."""
    return argv[argv.index(name) + 1] if name in argv[:-1] else default


def _start(root: Path, port: int, region: str, dataplane: bool) -> CloudServer:
    # Never the caller's secrets (a state passphrase, a backend password): see clean_environment.
    env = clean_environment(
        {
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
            "MOTO_IAM_LOAD_MANAGED_POLICIES": "true",
            "MOTO_ACM_VALIDATION_WAIT": ACM_VALIDATION_WAIT,
            "PYTHONUNBUFFERED": "1",
            # Fixed string hashing: set iteration order inside moto is the same in every server
            # process, so a replay draws its random ids in the same order as the original run.
            "PYTHONHASHSEED": "0",
        }
    )
    url = f"http://127.0.0.1:{port}"
    control = ControlClient(url)

    def ready(process: subprocess.Popen[bytes]) -> bool:
        answer = control.health()
        return bool(answer and answer.get("ok") and answer.get("pid") == process.pid)

    argv = [sys.executable, "-m", MODULE, "--root", str(root), "--port", str(port)]
    process = start_detached(
        [*argv, "--region", region, *([] if dataplane else ["--no-dataplane"])],
        log=server_log(root),
        env=env,
        cwd=root,  # a stray relative path (a library's own file) lands in the root, not here
        ready=ready,
        what="the local cloud server",
        not_ready=f"did not answer on {url}",
        error=CloudServerError,
        timeout_s=_START_TIMEOUT_S,
        poll_s=0.1,
        tail_chars=3000,
    )
    return CloudServer(url, process.pid, root, port, region, dataplane)


def ensure_cloud_for(settings: Settings) -> CloudServer:
    """The server a run on `settings` uses (its folder, port and region), started if needed;
    quietly: the run says what it does itself."""
    return ensure_cloud(
        settings.localcloud_root,
        settings.localcloud.port,
        region=settings.aws.region,
        say=lambda _line: None,
    )


def ensure_cloud(
    root: Path,
    port: int = DEFAULT_PORT,
    *,
    region: str = DEFAULT_REGION,
    dataplane: bool = True,
    say: Callable[[str], object] = print,
) -> CloudServer:
    """Make sure the local cloud's server runs on 127.0.0.1:port; start it if not.

    Reuses a healthy server of the same folder on the same port with the same data plane choice
    (whatever its default region: it answers for every region). A server of the folder on another
    port, or one that does not answer, is stopped first (one journal, one server). Concurrent
    callers take turns on a lock in the cloud root, so they all end up with the same server.

    Args:
        root: the local cloud's folder (the `localcloud_root` of settings).
        port: TCP port on 127.0.0.1 (the `localcloud.port` setting).
        region: the server's default region.
        dataplane: run the data plane (databases, app stand-ins); False for tests of moto alone.
        say: receives one-line progress messages.

    Raises:
        CloudServerError: the port is taken by another program, or the server exits or does not
            answer at start (with the tail of its log).
    """
    root = root.resolve()
    with folder_lock(root, _LOCK):
        passphrase(root)  # generated here, once, before any process needs it
        server = cloud_status(root)
        if server is not None:
            healthy = ControlClient(server.url).health()
            if (
                (server.port, server.dataplane) == (port, dataplane)
                and healthy
                and healthy.get("ok")
            ):
                return server
            if server.port != port:
                reason = f"moving it to port {port}"
            elif server.dataplane != dataplane:
                reason = f"restarting it with the data plane {'on' if dataplane else 'off'}"
            else:
                reason = "it does not answer"
            say(f"stopping the local cloud server on {server.url} (pid {server.pid}): {reason}")
            stop(server.pid, group=True, timeout_s=_STOP_TIMEOUT_S)
            forget_record(root)
        if not wait_port_free(port):
            other = ControlClient(f"http://127.0.0.1:{port}").health()
            if other and other.get("root"):
                raise CloudServerError(
                    f"port {port} on 127.0.0.1 is used by the local cloud of {other['root']}; "
                    "stop that one (`python flows/run.py cloud stop` with its state folder) or set "
                    "this one's port (STACKFLOW_LOCALCLOUD_PORT) to a free one"
                )
            raise CloudServerError(
                f"port {port} on 127.0.0.1 is in use by another program; set the local cloud's "
                "port (STACKFLOW_LOCALCLOUD_PORT) to a free one"
            )
        say(f"starting the local cloud (moto on 127.0.0.1:{port}; files in {root})")
        started = time.monotonic()
        server = _start(root, port, region, dataplane)
        answer = ControlClient(server.url).health() or {}
        say(
            f"local cloud ready on {server.url} in {time.monotonic() - started:.1f}s "
            f"({answer.get('replayed', 0)} journal entries replayed)"
        )
        return server


def stop_cloud(root: Path) -> bool:
    """Stop the local cloud's server and its data plane (databases, app stand-ins).

    The server is asked to stop its data plane and exit; if it does not answer it is terminated.
    With no server running, the data plane's leftovers (databases that outlived a crashed
    server) are stopped all the same.

    Returns:
        True if a running server was stopped.
    """
    root = root.resolve()
    if not root.is_dir():
        return False
    with folder_lock(root, _LOCK):
        server = cloud_status(root)
        if server is None:
            record = read_record(root)
            url = record.url if record else f"http://127.0.0.1:{DEFAULT_PORT}"
            region = record.region if record else DEFAULT_REGION
            if dataplane_dir(root).is_dir():
                try:
                    load_dataplane(root, url, region).stop_all()
                except Exception as exc:  # best effort: nothing is running that we know of
                    log.warning("stopping the local cloud's data plane failed: %s", exc)
            stop_under(root)  # what outlived its server and its records (a killed server's MariaDB)
            forget_record(root)
            return False
        try:
            ControlClient(server.url).shutdown(timeout_s=_STOP_TIMEOUT_S)
        except ControlApiError as exc:
            log.warning("the local cloud server did not take the shutdown call: %s", exc)
        if not wait_gone(server.pid, _STOP_TIMEOUT_S):
            stop(server.pid, group=True, timeout_s=_STOP_TIMEOUT_S)
        stop_under(root)  # a data plane its records no longer name (a damaged record)
        forget_record(root)
        return True
