"""One root exception and small subclasses; each message names the setting, stack or file at fault."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

ECHO_MAX = 60  # the longest piece of a user's input an error message repeats


def echo(value: str, limit: int = ECHO_MAX) -> str:
    """A user's value as an error may repeat it: quoted, on one line, at most `limit` characters
    (a pasted file or a 10 kB argument must not bury the message)."""
    flat = " ".join(value.split()) if value.strip() else value
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


class StackflowError(Exception):
    """Root of every error stackflow raises on purpose.

    Attributes:
        what_to_do: the next step, when the message does not say it (the command line prints it
            on a `what to do:` line); "" when there is none.
        log_file: the log that holds all of it (a server's own log), when there is one.
    """

    what_to_do: str = ""
    log_file: Path | None = None

    def __init__(self, *args: object, what_to_do: str = "", log_file: Path | None = None) -> None:
        super().__init__(*args)
        if what_to_do:
            self.what_to_do = what_to_do
        if log_file is not None:
            self.log_file = log_file


class SettingsError(StackflowError, ValueError):
    """A setting has a value that is not accepted; raised before anything runs."""


class ConfirmationRequired(StackflowError):
    """A destructive operation on a protected environment was not confirmed."""


class DeletionProtected(StackflowError, ValueError):
    """Destroying a database whose deletion protection is on."""


class EngineUnavailable(StackflowError):
    """The chosen engine cannot run here (for example, the Pulumi CLI is missing)."""


class StepRefused(StackflowError):
    """A step's check refused its own input (a migration file) before the run changed anything."""


class StackError(StackflowError):
    """An operation on one stack failed."""

    def __init__(self, stack: str, message: str) -> None:
        super().__init__(f"stack '{stack}': {message}")
        self.stack = stack
        self.reason = message


class TransientStackError(StackError):
    """A stack operation failed for a reason that may pass (lock held, throttling, network)."""


class PermanentStackError(StackError):
    """A stack operation failed for a reason a retry will not fix (program error, bad config)."""


class OperationCancelled(StackError):
    """A stack operation was cancelled before it finished."""


class PlanChanged(PermanentStackError):
    """What an approval covered no longer matches what the stack would do: it changed meanwhile."""


class ProgramFailed(PermanentStackError):
    """The Pulumi program itself raised (its own error, not the cloud's or the engine's).

    Attributes:
        raised: the program's own error as Python printed it (`KeyError: 'vpc'`), when the
            engine's text tells it.
    """

    def __init__(self, stack: str, message: str, raised: str | None = None) -> None:
        super().__init__(stack, message)
        self.raised = raised


class UnservedTypes(PermanentStackError):
    """A program uses resource types or functions the local cloud does not serve; a survey
    preview names every one of them before anything is created, or, when the preview stopped
    early (`stopped`: where, e.g. "the program raised KeyError: 'vpc'"), every one up to there."""

    def __init__(
        self,
        stack: str,
        resources: Iterable[str],
        functions: Iterable[str] = (),
        stopped: str | None = None,
    ) -> None:
        self.resources = tuple(sorted(set(resources)))
        self.functions = tuple(sorted(set(functions)))
        self.stopped = stopped
        parts = [
            f"{_counted(len(names), noun)} {', '.join(names)}"
            for names, noun in ((self.resources, "resource type"), (self.functions, "function"))
            if names
        ]
        unserved = f"the local cloud does not serve the {' and the '.join(parts)}"
        if stopped is None:
            message = (
                f"{unserved} that the program uses; a preview found every one of them before "
                "anything was created"
            )
        else:
            answered = (
                " (a survey answers an unserved function with nothing, which may be what the "
                "program tripped on)"
                if self.functions
                else ""
            )
            message = (
                f"the survey preview stopped where {stopped}; up to there it "
                f"found that {unserved}{answered}. What the program declares after that point "
                "was not surveyed; nothing was created"
            )
        super().__init__(stack, message)


def stopped_at(failure: StackError) -> str:
    """Where a survey preview stopped, in a clause: "the program raised KeyError: 'vpc'", or the
    first line of the engine's reason when the program did not raise."""
    if isinstance(failure, ProgramFailed) and failure.raised:
        return f"the program raised {failure.raised}"
    first = failure.reason.strip().splitlines()[0] if failure.reason.strip() else "it failed"
    return f"the preview failed ({first})"


def _counted(count: int, noun: str) -> str:
    return noun if count == 1 else f"{count} {noun}s"


class MissingOutputError(StackError, KeyError):
    """A stack's outputs lack a key that a downstream stack or step needs."""

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownStackError(StackflowError, ValueError):
    """A stack name that the graph does not declare."""


class LocalDatabaseError(StackflowError):
    """The local MariaDB could not be installed, started or set up."""


class TransientDatabaseError(StackflowError):
    """The database is not reachable yet or dropped the connection; worth retrying (the migration
    runner raises it; the engine's retry predicate names it too)."""


class PolicyViolated(PermanentStackError):
    """A mandatory policy's violation stopped a stack's preview or update: a preview changes
    nothing, and every `up` of an environment with policies is previewed first."""

    def __init__(self, stack: str, message: str, violations: Iterable[Any] = ()) -> None:
        super().__init__(stack, message)
        self.violations = tuple(violations)  # stackflow.policy.violation.Violation

    def __reduce__(self) -> tuple[Any, ...]:  # Prefect may pickle it with the task's state
        return (type(self), (self.stack, self.reason, self.violations))
