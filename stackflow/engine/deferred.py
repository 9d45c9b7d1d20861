"""The engine as a run first meets it: it answers what the skip path asks (the tool versions a
fingerprint covers, a stack's state from its checkpoint) without the Automation API, and builds
the automation engine (`pulumi.automation`, the CLI, the local cloud server) only when a stack
operation, an output read or anything else needs it. A no-op `up`, every stack skipped, so never
imports Pulumi's SDK."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackflow.engine.base import (
    Engine,
    Fence,
    Listener,
    Operation,
    OperationResult,
    OutputValue,
    StackSpec,
    StackState,
)
from stackflow.engine.checkpoints import CheckpointReader, stack_state
from stackflow.engine.versions import NAME, engine_versions
from stackflow.redact import Redactor

if TYPE_CHECKING:
    from stackflow.engine.pending import Recovery
    from stackflow.settings import Settings


class DeferredEngine:
    """An `Engine` that builds the automation engine on first need (see the module's docstring).
    Safe for concurrent use, like the engine it stands for."""

    name = NAME

    def __init__(self, settings: Settings, adopts: bool = True) -> None:
        self.settings = settings
        self.adopts = adopts
        self._guard = threading.Lock()
        self._engine: Engine | None = None
        self._versions: dict[str, str] | None = None
        self._reader: CheckpointReader | None = None

    def engine(self) -> Engine:
        """The automation engine, built once."""
        with self._guard:
            if self._engine is None:
                from stackflow.engine.automation import AutomationEngine

                self._engine = AutomationEngine(self.settings, adopts=self.adopts)
            return self._engine

    @property
    def built(self) -> Engine | None:
        with self._guard:
            return self._engine

    def versions(self) -> dict[str, str]:
        with self._guard:
            if self._versions is None:
                self._versions = engine_versions(self.settings.cloud)
            return dict(self._versions)

    def state(self, spec: StackSpec) -> StackState | None:
        built = self.built
        if built is not None or self.settings.pulumi_org or _pulumi_cloud(self.settings):
            return self.engine().state(spec)  # Pulumi Cloud: the CLI reads it
        redactor = Redactor(self.settings.secret_values())
        return stack_state(
            self._checkpoints, spec.pulumi_project, spec.environment, spec.label, redactor
        )

    def _checkpoints(self) -> CheckpointReader:
        with self._guard:
            if self._reader is None:
                self._reader = CheckpointReader(self.settings.resolved_backend_url)
            return self._reader

    # -- everything else is the automation engine's --

    def run(
        self,
        operation: Operation,
        spec: StackSpec,
        listener: Listener,
        plan: Path | None = None,
        refresh: bool = False,
        stamp: Mapping[str, Any] | None = None,
    ) -> OperationResult:
        return self.engine().run(operation, spec, listener, plan, refresh, stamp)

    def prepare(self, spec: StackSpec) -> None:
        if self.state(spec) is None:  # an existing stack needs nothing: the SDK stays unloaded
            self.engine().prepare(spec)

    def survey(self, spec: StackSpec, listener: Listener) -> OperationResult:
        return self.engine().survey(spec, listener)

    def outputs(self, spec: StackSpec) -> dict[str, OutputValue]:
        return self.engine().outputs(spec)

    def exists(self, spec: StackSpec) -> bool:
        return self.engine().exists(spec)

    def recover(self, spec: StackSpec, listener: Listener, fence: Fence | None = None) -> Recovery:
        return self.engine().recover(spec, listener, fence)

    def watch_locks(self, spec: StackSpec, on_pid: Callable[[int], None] | None) -> None:
        self.engine().watch_locks(spec, on_pid)

    def cancel(self, spec: StackSpec, interrupt: bool = True) -> None:
        built = self.built
        if built is not None:  # never built: nothing of it is running
            built.cancel(spec, interrupt)

    def remove(self, spec: StackSpec) -> None:
        self.engine().remove(spec)


def _pulumi_cloud(settings: Settings) -> bool:
    from stackflow.backends import backend_for

    return not backend_for(settings.resolved_backend_url).self_managed
