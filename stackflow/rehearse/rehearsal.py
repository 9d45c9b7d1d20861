"""Rehearse an existing Pulumi Python project: its program run inline by stackflow's engine, with
its own stack's config, on the local cloud (or AWS), in stackflow's backend and state folder.

One stack, straight through the engine (no Prefect flow: see the README). An up is a survey
preview first, which on the local cloud names every type and function it does not serve before
anything is created, then the update. A destroy takes the stack down and removes it from the
backend. Progress goes to this process's progress hub, log lines (redacted) to the listener.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from stackflow.engine.base import (
    ChangeCounts,
    Engine,
    Listener,
    Operation,
    OperationResult,
    OutputValue,
    ResourceEvent,
    StackSpec,
)
from stackflow.engine.hosted import HostedProgram
from stackflow.errors import (
    OperationCancelled,
    ProgramFailed,
    StackError,
    UnservedTypes,
    stopped_at,
)
from stackflow.outcome import Status, completed
from stackflow.progress import NodeChanged, NodeState, ResourceProgress, ResourcesDeclared, hub
from stackflow.rehearse.config import project_config
from stackflow.rehearse.dependencies import check_dependencies
from stackflow.rehearse.program import project_program
from stackflow.rehearse.project import ProjectError, PulumiProject, load_project
from stackflow.rehearse.secrets import passphrase_from
from stackflow.settings import Settings


class Action(StrEnum):
    """What a rehearsal does to the project's stack."""

    UP = "up"  # a survey preview, then the update
    PREVIEW = "preview"  # the survey preview alone: nothing changes
    DESTROY = "destroy"  # destroy, then remove the stack from stackflow's backend


@dataclass(frozen=True)
class Rehearsal:
    """A rehearsal ready to run: the project, its stack, and what the engine acts on."""

    project: PulumiProject
    stack: str
    action: Action
    spec: StackSpec
    program: HostedProgram
    cloud: str  # local or aws
    target: str  # where, in the words every report uses: "local cloud" or "AWS"
    secrets: tuple[str, ...] = field(default=(), repr=False)  # to mask, beyond the config's
    notices: tuple[str, ...] = ()  # pins that run at the installed version instead

    @property
    def name(self) -> str:
        """How reports name it: project/stack."""
        return self.spec.label


def prepare(
    path: Path, stack: str | None, action: Action, settings: Settings, environ: Mapping[str, str]
) -> Rehearsal:
    """Read the project at `path` and make its rehearsal ready; nothing runs, nothing changes.

    Args:
        stack: the stack to rehearse (None: the project's only stack file, else `dev`).
        environ: where the project's passphrase is read (PULUMI_CONFIG_PASSPHRASE or _FILE).

    Raises:
        ProjectError: not a Pulumi Python project, an unmet pin or import (not for a destroy,
            which does not run the program), config that cannot be read or decrypted here.
    """
    project = load_project(path)
    name = project.choose_stack(stack)
    if project.name.startswith(f"{settings.project}-"):
        raise ProjectError(
            f"{project.file}: name {project.name!r} is one of stackflow's own projects "
            f"({settings.project}-<stack>) in the same backend; rename the project to rehearse "
            "it. Nothing was changed."
        )
    local = settings.cloud == "local"
    notices = check_dependencies(project, local) if action is not Action.DESTROY else []
    from stackflow.dag import stack_config

    config = {**stack_config(settings), **project_config(project, name, environ)}
    if settings.cloud == "local":
        config.pop("aws:profile", None)  # never the user's AWS on the local cloud
    program = project_program(project, f"{project.name}/{name}")
    spec = StackSpec(
        settings.project, name, project.name, program, config, pulumi_name=project.name
    )
    passphrase = passphrase_from(environ) if any(c.secret for c in config.values()) else None
    secrets = (passphrase.value,) if passphrase is not None else ()
    return Rehearsal(
        project,
        name,
        action,
        spec,
        program,
        settings.cloud,
        settings.target_label,
        secrets,
        tuple(notices),
    )


@dataclass
class Outcome:
    """What a rehearsal did: each engine operation's result, and how it ended."""

    rehearsal: Rehearsal
    results: list[OperationResult] = field(default_factory=list)
    calls: list[Operation] = field(default_factory=list)  # engine operations asked for, in order
    status: Status | None = None  # None until an operation ends
    error: StackError | None = None
    duration_s: float = 0.0

    @property
    def outputs(self) -> dict[str, OutputValue]:
        return dict(self.results[-1].outputs) if self.results else {}

    @property
    def changes(self) -> ChangeCounts:
        """What the last operation changed (nothing known when it failed)."""
        finished = self.results and len(self.results) == len(self.calls)
        return self.results[-1].changes if finished else ChangeCounts()


def run(rehearsal: Rehearsal, engine: Engine, listener: Listener) -> Outcome:
    """Run the rehearsal through `engine`; progress goes to this process's hub.

    A failure is the outcome's `error` (its reason redacted and naming the stack), not raised;
    an UnservedTypes error names every unserved type, and nothing was created.
    """
    spec, node = rehearsal.spec, rehearsal.project.name
    target = rehearsal.target
    outcome = Outcome(rehearsal)
    listener.redactor.add(*rehearsal.secrets)
    progress = hub()
    started = time.monotonic()

    def publish(state: NodeState, detail: str = "", **kw: Any) -> None:
        progress.publish(NodeChanged(rehearsal.name, node, state, detail=detail, **kw))

    def step(operation: Operation, detail: str) -> OperationResult:
        publish(NodeState.RUNNING, detail)
        outcome.calls.append(operation)
        if operation is Operation.PREVIEW:
            result = _survey(engine, rehearsal, listener)
        else:
            result = engine.run(operation, spec, listener)
        outcome.results.append(result)
        return result

    with progress.cancellable(lambda interrupt: engine.cancel(spec, interrupt)):
        try:
            if rehearsal.action is not Action.PREVIEW:
                engine.recover(spec, listener)
            if rehearsal.action is Action.DESTROY:
                gone = step(Operation.DESTROY, "destroying")
                engine.remove(spec)
                outcome.status = completed(Operation.DESTROY, gone.changes)
            else:
                preview = step(Operation.PREVIEW, f"previewing on the {target}")
                outcome.status = completed(Operation.PREVIEW, preview.changes)
                if rehearsal.action is Action.UP:
                    what = "updating" if preview.changes.changed else "updating (no changes)"
                    up = step(Operation.UP, what)
                    outcome.status = completed(Operation.UP, up.changes)
        except StackError as exc:
            outcome.error = exc
            cancelled = isinstance(exc, OperationCancelled)
            outcome.status = Status.CANCELLED if cancelled else Status.FAILED
            if isinstance(exc, UnservedTypes):
                _forget_if_empty(engine, spec)
    outcome.duration_s = time.monotonic() - started
    if outcome.error is not None:
        final = NodeState.CANCELLED if outcome.status is Status.CANCELLED else NodeState.FAILED
        publish(final, outcome.error.reason, status=outcome.status)
    else:
        publish(NodeState.DONE, status=outcome.status, changes=outcome.changes)
    return outcome


def _survey(engine: Engine, rehearsal: Rehearsal, listener: Listener) -> OperationResult:
    """The survey preview, adding the types of packages the local cloud has no plugin for (the
    engine stops at the first such package; the program noted every type it declared)."""
    try:
        return engine.survey(rehearsal.spec, listener)
    except UnservedTypes as exc:
        others = unserved_types(rehearsal.program.declared)
        found = [*exc.resources, *others]
        raise UnservedTypes(rehearsal.name, found, exc.functions, exc.stopped) from None
    except StackError as exc:
        others = unserved_types(rehearsal.program.declared) if rehearsal.cloud == "local" else []
        if others:
            stopped = stopped_at(exc) if isinstance(exc, ProgramFailed) else None
            raise UnservedTypes(rehearsal.name, others, stopped=stopped) from None
        raise


def unserved_types(types: Iterable[str]) -> list[str]:
    """The resource types among `types` that the local cloud does not serve (a provider of a
    package it has no plugin for counts as one)."""
    from stackflow.localcloud.plugin.packages import PACKAGES
    from stackflow.localcloud.resources import registry

    served = {package: set(registry(package).resources) for package in PACKAGES}
    missing = []
    for token in types:
        parts = token.split(":")
        if token.startswith("pulumi:providers:"):
            if parts[2] not in served:
                missing.append(token)
        elif parts[0] != "pulumi" and token not in served.get(parts[0], ()):
            missing.append(token)
    return sorted(missing)


def _forget_if_empty(engine: Engine, spec: StackSpec) -> None:
    """A stack the refused rehearsal created empty leaves no trace in the backend."""
    try:
        state = engine.state(spec)
        if state is None or (state.resources == 0 and not state.pending):
            engine.remove(spec)
    except StackError:
        pass  # the refusal is what matters; an empty stack record is harmless


def listener_for(rehearsal: Rehearsal, on_output: Any) -> Listener:
    """A listener that sends log lines to `on_output` and resource progress to the hub."""
    node, progress = rehearsal.project.name, hub()

    def on_event(event: ResourceEvent) -> None:
        progress.publish(
            ResourceProgress(
                rehearsal.name, node, event.urn, event.type, event.name, event.change, event.status
            )
        )

    def on_declared(count: int) -> None:
        progress.publish(ResourcesDeclared(rehearsal.name, node, count))

    return Listener(on_output=on_output, on_event=on_event, on_declared=on_declared)
