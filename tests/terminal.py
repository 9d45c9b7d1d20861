"""A command in a pseudo-terminal, as a person runs it: what it drew (with when), keys sent to it.

The process is the terminal's foreground process group, so Ctrl-C (the byte 0x03) reaches it and
its children the way a keyboard's does.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import struct
import termios
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fcntl import ioctl
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
CTRL_C = b"\x03"


def plain(text: str) -> str:
    """`text` without terminal control sequences."""
    return ANSI.sub("", text)


@dataclass
class Terminal:
    """One process on a pseudo-terminal (120 columns, 40 rows)."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    chunks: list[tuple[float, bytes]] = field(default_factory=list)  # (monotonic, bytes read)
    pid: int = 0
    fd: int = -1
    code: int | None = None

    def __post_init__(self) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec the command on the terminal
            os.chdir(self.cwd)
            os.execve(self.argv[0], list(self.argv), dict(self.env))
        self.pid, self.fd = pid, fd
        ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

    @property
    def raw(self) -> str:
        return b"".join(chunk for _, chunk in self.chunks).decode(errors="replace")

    @property
    def text(self) -> str:
        return plain(self.raw)

    def _read(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False once the terminal is closed."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        self.chunks.append((time.monotonic(), data))
        return True

    def wait_for(self, pattern: str, timeout: float) -> float:
        """Read until `pattern` (a regex) appears in the plain text; when it appeared."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.text)
            if match:
                return self._when(match.end())
            if not self._read(0.1):
                break
        raise AssertionError(f"{pattern!r} did not appear within {timeout}s:\n{self.text[-4000:]}")

    def _when(self, end: int) -> float:
        """The time of the chunk that completed plain-text offset `end`."""
        seen = ""
        for at, chunk in self.chunks:
            seen += chunk.decode(errors="replace")
            if len(plain(seen)) >= end:
                return at
        return time.monotonic()

    def send(self, data: bytes) -> float:
        os.write(self.fd, data)
        return time.monotonic()

    def wait(self, timeout: float) -> int:
        """Read to the end; the exit code."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.2):
            pass
        for _ in range(100):
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.code = os.waitstatus_to_exitcode(status)
                os.close(self.fd)
                return self.code
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.kill()
        raise AssertionError(f"still running after {timeout}s:\n{self.text[-4000:]}")

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
