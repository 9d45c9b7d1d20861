"""A stack of the Automation API that starts no `pulumi` process for what stackflow already knows.

The SDK's `Stack` starts one for everything: `stack select` to open a stack, and after an update,
refresh or destroy `stack output --json` twice (masked, then with secrets) and `stack history` for
the summary. stackflow knows these already:

- whether the stack exists: its checkpoint in the backend says, read with no process
  (`Workspaces.stack` opens a stack so, or creates it with `stack init` alone);
- its outputs: the checkpoint holds them, the secret ones in the seal of stackflow's stamp
  (`stackflow.engine.sealed`);
- an operation's change counts: the engine's event stream ends with a summary event.

`KnownStack` answers `outputs()` and `info()` from those, which `Stack.up`, `refresh` and `destroy`
call after their command, and falls back to the SDK's own methods (the CLI) whenever it does not
know: on Pulumi Cloud, without the passphrase that opens the seal, or with no summary event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pulumi.automation as auto
from pulumi.automation._stack import StackInitMode
from pulumi.automation.events import EngineEvent

from stackflow.engine.base import Operation

OutputsReader = Callable[[], auto.OutputMap | None]
# What Pulumi's update history calls each operation (its summary event's kind).
_KIND = {Operation.UP: "update", Operation.REFRESH: "refresh", Operation.DESTROY: "destroy"}


class KnownStack(auto.Stack):
    """An existing stack, opened without `pulumi stack select` (or one the SDK opened, adopted).

    Args:
        name: the stack's name, as the SDK takes it.
        workspace: its LocalWorkspace.
        read_outputs: the outputs as the backend holds them, or None when they cannot be read
            without the CLI.
    """

    def __init__(
        self, name: str, workspace: auto.Workspace, read_outputs: OutputsReader | None = None
    ) -> None:
        # The SDK's constructor would run `pulumi stack select`; the caller knows the stack exists.
        self.name = name
        self.workspace = workspace
        self._mode = StackInitMode.SELECT
        self.read_outputs = read_outputs
        self._summary: auto.UpdateSummary | None = None
        self.client: str | None = None  # where a program of its own serves (see `served_at`)

    @contextlib.contextmanager
    def served_at(self, address: str | None) -> Iterator[None]:
        """Inside, the stack's operations run the program served at `address` (a language
        server in a process of its own, `host.ProgramHost`) instead of an inline program in this
        process: the CLI is told `--client=<address>`, as the SDK tells it its own server's."""
        if address is None:
            yield
            return
        program, self.workspace.program = self.workspace.program, None
        self.client = address
        try:
            yield
        finally:
            self.client = None
            self.workspace.program = program

    def _run_pulumi_cmd_sync(
        self,
        args: list[str],
        on_output: auto.OnOutput | None = None,
        on_error: auto.OnOutput | None = None,
    ) -> auto.CommandResult:
        """The SDK's command runner, pointing the CLI at the served program when there is one:
        with no inline program the SDK asks for a local one (`--exec-kind auto.local`)."""
        if self.client is not None and "--exec-kind" in args:
            at = args.index("--exec-kind") + 1
            args[at] = "auto.inline"  # no program folder of the CLI's own to read plugins from
            args.insert(at + 1, f"--client={self.client}")
        return super()._run_pulumi_cmd_sync(args, on_output, on_error)

    def expect(self) -> None:
        """Before an operation: forget the last one's summary."""
        self._summary = None

    def observe(self, event: EngineEvent, operation: Operation) -> None:
        """Keep the change counts of the operation's summary event."""
        found = event.summary_event
        if found is not None:
            now = datetime.now(UTC)
            self._summary = auto.UpdateSummary(
                kind=_KIND.get(operation, operation.value),
                start_time=now,
                message="",
                environment={},
                config={},
                result="succeeded",  # asked for only once the command has succeeded
                end_time=now,
                resource_changes=dict(found.resource_changes or {}),
            )

    def info(self, show_secrets: bool = True) -> auto.UpdateSummary | None:
        """The last operation's summary from its events; `stack history` only without one."""
        summary, self._summary = self._summary, None
        return summary if summary is not None else super().info(show_secrets)

    def outputs(self) -> auto.OutputMap:
        """The outputs as the backend holds them; `stack output` only when they cannot be read."""
        found = self.read_outputs() if self.read_outputs is not None else None
        return found if found is not None else super().outputs()
