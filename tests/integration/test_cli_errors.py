"""Errors that say what to do, on the real local Prefect server's start path: a port another
program holds is named with the variable that sets it, the port, what holds it and a `what to do:`
line (before anything starts, and when it is taken while Prefect starts); a start that fails
quotes this start's reason from the server's log and names that log; with --json every one of
them is one JSON object on stdout."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackflow import exits
from stackflow.processes import free_port
from stackflow.state import StateLayout
from tests.realenv import cli, process_env
from tests.realenv import test_project as stackflow_project

pytestmark = pytest.mark.integration
LOCKED = "Traceback (most recent call last):\nsqlite3.OperationalError: database is locked\n"


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port this test process listens on (as another program would)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def machine(tmp_path: Path, port: int) -> dict[str, str]:
    """`python flows/run.py`'s environment: a state folder and project of its own, no Prefect
    server configured, the local Prefect server on `port`."""
    env = process_env(
        {
            "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
            "STACKFLOW_PROJECT_DIR": str(stackflow_project(tmp_path / "project")),
            "STACKFLOW_LOCAL_PREFECT_PORT": str(port),
        }
    )
    env.pop("PREFECT_API_URL", None)
    return env


def error_lines(stderr: str) -> tuple[str, str]:
    """The `error:` line and the `what to do:` line ("" when there is none)."""
    lines = stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    hint = lines[at + 1].strip() if at + 1 < len(lines) else ""
    return lines[at], hint if hint.startswith("what to do: ") else ""


def test_a_busy_local_prefect_port_names_the_variable_the_port_and_its_holder(
    tmp_path: Path, held_port: int
) -> None:
    """`server start` and a run (`up --json`) on a port this test holds with a real socket: exit
    1 before anything starts, never Prefect's advice about a --port flag the command line does
    not have."""
    env = machine(tmp_path, held_port)
    holder = f"pid {os.getpid()} ("
    started = cli(env, "server", "start", timeout=120)
    assert started.returncode == exits.FAILED, started.stdout + started.stderr
    error, hint = error_lines(started.stderr)
    for needed in ("STACKFLOW_LOCAL_PREFECT_PORT", f"port {held_port}", holder):
        assert needed in error, error
    assert "STACKFLOW_LOCAL_PREFECT_PORT to a free port" in hint, started.stderr
    assert "--port" not in started.stderr and "Traceback" not in started.stderr

    run = cli(env, "up", "--json", timeout=300)
    assert run.returncode == exits.FAILED, run.stdout + run.stderr
    outcome = json.loads(run.stdout)
    assert f"port {held_port}" in outcome["error"] and holder in outcome["error"]
    assert outcome["what_to_do"].startswith("set STACKFLOW_LOCAL_PREFECT_PORT to a free port")
    assert not (StateLayout(tmp_path / "state").prefect / "server.json").exists()


def test_a_port_taken_while_prefect_starts_is_named_not_prefects_own_advice(
    tmp_path: Path,
) -> None:
    """The real `prefect server start` finds its port taken (by this test, once the start has
    begun: the server's log appears before Prefect is imported) and exits with its own advice;
    the error names the holder instead."""
    from stackflow.localprefect import PrefectPortBusy, start_prefect_server

    home, port = tmp_path / "prefect", free_port()
    log = home / "server.log"
    taken = threading.Event()
    stop = threading.Event()

    def take_the_port() -> None:
        while not log.exists() and not stop.wait(0.005):
            pass
        with socket.socket() as held:
            held.bind(("127.0.0.1", port))
            held.listen()
            taken.set()
            stop.wait(120)

    thief = threading.Thread(target=take_the_port, daemon=True)
    thief.start()
    try:
        with pytest.raises(PrefectPortBusy) as busy:
            start_prefect_server(home, port, ui=False, automation=False, timeout=120)
    finally:
        stop.set()
        thief.join(10)
    assert taken.is_set()
    assert f"port {port} (STACKFLOW_LOCAL_PREFECT_PORT) is held by pid {os.getpid()}" in str(
        busy.value
    )
    assert "--port" in log.read_text()  # what Prefect said, and the error does not repeat
    assert "--port" not in str(busy.value) and busy.value.what_to_do


def test_a_failed_start_quotes_its_own_reason_and_names_the_log(tmp_path: Path) -> None:
    """Prefect refuses a bad PREFECT_* setting of this shell at start. The server's log holds an
    older start's traceback; the error line quotes this start's reason, names the log (where all
    of it is), and --json gives the same as one object."""
    env = {**machine(tmp_path, free_port()), "PREFECT_SERVER_API_KEEPALIVE_TIMEOUT": "soon"}
    log = StateLayout(tmp_path / "state").prefect / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text(LOCKED)

    started = cli(env, "server", "start", "--json", timeout=120)
    assert started.returncode == exits.FAILED, started.stdout + started.stderr
    error, _ = error_lines(started.stderr)
    assert "prefect server exited at start" in error and "keepalive_timeout" in error, error
    assert str(log) in error and "database is locked" not in error, error
    outcome = json.loads(started.stdout)
    assert outcome["log"] == str(log) and "keepalive_timeout" in outcome["error"]
    assert "database is locked" not in outcome["error"]
    assert log.read_text().startswith(LOCKED)  # the older lines are kept, only not quoted
