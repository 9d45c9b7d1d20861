"""The process helpers every local server uses, on real processes: liveness (zombies and
recycled pids), ports, start-and-wait with the log's tail, and stop (TERM, then KILL)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stackflow.processes import (
    folder_lock,
    free_port,
    pid_alive,
    port_free,
    port_holder,
    runs,
    start_detached,
    stop,
)

pytestmark = pytest.mark.unit


class Refused(Exception):
    pass


def test_an_exited_child_is_dead_although_not_yet_reaped() -> None:
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while pid_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pid_alive(child.pid)
    assert not pid_alive(0) and not pid_alive(-1)


def started_child(tmp_path: Path, code: str = "") -> subprocess.Popen[bytes]:
    """A Python child that runs `code`, then says it runs (a file) and sleeps: its command line
    is its own once the file exists (just after exec, /proc may still show an empty one)."""
    ready = tmp_path / "child-ready"
    script = f"{code}\nopen({str(ready)!r}, 'w').close()\nimport time\ntime.sleep(60)\n"
    child = subprocess.Popen([sys.executable, "-c", script, "toy-child"])
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return child


def test_runs_checks_the_command_line_so_a_recycled_pid_does_not_count(tmp_path: Path) -> None:
    child = started_child(tmp_path)
    try:
        assert runs(child.pid, "toy-child", sys.executable)
        assert not runs(child.pid, "mariadbd")  # what a recycled pid of another program looks like
    finally:
        child.kill()
        child.wait()
    assert not runs(child.pid, "toy-child")


def test_ports_free_and_used() -> None:
    port = free_port()
    assert port_free(port)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        assert not port_free(port)


def test_start_detached_names_the_log_and_shows_its_tail_when_the_server_exits(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    with pytest.raises(Refused, match=r"toy server exited at start \(exit 3\)") as failed:
        start_detached(
            [sys.executable, "-c", "print('cannot bind: address in use'); raise SystemExit(3)"],
            log=log,
            ready=lambda _process: False,
            what="toy server",
            not_ready="did not answer",
            error=Refused,
            timeout_s=30,
        )
    assert str(log) in str(failed.value) and "cannot bind: address in use" in str(failed.value)


def test_start_detached_quotes_only_what_this_start_wrote_to_the_log_it_appends_to(
    tmp_path: Path,
) -> None:
    """A server that ran here before left a traceback in the log every start appends to: the
    error of this start quotes this start's lines, never that one (the log keeps both)."""
    log = tmp_path / "server.log"
    log.write_text("Traceback (most recent call last):\nOperationalError: database is locked\n")
    with pytest.raises(Refused) as failed:
        start_detached(
            [sys.executable, "-c", "print('cannot bind: address in use'); raise SystemExit(1)"],
            log=log,
            ready=lambda _process: False,
            what="toy server",
            not_ready="did not answer",
            error=Refused,
            timeout_s=30,
        )
    assert "cannot bind: address in use" in str(failed.value)
    assert "database is locked" not in str(failed.value)
    assert "database is locked" in log.read_text() and "address in use" in log.read_text()


def test_the_program_that_holds_a_port_is_named_by_pid_and_name_only() -> None:
    port = free_port()
    assert port_holder(port) is None
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen()
        name = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
        assert port_holder(port) == f"pid {os.getpid()} ({name})"


def test_start_detached_stops_a_server_that_is_not_ready_in_time(tmp_path: Path) -> None:
    seen: list[int] = []
    with pytest.raises(Refused, match=r"toy server did not answer within 0.5s"):
        start_detached(
            ["sleep", "60"],
            log=tmp_path / "server.log",
            ready=lambda _process: False,
            what="toy server",
            not_ready="did not answer",
            error=Refused,
            timeout_s=0.5,
            started=lambda process: seen.append(process.pid),
        )
    assert seen and not pid_alive(seen[0])


def test_start_detached_returns_once_ready_in_a_session_of_its_own(tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    process = start_detached(
        [sys.executable, "-c", f"open({str(marker)!r}, 'w').close(); import time; time.sleep(60)"],
        log=tmp_path / "server.log",
        ready=lambda _process: marker.exists(),
        what="toy server",
        not_ready="did not answer",
        error=Refused,
        timeout_s=30,
    )
    try:
        assert os.getpgid(process.pid) == process.pid  # a terminal's Ctrl-C does not reach it
    finally:
        assert stop(process.pid, group=True, timeout_s=10)
    assert not pid_alive(process.pid)
    assert not stop(process.pid)  # nothing left to stop


def test_stop_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    child = started_child(tmp_path, "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)")
    assert stop(child.pid, timeout_s=0.3)
    assert not pid_alive(child.pid)


def test_folder_lock_creates_a_private_folder(tmp_path: Path) -> None:
    folder = tmp_path / "server"
    with folder_lock(folder):
        assert (folder / ".lock").exists()
    assert folder.stat().st_mode & 0o077 == 0
