"""The project's own PostgreSQL (real, Debian's): started once, reused, stopped alone; its URLs
really serve psycopg and a real Prefect server over the private socket, with no password."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from stackflow.localprefect import healthy, stop_prefect_server
from stackflow.postgres import (
    PostgresFolderError,
    PostgresServer,
    connect,
    create_database,
    drop_database,
    ensure_postgres,
    postgres_status,
    prefect_database_url,
    records_url,
    stop_postgres,
)
from stackflow.postgres.host import server_account
from stackflow.processes import free_port
from tests.fixtures.reaper import watch

pytestmark = pytest.mark.integration


@pytest.fixture
def own_server_dir() -> Iterator[Path]:
    """A private folder for a server of this test's own (not the session's)."""
    base = Path(tempfile.mkdtemp(prefix="stackflow-pg-own-"))
    watch(base)  # stopped when pytest ends, however it ends
    try:
        yield base
    finally:
        stop_postgres(base)
        shutil.rmtree(base, ignore_errors=True)


def test_the_session_server_listens_on_a_private_socket_only(postgres: PostgresServer) -> None:
    account = server_account()
    socket_dir = postgres.socket_dir
    assert socket_dir.parent == postgres.base_dir
    assert socket_dir.stat().st_mode & 0o777 == 0o700
    assert socket_dir.stat().st_uid == account.pw_uid
    assert postgres.host is None  # no TCP
    assert (socket_dir / ".s.PGSQL.5432").is_socket()
    with connect(postgres) as conn:
        row = conn.execute("SHOW listen_addresses").fetchone()
        assert row == ("",)
        assert conn.execute("SELECT current_user").fetchone() == ("stackflow",)
    # The server's own process runs as the server's OS user, never root.
    assert Path(f"/proc/{postgres.pid}").stat().st_uid == account.pw_uid


def test_ensure_reuses_the_running_server_and_status_reports_it(postgres: PostgresServer) -> None:
    again = ensure_postgres(postgres.base_dir)
    assert again == postgres
    assert postgres_status(postgres.base_dir) == postgres


def test_create_database_is_idempotent_and_the_records_url_connects(
    postgres: PostgresServer,
) -> None:
    name = f"t_idem_{os.getpid()}"
    try:
        assert create_database(postgres, name) is True
        assert create_database(postgres, name) is False
        url = records_url(postgres, name)
        assert ":" not in url.split("@", 1)[0].removeprefix("postgresql://")  # no password
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (name,)
    finally:
        assert drop_database(postgres, name) is True


def test_stop_ends_only_its_server_and_ensure_starts_it_again_with_its_data(
    own_server_dir: Path,
) -> None:
    first = ensure_postgres(own_server_dir, port=6543)
    create_database(first, "kept")
    neighbour = subprocess.Popen(["sleep", "300"])  # a process stop must leave alone
    try:
        assert stop_postgres(own_server_dir) is True
        assert postgres_status(own_server_dir) is None
        assert neighbour.poll() is None
        assert stop_postgres(own_server_dir) is False  # nothing left to stop
        second = ensure_postgres(own_server_dir, port=6543)
        assert second.pid != first.pid
        assert create_database(second, "kept") is False  # the cluster survived the restart
    finally:
        neighbour.kill()
        neighbour.wait()


def test_a_folder_the_server_user_cannot_reach_is_refused_with_the_fix(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another OS user")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    with pytest.raises(PostgresFolderError) as caught:
        ensure_postgres(locked / "postgres")
    message = str(caught.value)
    assert "cannot reach" in message and "chmod o+x" in message
    assert not (locked / "postgres").exists()  # refused before anything was made


def test_prefect_server_runs_on_it_over_the_socket(
    postgres: PostgresServer, fresh_database: str, tmp_path: Path
) -> None:
    """`prefect server start` with PREFECT_API_DATABASE_CONNECTION_URL on the socket URL: the
    server migrates its schema into the database and stores what the API is sent."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
        "PREFECT_HOME": str(tmp_path / "home"),
        "PREFECT_API_DATABASE_CONNECTION_URL": prefect_database_url(postgres, fresh_database),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
    }
    log = tmp_path / "server.log"
    prefect = str(Path(sys.executable).parent / "prefect")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not healthy(url):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        request = urllib.request.Request(
            f"{url}/api/flows/",
            data=json.dumps({"name": "team-mode-probe"}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status in (200, 201)
        with connect(postgres, fresh_database) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM flow").fetchall()]
        assert names == ["team-mode-probe"]
    finally:
        stop_prefect_server(process.pid)
        process.wait(timeout=30)
