"""One program's own process, seen from stackflow's: start, watch, stop.

`ProgramHost` starts `python -m stackflow.engine.automation.host` for one operation: a clean
environment (`processes.clean_environment`: no state passphrase, backend URL or credentials of
stackflow's), a session and process group of its own (a terminal's Ctrl-C is stackflow's to
handle; a stop reaches the program's every thread and child), the program's folder as its working
directory. It hands the child its job on stdin, waits for the address its language server serves
on, and gives that to the CLI (`--client`). The program's prints reach the operation's listener,
masked. `stop` ends it (stdin closed: it exits; a program that holds on is killed with its group
seconds later); `kill` ends it at once, for a cancel. A child that ends by itself before the
operation does (a program calling `os._exit`) is a failure the operation reports (`failure`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import stackflow
from stackflow.engine.base import Listener
from stackflow.engine.hosted import HostedProgram
from stackflow.errors import PermanentStackError
from stackflow.processes import clean_environment, send_signal, wait_gone

READY_TIMEOUT_S = 120.0  # importing pulumi on a loaded machine: seconds, never minutes
STOP_GRACE_S = 5.0  # a program's process that outlives its closed stdin this long is killed
KILL_GRACE_S = 2.0  # after SIGTERM on a cancel, before SIGKILL


def _environment() -> dict[str, str]:
    """The program's environment: none of stackflow's settings or credentials (see
    `clean_environment`), and this stackflow's own code on its path after the program's folder
    (a commit's checkout runs the host of its own commit)."""
    env = clean_environment({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    ours = str(Path(stackflow.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ours, env.get("PYTHONPATH", "")) if p)
    return env


class ProgramHost:
    """One running program process (see the module)."""

    def __init__(self, program: HostedProgram, listener: Listener, label: str) -> None:
        self.program = program
        self.listener = listener
        self.label = label
        self.address = ""
        self.count: int | None = None  # resources the program declared, once it has run
        self.refused = ""  # a StackReference it was refused, in words
        self._ending = False  # asked to end: an exit from here on is not the program's doing
        self._ready = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._readers: list[threading.Thread] = []
        self._stderr_tail: list[str] = []

    def start(self, job: Mapping[str, Any]) -> None:
        """Start the process and wait until its language server serves.

        Raises:
            PermanentStackError: it exited or did not serve in time (with what it printed).
        """
        read_end, write_end = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-B", "-m", "stackflow.engine.automation.host"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.program.folder,
                env=_environment(),
                pass_fds=(write_end,),
                encoding="utf-8",
                errors="replace",
                start_new_session=True,  # its own process group: a stop reaches all of it
            )
        finally:
            os.close(write_end)
        process = self._process
        control = os.fdopen(read_end, encoding="utf-8", errors="replace")
        assert process.stdin is not None and process.stdout is not None and process.stderr
        self._read(process.stdout, self._printed)
        self._read(process.stderr, self._complained)
        self._read(control, self._told)
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(json.dumps({**job, "control_fd": write_end}) + "\n")
            process.stdin.flush()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready.wait(0.05):
            if process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                said = "; ".join(self._stderr_tail[-5:]) or "nothing"
                raise PermanentStackError(
                    self.label,
                    self.listener.redactor(
                        f"the program's process (python -m stackflow.engine.automation.host, in "
                        f"{self.program.folder}) did not start serving (exit "
                        f"{process.returncode}); it said: {said}"
                    ),
                )

    def _read(self, stream: IO[str], handle: Any) -> None:
        def pump() -> None:
            with contextlib.suppress(ValueError, OSError):
                for line in iter(stream.readline, ""):
                    handle(line.rstrip("\n"))
            stream.close()

        reader = threading.Thread(target=pump, name=f"host-{self.label}", daemon=True)
        reader.start()
        self._readers.append(reader)

    def _printed(self, line: str) -> None:
        self.listener.line(line)  # masked by the listener's redactor

    def _complained(self, line: str) -> None:
        self._stderr_tail = [*self._stderr_tail[-19:], self.listener.redactor(line)]
        self.listener.line(line)

    def _told(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if "ready" in message:
            self.address = str(message["ready"])
            self._ready.set()
        elif "declared" in message:
            self.program.noted(declared={str(message["declared"])})
        elif "read" in message:
            self.program.noted(read={str(message["read"])})
        elif "refused" in message:
            self.refused = str(message["refused"])
        elif "count" in message:
            self.count = int(message["count"])
            self.listener.declared(self.count)

    def failure(self) -> str:
        """Why the operation failed on the program's side ("" when it did not): a reference it
        was refused, or its process ending before the operation did."""
        if self.refused:
            return self.refused
        process = self._process
        if process is None or self._ending or process.poll() is None:
            return ""
        return (
            f"the program's process ended in the middle of the operation (exit "
            f"{process.returncode}, e.g. a call to os._exit or sys.exit from a thread): the "
            "operation failed; what it left pending, the next run clears"
        )

    def stop(self) -> None:
        """End the process: stdin closed (it exits), then killed with its group if it holds on."""
        process = self._process
        if process is None:
            return
        self._ending = True
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            assert process.stdin is not None
            process.stdin.close()
        if not wait_gone(process.pid, STOP_GRACE_S):
            send_signal(process.pid, signal.SIGKILL, group=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(KILL_GRACE_S)
        send_signal(process.pid, signal.SIGKILL, group=True)  # what it started, if anything
        for reader in self._readers:
            reader.join(KILL_GRACE_S)

    def kill(self) -> None:
        """End it now, for a cancel: SIGTERM to its group, SIGKILL seconds later."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        self._ending = True
        send_signal(process.pid, signal.SIGTERM, group=True)
        if not wait_gone(process.pid, KILL_GRACE_S):
            send_signal(process.pid, signal.SIGKILL, group=True)
