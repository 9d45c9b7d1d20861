"""Processes end when their owner does: a local cloud given SIGTERM stops its databases and starts
none again; `server stop` and `cloud status`/`cloud stop` find what runs from the state folder
when its records are damaged; servers a pytest run started end when that pytest is killed;
`serve` ends within seconds of SIGTERM after its Prefect server is gone.

The local cloud here is moto on loopback with a MariaDB per RDS instance (not AWS)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.paths import cloud_root
from stackflow.localcloud.server import cloud_status, ensure_cloud, stop_cloud
from stackflow.localprefect import start_prefect_server, stop_local_prefect
from stackflow.processes import free_port, pid_alive, processes_under, runs
from stackflow.state import StateLayout
from tests import realenv
from tests.realenv import ROOT

pytestmark = pytest.mark.faults

REGION = "eu-west-1"


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Wait for `condition` to turn true, failing with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:g}s: {what}"
        time.sleep(0.1)


def _mariadbds(root: Path) -> list[int]:
    return [pid for pid in processes_under(root) if runs(pid, "mariadbd")]


def _cloud_with_a_database(state_dir: Path) -> tuple[Path, int, list[int]]:
    """A local cloud of its own with one RDS instance (so one MariaDB of its data plane)."""
    root = cloud_root(state_dir)
    server = ensure_cloud(root, free_port(), region=REGION, say=lambda _: None)
    CloudContext(server.url, REGION).client("rds").create_db_instance(
        DBInstanceIdentifier="owned",
        Engine="mysql",
        DBInstanceClass="db.t3.micro",
        MasterUsername="admin",
        MasterUserPassword=secrets.token_urlsafe(16),
        DBName="app",
        AllocatedStorage=20,
    )
    databases = _mariadbds(root)
    assert databases, "the RDS instance's MariaDB runs from the cloud root"
    return root, server.pid, databases


def test_a_local_cloud_given_sigterm_stops_its_databases_and_starts_none_again(
    tmp_path: Path,
) -> None:
    root, pid, databases = _cloud_with_a_database(tmp_path / "state")
    try:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not pid_alive(pid), "the local cloud server exits after SIGTERM")
        wait_until(lambda: not any(pid_alive(p) for p in databases), "its MariaDB ends with it")
        assert _mariadbds(root) == [], "no database was started again after the SIGTERM"
    finally:
        stop_cloud(root)


def test_cloud_status_and_stop_find_a_server_whose_record_is_damaged(tmp_path: Path) -> None:
    root, pid, databases = _cloud_with_a_database(tmp_path / "state")
    try:
        (root / "server.json").write_text('{"url": "http://127.0.0.1:')  # garbled
        found = cloud_status(root)
        assert found is not None and found.pid == pid, "status sees the server that runs"
        assert stop_cloud(root) is True
        assert not pid_alive(pid)
        assert not any(pid_alive(p) for p in databases)
        assert processes_under(root) == []
    finally:
        stop_cloud(root)


def test_server_stop_stops_a_prefect_server_whose_record_is_damaged(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    home = StateLayout(state_dir).prefect
    server = start_prefect_server(home, free_port(), ui=False, automation=False)
    try:
        (home / "server.json").write_text("{not json")
        assert stop_local_prefect(state_dir) is True
        assert not pid_alive(server.pid)
        assert processes_under(home, variables=("PREFECT_HOME",)) == []
        assert not (home / "server.json").exists()
    finally:
        stop_local_prefect(state_dir)


INNER_TEST = """
import json
import os
import threading
from pathlib import Path


def test_hold(local_cloud, mariadb):
    Path(os.environ["HOLD_FILE"]).write_text(
        json.dumps({"cloud": local_cloud.server.pid, "mariadb_dir": str(mariadb.base_dir)})
    )
    threading.Event().wait()  # until the outer test kills this pytest
"""


def test_servers_a_killed_pytest_started_end_with_it(tmp_path: Path) -> None:
    """kill -9 of a pytest run that started a local cloud and a MariaDB: both end within
    seconds (its reaper sees the pipe close), none left running."""
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text(textwrap.dedent(INNER_TEST))
    hold = tmp_path / "hold.json"
    env = {**os.environ, "HOLD_FILE": str(hold), "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.fixtures.reaper",
            "-p",
            "tests.fixtures.localcloud",
            "-p",
            "tests.fixtures.mariadb",
            "--rootdir",
            str(inner),
            "-c",
            os.devnull,
            "--basetemp",
            str(tmp_path / "inner-tmp"),
            str(inner / "test_inner.py"),
        ],
        cwd=inner,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: hold.exists() and hold.read_text(), "the inner test holds its servers")
        held = json.loads(hold.read_text())
        mariadbs = processes_under(Path(held["mariadb_dir"]))
        assert pid_alive(held["cloud"]) and mariadbs, "both servers run while pytest does"
        process.kill()
        process.wait(timeout=30)
        wait_until(lambda: not pid_alive(held["cloud"]), "the local cloud ends with its pytest")
        wait_until(
            lambda: not any(pid_alive(p) for p in mariadbs), "the MariaDB ends with its pytest"
        )
        assert processes_under(tmp_path / "inner-tmp", variables=None) == []
    finally:
        if process.poll() is None:
            process.kill()
        from stackflow.processes import stop_under

        stop_under(tmp_path / "inner-tmp", variables=None)


def test_serve_ends_within_seconds_of_sigterm_when_its_server_is_gone(tmp_path: Path) -> None:
    home = tmp_path / "prefect"
    port = free_port()
    server = start_prefect_server(home, port, ui=False, automation=False)
    log = tmp_path / "serve.log"
    project = realenv.test_project(tmp_path / "project")
    (project / "environments" / "dev.toml").write_text('kind = "dev"\ncloud = "local"\n')
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("STACKFLOW_", "PREFECT_"))},
        "PREFECT_API_URL": server.api_url,
        "PREFECT_HOME": str(tmp_path / "client-home"),
        "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
        "STACKFLOW_PROJECT_DIR": str(project),
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as out:
        served = subprocess.Popen(
            [sys.executable, str(ROOT / "deployments" / "serve.py"), "--env", "dev"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: "serving " in log.read_text() or served.poll() is not None,
            "serve.py registers its deployments",
            timeout_s=120,
        )
        assert served.poll() is None, log.read_text()
        wait_until(lambda: catches_sigterm(served.pid), "its runner handles SIGTERM")
        stop_local_prefect_group(server.pid)
        # Gone as a dead host is: its address takes connections and never answers a request
        # (bound once the killed server's last process has let go of its port)
        held: list[socket.socket] = []
        wait_until(lambda: _bind(port, held), "the dead server's port is free to stand in for it")
        with held[0]:
            sent = time.monotonic()
            served.send_signal(signal.SIGTERM)
            served.wait(timeout=60)
        took = time.monotonic() - sent
        assert took < 15, f"serve took {took:.1f}s to end after SIGTERM:\n{log.read_text()}"
    finally:
        if served.poll() is None:
            served.kill()
        stop_local_prefect_group(server.pid)


def _bind(port: int, held: list[socket.socket]) -> bool:
    """Listen on `port` (the socket kept in `held`); False while something else holds it."""
    try:
        held.append(socket.create_server(("127.0.0.1", port), backlog=64))
    except OSError:
        return False
    return True


def catches_sigterm(pid: int) -> bool:
    """Whether `pid` has a handler of its own for SIGTERM (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def stop_local_prefect_group(pid: int) -> None:
    """The Prefect server gone at once (SIGKILL to its process group), as a crash leaves it."""
    from stackflow.processes import send_signal

    send_signal(pid, signal.SIGKILL, group=True)
    wait_until(lambda: not pid_alive(pid), "the Prefect server is gone")
