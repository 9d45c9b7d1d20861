"""The Pulumi CLI the engine runs: found by path at exactly the pinned version, started in a
process group of its own with an environment that holds only what Pulumi needs.

A process group of its own: a terminal's Ctrl-C reaches stackflow alone, which cancels each
running `pulumi` once, gracefully (SIGINT: Pulumi finishes the resource operations in flight and
releases its lock); a second interrupt stops it at once. Without it the terminal's SIGINT reached
`pulumi` before stackflow could acknowledge it, and a second one from stackflow made it stop hard.

An environment of its own: this process's STACKFLOW_* variables (a passphrase, a backend URL with
a password) never reach `pulumi` or its provider plugins; Pulumi gets its secrets from the
engine's own variables (PULUMI_CONFIG_PASSPHRASE, PULUMI_ACCESS_TOKEN) only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import pulumi.automation as auto
from pulumi.automation.errors import create_command_error
from semver import VersionInfo

from stackflow.errors import EngineUnavailable
from stackflow.processes import clean_environment


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without stackflow's settings or other clients' credentials,
    plus `extra` (the engine's own PULUMI_* variables)."""
    return clean_environment(extra)


# The commands that take a stack's lock: their pids are what a lock in the backend names.
LOCKING = frozenset({"up", "preview", "refresh", "destroy", "import"})


class RunningCommands:
    """The `pulumi` processes this engine runs, by stack: so a cancel reaches exactly ours.

    `on_locking(work_dir, pid)` is told when a command that takes the stack's lock starts (the
    holder record keeps its pid, see `stackflow.holders`).

    Bounds: a command that prints nothing for `stall_timeout_s` (a provider call that never
    answers) gets Pulumi's graceful cancel, and the reason is kept for its workspace
    (`take_stalled`); after any cancel, a command still running `cancel_grace_s` later is stopped
    with its whole process group (its plugins): what it left pending the next run heals.
    """

    def __init__(self, stall_timeout_s: float = 2700.0, cancel_grace_s: float = 60.0) -> None:
        self._lock = threading.Lock()
        self._by_stack: dict[str, set[subprocess.Popen[str]]] = {}
        self._stalled: dict[str, str] = {}
        self.on_locking: Callable[[str, int], None] | None = None
        self.stall_timeout_s = stall_timeout_s
        self.cancel_grace_s = cancel_grace_s

    @contextlib.contextmanager
    def running(self, stack: str, process: subprocess.Popen[str]) -> Iterator[None]:
        with self._lock:
            self._by_stack.setdefault(stack, set()).add(process)
        try:
            yield
        finally:
            with self._lock:
                self._by_stack.get(stack, set()).discard(process)

    def interrupt(self, stack: str) -> int:
        """Send SIGINT to every running `pulumi` of `stack` (Pulumi's graceful cancel); how many.
        One still running `cancel_grace_s` later is stopped (see the class)."""
        with self._lock:
            processes = list(self._by_stack.get(stack, ()))
        sent = 0
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGINT)
                    sent += 1
                self._stop_later(process)
        return sent

    def _stop_later(self, process: subprocess.Popen[str]) -> None:
        timer = threading.Timer(self.cancel_grace_s, _stop_group, args=(process,))
        timer.daemon = True
        timer.start()

    def wait(self, process: subprocess.Popen[str], work_dir: str, last_output: list[float]) -> int:
        """Wait for `process` to end, cancelling it when it prints nothing for
        `stall_timeout_s`; its exit code."""
        while True:
            quiet = time.monotonic() - last_output[0]
            try:
                return process.wait(timeout=max(0.1, self.stall_timeout_s - quiet))
            except subprocess.TimeoutExpired:
                if time.monotonic() - last_output[0] < self.stall_timeout_s:
                    continue  # it spoke meanwhile
            with self._lock:
                self._stalled[work_dir] = (
                    f"stopped: the engine showed no progress for {self.stall_timeout_s:g}s "
                    "(stall_timeout_s), a provider call that never answered"
                )
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)
            self._stop_later(process)
            return process.wait()

    def take_stalled(self, work_dir: str) -> str | None:
        """Why the last command in `work_dir` was cancelled for a stall (None: it was not);
        forgotten once read."""
        with self._lock:
            return self._stalled.pop(work_dir, None)


class LockWatchers:
    """Who wants to know the pid of each `pulumi` that takes a stack's lock, by workspace folder
    (a `RunningCommands.on_locking`: the holder records keep those pids)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_folder: dict[str, Callable[[int], None]] = {}

    def watch(self, work_dir: str, on_pid: Callable[[int], None] | None) -> None:
        """Tell `on_pid` of each locking command run in `work_dir` (None: stop telling)."""
        with self._lock:
            if on_pid is None:
                self._by_folder.pop(work_dir, None)
            else:
                self._by_folder[work_dir] = on_pid

    def __call__(self, work_dir: str, pid: int) -> None:
        with self._lock:
            told = self._by_folder.get(work_dir)
        if told is not None:
            told(pid)


def _stop_group(process: subprocess.Popen[str]) -> None:
    """Stop `process` and its process group (its provider plugins) when it still runs."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _stack_of(args: list[str]) -> str | None:
    for flag, value in pairwise(args):
        if flag == "--stack":
            return value
    return None


class PulumiCLI(auto.PulumiCommand):
    """The CLI at `path`, whose exact version `stackflow.pulumi_cli` has already checked (the
    SDK's constructor would run `pulumi version` again, and that writes a log into ~/.pulumi)."""

    def __init__(self, path: Path, version: VersionInfo, commands: RunningCommands) -> None:
        self.command = str(path)
        self.version = version
        self.commands = commands

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: Callable[[str], Any] | None = None,
        on_error: Callable[[str], Any] | None = None,
    ) -> auto.CommandResult:
        """Run one `pulumi` command as the SDK does (non-interactive, output streamed line by
        line), in a process group of its own and with the withheld environment.

        Raises:
            CommandError: the command failed (the SDK's own error types, for the classifier).
        """
        return self.run_with_input(args, cwd, additional_env, None, on_output, on_error)

    def run_with_input(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        text: str | None,
        on_output: Callable[[str], Any] | None = None,
        on_error: Callable[[str], Any] | None = None,
    ) -> auto.CommandResult:
        """`run`, with `text` on the command's standard input (None: nothing, as the SDK does).
        The one way a secret the CLI reads only from stdin (a new passphrase) reaches it: never
        through its arguments or environment.

        Raises:
            CommandError: the command failed.
        """
        cut = args.index("--") if "--" in args else len(args)
        if "--non-interactive" not in args[:cut]:
            args.insert(0, "--non-interactive")
        env = child_environment({**additional_env, "PULUMI_AUTOMATION_API": "true"})
        env["PATH"] = os.pathsep.join([os.path.dirname(self.command), env.get("PATH", "")])
        out: list[str] = []
        err: list[str] = []
        last_output = [time.monotonic()]  # when it last printed: what a stall is measured from

        def consume(stream: Any, callback: Callable[[str], Any] | None, chunks: list[str]) -> None:
            for line in iter(stream.readline, ""):
                last_output[0] = time.monotonic()
                stripped = line.rstrip()
                if callback:
                    callback(stripped)
                chunks.append(stripped)
            stream.close()

        with subprocess.Popen(
            [self.command, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL if text is None else subprocess.PIPE,
            cwd=cwd,
            env=env,
            encoding="utf-8",
            start_new_session=True,  # the terminal's Ctrl-C is ours to handle, once
            umask=0o077,  # what the CLI writes (stack files, a file backend's state) stays private
        ) as process:
            readers = [
                threading.Thread(target=consume, args=(process.stdout, on_output, out)),
                threading.Thread(target=consume, args=(process.stderr, on_error, err)),
            ]
            stack = _stack_of(args) or ""
            subcommand = next((a for a in args if not a.startswith("-")), "")
            if subcommand in LOCKING and self.commands.on_locking is not None:
                with contextlib.suppress(Exception):  # bookkeeping never stops an operation
                    self.commands.on_locking(cwd, process.pid)
            with self.commands.running(stack, process):
                for reader in readers:
                    reader.start()
                if text is not None and process.stdin is not None:
                    with contextlib.suppress(BrokenPipeError):  # it ended first: its error says why
                        process.stdin.write(text)
                    with contextlib.suppress(BrokenPipeError):
                        process.stdin.close()
                code = self.commands.wait(process, cwd, last_output)
                for reader in readers:
                    reader.join()
        result = auto.CommandResult(stdout="\n".join(out), stderr="\n".join(err), code=code)
        if code != 0:
            raise create_command_error(result)
        return result


def find_pulumi_cli(commands: RunningCommands | None = None) -> PulumiCLI:
    """The Pulumi CLI at exactly the pinned SDK's version, by its path (never any `pulumi` on PATH
    that happens to be there): the one `scripts/setup.sh` built or reused into the cache.

    Raises:
        EngineUnavailable: no such CLI; says how to get one.
    """
    from stackflow.pulumi_cli import CLI_VERSION, find_cli

    path = find_cli()
    if path is None:
        raise EngineUnavailable(
            f"the Pulumi CLI v{CLI_VERSION} (the pinned SDK's version) is not installed: run "
            "`bash scripts/setup.sh`, which builds it from Go modules once (4-7 minutes on 2 "
            f"cores) and reuses it after, or put a pulumi v{CLI_VERSION} on PATH and run it again"
        )
    return PulumiCLI(path, VersionInfo.parse(CLI_VERSION), commands or RunningCommands())


def run_stack_command(
    stack: auto.Stack, args: list[str], on_output: Callable[[str], Any] | None = None
) -> auto.CommandResult:
    """Run `pulumi <args>` on `stack` as the SDK runs its own commands (`Stack.refresh` and the
    rest): through the workspace's command runner, in its folder, with its environment and its
    `--stack` arguments. For what the SDK's methods do not expose.

    Raises:
        CommandError: the command failed (the SDK's error types, for the classifier).
    """
    workspace = stack.workspace
    env = {"PULUMI_DEBUG_COMMANDS": "true"}
    if workspace.pulumi_home is not None:
        env["PULUMI_HOME"] = workspace.pulumi_home
    env.update(workspace.env_vars)
    full = [*args, *workspace.serialize_args_for_op(stack.name), "--stack", stack.name]
    result = workspace.pulumi_command.run(full, workspace.work_dir, env, on_output, None)
    workspace.post_command_callback(stack.name)
    return result
