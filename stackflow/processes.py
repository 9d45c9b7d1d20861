"""The local processes the project starts and watches: liveness, ports, locks, start, stop.

One set of rules for every server the project runs on this machine (its MariaDB servers, the
Prefect server, the local cloud's server) and for the engine's check of a lock holder:

- a process is alive while it runs: an exited one is dead even while it is a zombie, and a pid
  recycled by another program is not the process that was recorded (its command line tells);
- a server is started detached (its own session and process group, so it outlives the caller and
  a terminal's Ctrl-C does not reach it), and waited for until it says it is ready; when it exits
  or does not get ready in time, the error carries the end of its log;
- a server is stopped with SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path

LOOPBACK = "127.0.0.1"
_POLL_S = 0.05


# --- liveness ---------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs.

    An exited process is dead even while a zombie: our own child is reaped here; another
    process's child reads 'Z' in /proc.
    """
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError):  # not our child: nothing to reap
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (not Linux): kill 0 is all we know
    return state != "Z"


def runs(pid: int, *needles: str | bytes) -> bool:
    """Whether `pid` is alive and its command line holds every needle: a recorded pid that another
    program got since (pids are recycled) does not count. Without /proc, liveness alone decides."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()  # exited meanwhile; or no /proc (not Linux)
    return all((n.encode() if isinstance(n, str) else n) in cmdline for n in needles)


def processes_under(folder: Path, variables: Collection[str] | None = ()) -> list[int]:
    """Every live process that runs from `folder`: its command line names a path inside it (a
    server's data folder, its root), or one of its environment `variables` does (a Prefect
    server's PREFECT_HOME; None: any variable). This process and its ancestors are never among
    them. How a server whose record is lost or damaged is still found; without /proc: none."""
    root = os.fsencode(folder.resolve())
    skip = _self_and_ancestors()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid in skip:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes() if variables != () else b""
        except OSError:
            continue  # exited meanwhile, or not ours to read
        inside = any(_inside(arg, root) for arg in cmdline.split(b"\0")) or any(
            _inside(value, root)
            for name, _, value in (v.partition(b"=") for v in environ.split(b"\0"))
            if variables is None or os.fsdecode(name) in variables
        )
        if inside and pid_alive(pid):
            found.append(pid)
    return sorted(found)


def _inside(value: bytes, root: bytes) -> bool:
    """Whether an argument (`/path`, or `--option=/path`) or a value names a path inside root."""
    path = value.partition(b"=")[2] if value.startswith(b"-") else value
    return path == root or path.startswith(root + b"/")


def _self_and_ancestors() -> set[int]:
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return found


def stop_under(
    folder: Path, variables: Collection[str] | None = (), timeout_s: float = 15.0
) -> list[int]:
    """Stop every process that runs from `folder` (see `processes_under`): SIGTERM to all at
    once, then SIGKILL to what is left after `timeout_s`. Returns the pids that were running."""
    pids = processes_under(folder, variables)
    for pid in pids:
        send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        if not wait_gone(pid, max(0.0, deadline - time.monotonic())):
            send_signal(pid, signal.SIGKILL)
            wait_gone(pid, 5.0)
    return pids


# --- ports --------------------------------------------------------------------------------------


def port_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether nothing listens on host:port (TCP)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def wait_port_free(port: int, host: str = LOOPBACK, wait_s: float = 5.0) -> bool:
    """Whether host:port is free, waiting up to `wait_s`: a server that just exited shows as a
    zombie while its other threads still close the listening socket."""
    deadline = time.monotonic() + wait_s
    while not port_free(port, host):
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def port_holder(port: int) -> str | None:
    """What listens on TCP `port` (any address): "pid N (name)", from /proc; None when that cannot
    be found (no /proc, or another user's process). The name is the program's, never its
    arguments (another program's command line may hold a secret)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                fields = row.split()  # sl, local address, remote address, state, ..., inode
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):  # gone meanwhile, or another user's
            if any(_link(fd) in inodes for fd in fd_dir.iterdir()):
                name = (fd_dir.parent / "comm").read_text().strip()
                return f"pid {fd_dir.parent.name} ({name})"
    return None


def _link(path: Path) -> str:
    """Where a symbolic link points ("" when it is gone: an fd closed while it was listed)."""
    try:
        return os.readlink(path)
    except OSError:
        return ""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# --- locks and logs -----------------------------------------------------------------------------


@contextlib.contextmanager
def folder_lock(folder: Path, name: str = ".lock") -> Iterator[None]:
    """An exclusive lock on `folder/name` (the folder created 0700), held for the block.

    Two processes starting the same server take turns; the lock goes with the process that holds
    it, also when it dies.
    """
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def log_tail(path: Path, chars: int = 2000, since: int = 0) -> str:
    """The end of a log file, for an error message ("(no log)" when it cannot be read).

    Args:
        since: where this start's lines begin (the file's size before it): a log appended to by
            every start never shows an earlier start's lines as this one's.
    """
    try:
        with path.open("rb") as handle:
            handle.seek(since)
            return handle.read().decode(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


# --- start and stop -----------------------------------------------------------------------------


def start_detached(
    argv: Sequence[str],
    *,
    log: Path,
    ready: Callable[[subprocess.Popen[bytes]], bool],
    what: str,
    not_ready: str,
    error: Callable[[str], Exception],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
    poll_s: float = _POLL_S,
    tail_chars: int = 2000,
) -> subprocess.Popen[bytes]:
    """Start a server in a session and process group of its own, its output appended to `log`,
    and wait until `ready(process)` says it serves.

    Args:
        argv: the command.
        log: the file its stdout and stderr go to (appended).
        ready: asked every `poll_s` while it runs; True when it serves.
        what: how errors name it ("mariadbd", "the local cloud server").
        not_ready: what it failed to do in time ("did not accept connections").
        error: builds the exception to raise from a message.
        timeout_s: how long to wait for `ready`.
        env, cwd: its environment and working folder (default: ours).
        started: called once it runs, before the wait (to record its pid: a caller that dies
            while waiting leaves a server that the next one finds).

    Returns:
        The running process (its pid is also its process group's id).

    Raises:
        Exception: made by `error`, when it exits before it is ready or is not ready in time
            (then it is stopped); the message ends with the tail of what this start wrote to its
            log (never an earlier start's lines).
    """
    with log.open("ab") as out:
        since = out.seek(0, os.SEEK_END)  # this start's lines begin here
        process = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,  # outlives the caller; a terminal's Ctrl-C does not reach it
        )
    if started is not None:
        started(process)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise error(
                f"{what} exited at start (exit {process.returncode}); {log}:\n"
                f"{log_tail(log, tail_chars, since)}"
            )
        if ready(process):
            return process
        if time.monotonic() > deadline:
            stop(process.pid, group=True)
            raise error(
                f"{what} {not_ready} within {timeout_s:g}s; {log}:\n"
                f"{log_tail(log, tail_chars, since)}"
            )
        time.sleep(poll_s)


def send_signal(pid: int, signum: int, *, group: bool = False) -> bool:
    """Send `signum` to `pid` (or its whole process group); False when there is no such process."""
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for `pid` to exit; whether it did."""
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def stop(pid: int, *, group: bool = False, timeout_s: float = 30.0) -> bool:
    """Stop a process (or its process group): SIGTERM, then SIGKILL after `timeout_s`.

    Returns:
        True if it was running.
    """
    if not send_signal(pid, signal.SIGTERM, group=group):
        return False
    if not wait_gone(pid, timeout_s):
        send_signal(pid, signal.SIGKILL, group=group)  # a database recovers at its next start
        wait_gone(pid, 5.0)
    return True


# What a server or tool this project starts never inherits: stackflow's own settings (a state
# passphrase, a backend URL with its password) and the credentials of Prefect and Pulumi clients.
WITHHELD_PREFIXES = ("STACKFLOW_",)
WITHHELD_NAMES = frozenset(
    {
        "PREFECT_API_AUTH_STRING",
        "PREFECT_API_KEY",
        "PULUMI_CONFIG_PASSPHRASE",
        "PULUMI_CONFIG_PASSPHRASE_FILE",  # a rehearsed project's, never the engine's own
        "PULUMI_ACCESS_TOKEN",
    }
)


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without what a child must never see (see above), plus `extra`
    (what the child needs, given explicitly)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(WITHHELD_PREFIXES) and k not in WITHHELD_NAMES
    }
    env.update(extra or {})
    return env
