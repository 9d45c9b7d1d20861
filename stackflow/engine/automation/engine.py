"""The automation engine: real stacks through the Pulumi Automation API and the Pulumi CLI.

With its package (workspaces, programs, the CLI's processes, change reports, recovery) and the
classifier `stackflow.engine.classify`, the only code that imports `pulumi.automation`. Raw CLI
text becomes typed, redacted errors in one place (`classify`); log lines and engine events reach
the caller through the listener, never through prints.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pulumi.automation as auto
from pulumi.automation.events import EngineEvent

from stackflow.engine.automation.adoption import CreateWatch, adopting
from stackflow.engine.automation.command import LockWatchers, RunningCommands
from stackflow.engine.automation.commands import run_command
from stackflow.engine.automation.failures import explain
from stackflow.engine.automation.host import Hosts, stamp_job
from stackflow.engine.automation.known import KnownStack
from stackflow.engine.automation.observer import StepObserver
from stackflow.engine.automation.policies import PolicyRuns
from stackflow.engine.automation.program import operation_program
from stackflow.engine.automation.recovery import recover
from stackflow.engine.automation.stackstate import exported_state, read_state
from stackflow.engine.automation.survey import survey_preview
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import (
    Fence,
    Listener,
    Operation,
    OperationResult,
    OutputValue,
    StackSpec,
    StackState,
    Stopwatch,
)
from stackflow.engine.classify import (
    classify,
    error_detail,
    is_lock_conflict,
    scrub_plan_violation,
)
from stackflow.engine.classify import is_transient_error as is_transient_error
from stackflow.engine.pending import Recovery
from stackflow.engine.versions import engine_versions
from stackflow.errors import OperationCancelled, StackError, StackflowError
from stackflow.redact import Redactor
from stackflow.settings import Settings

T = TypeVar("T")

# Cloud and self-managed backends answer `pulumi cancel` with nothing running in these words.
_NOTHING_TO_CANCEL = ("no update in progress", "has never been updated", "already completed")


class AutomationEngine:
    """Engine on the Pulumi Automation API. Safe for concurrent operations on different stacks."""

    name = "automation"

    def __init__(self, settings: Settings, adopts: bool = True) -> None:
        self.settings = settings
        self.adopts = adopts  # off: `up --recreate` (see `adoption`)
        self.cloud = settings.cloud
        self.commands = RunningCommands(settings.stall_timeout_s, settings.cancel_grace_s)
        self.ws = Workspaces(settings, self.commands)
        self.policies = PolicyRuns(self.ws)
        self._guard = threading.Lock()
        self._running: dict[str, auto.Stack] = {}
        self._cancelled: set[str] = set()
        self._lock_conflicts: dict[str, int] = {}
        self._opening: dict[str, threading.Lock] = {}
        self.hosts = Hosts()  # the programs running in a process of their own
        self.lockers = LockWatchers()
        self.commands.on_locking = self.lockers

    def watch_locks(self, spec: StackSpec, on_pid: Callable[[int], None] | None) -> None:
        """Tell `on_pid` the pid of each `pulumi` of ours that takes `spec`'s lock (None: stop)."""
        self.lockers.watch(str(self.ws.work_dir(spec)), on_pid)

    # -- errors --

    def _call(
        self, spec: StackSpec, redactor: Redactor, action: Callable[[], T], *, run: bool = False
    ) -> T:
        """Run `action`; any Automation API error leaves as a classified, redacted StackError.

        Args:
            run: `action` is a stack operation, whose lock conflicts count towards "stale lock".
        """
        try:
            return action()
        except StackflowError:
            raise
        except Exception as exc:
            failure = self._failure(exc, spec, redactor, run)
        # Raised outside the handler: the raw CLI text is neither its cause nor its context.
        raise failure

    def _failure(
        self, exc: BaseException, spec: StackSpec, redactor: Redactor, run: bool
    ) -> StackError:
        locked = is_lock_conflict(exc)
        stalled = self.commands.take_stalled(str(self.ws.work_dir(spec)))
        if stalled is not None:
            return OperationCancelled(spec.label, redactor(f"{stalled}; {error_detail(exc)}"))
        with self._guard:
            cancelled = spec.label in self._cancelled
            self._cancelled.discard(spec.label)
            conflicts = 0
            if run:  # consecutive lock conflicts of operations; anything else starts again
                conflicts = self._lock_conflicts.pop(spec.label, 0) + 1
                if locked:
                    self._lock_conflicts[spec.label] = conflicts
        stale = conflicts if locked and run and conflicts > self.settings.stack_retries else 0
        return explain(exc, spec, redactor, self.ws, cancelled=cancelled, stale_after=stale)

    # -- operations --

    @contextlib.contextmanager
    def _running_on(self, spec: StackSpec, stack: auto.Stack) -> Iterator[None]:
        with self._guard:
            self._running[spec.label] = stack
            self._cancelled.discard(spec.label)
        try:
            yield
        finally:
            with self._guard:
                self._running.pop(spec.label, None)

    def run(
        self,
        operation: Operation,
        spec: StackSpec,
        listener: Listener,
        plan: Path | None = None,
        refresh: bool = False,
        stamp: Mapping[str, Any] | None = None,
    ) -> OperationResult:
        """Preview, update, refresh, check drift of, or destroy one stack through the Pulumi CLI.

        `plan`: a preview saves Pulumi's update plan to this file; an up applies under it, and
        Pulumi stops the update if the stack would do anything the plan does not allow
        (PlanChanged). `refresh`: a preview reads the cloud first, as the up of a drifted stack
        will.

        Raises:
            EngineUnavailable: the Pulumi CLI is missing or too old.
            TransientStackError: worth retrying (lock held, throttled, network).
            PermanentStackError: a retry will not help; the message names the stack.
            OperationCancelled: `cancel` was called while it ran.
        """
        self.ws.teach(spec, listener)

        def attempt(creates: CreateWatch | None) -> OperationResult:
            def go() -> OperationResult:
                return self._run(operation, spec, listener, plan, refresh, stamp, creates)

            return self._call(spec, listener.redactor, go, run=True)

        if operation is not Operation.UP or not self.adopts:
            return attempt(None)
        # a create AWS refused because its answer was lost earlier: adopted, then run again (the
        # adoption's own CLI calls leave as classified, redacted errors too)
        return self._call(
            spec,
            listener.redactor,
            lambda: adopting(self.ws, spec, listener, attempt, self._running_on, plan is not None),
        )

    def _run(
        self,
        operation: Operation,
        spec: StackSpec,
        listener: Listener,
        plan: Path | None,
        refresh: bool,
        stamp: Mapping[str, Any] | None,
        creates: CreateWatch | None = None,
    ) -> OperationResult:
        watch = Stopwatch()
        stack = self._open(spec)
        self.ws.ensure_plugins(stack.workspace, listener)
        listener.line(
            f"{operation.value} {spec.pulumi_project}/{stack.name} on the {self.settings.target_label} "
            f"(backend {self.ws.backend_url})"
        )
        runs = operation in (Operation.UP, Operation.PREVIEW)
        program, hosted = operation_program(
            spec.program, runs, listener.declared, stamp if runs else None, self.ws.passphrase
        )

        observer = StepObserver(spec, operation, listener)
        stack.expect()

        def on_event(event: EngineEvent) -> None:
            stack.observe(event, operation)  # its summary answers the SDK's `info()`: no process
            observer(event)
            if creates is not None:
                creates(event)

        def on_output(line: str) -> None:
            listener.line(scrub_plan_violation(line))  # a plan violation prints secret values

        common: dict[str, Any] = {"on_output": on_output, "on_event": on_event, "program": program}
        common.update(self.policies.options(spec, operation, listener))  # {}: none run
        outputs: dict[str, OutputValue] = {}
        job = stamp_job(spec, stamp, self.ws.passphrase, self.ws.learn) if hosted else {}
        refused = None
        with (
            self._running_on(spec, stack),
            self.hosts.serving(spec, hosted, job, listener) as address,
            stack.served_at(address),
        ):
            try:
                changes, raw = run_command(stack, operation, common, plan, refresh)
            except auto.CommandError:
                refused = self.policies.refused(spec, observer.violations)
                if refused is None:
                    raise
        if refused is not None:  # raised outside the handler: no raw CLI text rides along
            raise refused
        if raw is not None:
            outputs = self.ws.outputs(raw, listener)
        if operation in (Operation.REFRESH, Operation.DRIFT):
            outputs = self.ws.outputs(stack.outputs(), listener)  # the redactor learns secrets
        with self._guard:
            self._lock_conflicts.pop(spec.label, None)
            self._cancelled.discard(spec.label)
        listener.line(
            f"{operation.value} {spec.label}: {changes.create} to create, {changes.update} to "
            f"update, {changes.replace} to replace, {changes.delete} to delete, {changes.same} "
            f"unchanged ({watch.elapsed:.2f}s)"
        )
        return OperationResult(
            stack=spec.node,
            operation=operation,
            changes=changes,
            outputs=outputs,
            duration_s=watch.elapsed,
            engine=self.name,
            resource_changes=(
                observer.drift()
                if operation is Operation.DRIFT
                else tuple(observer.planned.values())
            ),
            projected=observer.projected,
            violations=tuple(observer.violations),
        )

    def survey(self, spec: StackSpec, listener: Listener) -> OperationResult:
        """A preview naming every type the local cloud does not serve (`survey.survey_preview`).

        Raises:
            UnservedTypes: naming each of them; nothing was created. Otherwise as `run`."""
        return survey_preview(
            self.ws, spec, listener, lambda: self.run(Operation.PREVIEW, spec, listener)
        )

    def prepare(self, spec: StackSpec) -> None:
        """Create the stack if missing and set its config, before its first operation: a stack
        whose upstream is still deploying is ready when its turn comes (`stack init` and
        `config set-all` off the critical path)."""
        self._call(spec, self.ws.redactor, lambda: self._open(spec))

    def _open(self, spec: StackSpec) -> KnownStack:
        """The stack, created if missing, with its config set (one caller at a time per stack)."""
        with self._guard:
            opening = self._opening.setdefault(spec.label, threading.Lock())
        with opening:
            stack = self.ws.stack(spec, create=True)
            assert stack is not None  # created, or the CLI raised
            self.ws.set_config(stack, spec)
            return stack

    def outputs(self, spec: StackSpec) -> dict[str, OutputValue]:
        """The stack's outputs from its last update ({} if the stack does not exist).

        Raises:
            EngineUnavailable, TransientStackError, PermanentStackError: as `run`.
        """

        def read() -> dict[str, OutputValue]:
            stack = self.ws.stack(spec, create=False)
            return {} if stack is None else self.ws.outputs(stack.outputs())

        return self._call(spec, self.ws.redactor, read)

    def state(self, spec: StackSpec) -> StackState | None:
        """The stack's latest checkpoint, read straight from the backend: one read of its
        checkpoint and one listing of its locks, no `pulumi` process (see `stackstate`).

        Raises:
            PermanentStackError: the checkpoint is damaged (names the stack and where).
            TransientStackError: the backend did not answer.
        """
        if self.ws.pulumi_cloud:  # Pulumi Cloud keeps state behind its API: the CLI reads it
            return self._call(spec, self.ws.redactor, lambda: exported_state(self.ws, spec))
        return read_state(self.ws, spec)

    def exists(self, spec: StackSpec) -> bool:
        """Whether the stack exists in the backend and holds resources.

        Raises:
            EngineUnavailable, TransientStackError, PermanentStackError: as `run`.
        """

        def check() -> bool:
            stack = self.ws.stack(spec, create=False)
            if stack is None:
                return False
            for summary in stack.workspace.list_stacks():
                # Backends list a project's stacks by short or by fully qualified name.
                if summary.name.rsplit("/", 1)[-1] == spec.environment:
                    return bool(summary.resource_count)
            return False

        return self._call(spec, self.ws.redactor, check)

    def cancel(self, spec: StackSpec, interrupt: bool = True) -> None:
        """Stop the operation running on this stack, if any; `run` then raises OperationCancelled.

        Pulumi Cloud: `pulumi cancel`. Self-managed backends (where `pulumi cancel` would only
        delete our live update's lock): our `pulumi` child gets SIGINT, the CLI's graceful cancel.
        `interrupt=False`: a Ctrl-C reached our children already (a second SIGINT would stop Pulumi
        at once): only recorded.

        Raises:
            TransientStackError, PermanentStackError: the cancel itself failed.
        """
        with self._guard:
            stack = self._running.get(spec.label)
            if stack is None:
                return
            self._cancelled.add(spec.label)
        self.hosts.kill(spec.label)  # its own session: no Ctrl-C reached it; a loop ends too
        if not interrupt:
            return
        if not self.ws.pulumi_cloud:
            self.commands.interrupt(stack.name)
            return
        try:
            stack.cancel()
            return
        except auto.CommandError as exc:
            with self._guard:
                finished = spec.label not in self._running
            if finished or any(t in str(exc).lower() for t in _NOTHING_TO_CANCEL):
                return  # it ended on its own meanwhile
            failure = classify(exc, spec.label, self.ws.redactor)
        raise failure

    def recover(self, spec: StackSpec, listener: Listener, fence: Fence | None = None) -> Recovery:
        """Clear what an interrupted update left behind, importing the pending creates the cloud
        made (see `recovery.recover`); `fence` says whether a lock another host's process holds
        may be broken. What it did is said through the listener, and in the Recovery.

        Raises:
            EngineUnavailable, TransientStackError, PermanentStackError: as `run`.
        """
        self.ws.teach(spec, listener)

        def clear() -> Recovery:
            return recover(self.ws, spec, listener, self._running_on, fence)

        return self._call(spec, listener.redactor, clear)

    def remove(self, spec: StackSpec) -> None:
        """Remove the stack (empty, after destroy) and its config from the backend.

        Raises:
            PermanentStackError: the stack still has resources (Pulumi refuses), or another error.
        """

        def drop() -> None:
            stack = self.ws.stack(spec, create=False)
            if stack is None:
                return
            stack.workspace.remove_stack(stack.name)
            self.ws.forget(spec)

        self._call(spec, self.ws.redactor, drop)

    def versions(self) -> dict[str, str]:
        """SDK, plugin and (when the CLI is found) CLI versions; part of every fingerprint."""
        return engine_versions(self.cloud)
