"""What one operation's engine events tell, gathered as they come: each resource's progress for the
listener, each resource's change (preview, up), the stack's outputs as a preview projects them,
and what a drift check found."""

from __future__ import annotations

from typing import Any

from pulumi.automation.events import EngineEvent, StepEventMetadata

from stackflow.engine.automation.changes import resource_change, resource_event
from stackflow.engine.automation.drift import drifted, drifted_resource
from stackflow.engine.base import (
    INTERNAL_OUTPUT,
    Listener,
    Operation,
    OutputValue,
    ResourceChange,
    StackSpec,
)
from stackflow.engine.envelope import SECRET_SIG
from stackflow.engine.events import ROOT_STACK_TYPE
from stackflow.policy.violation import Violation


class StepObserver:
    """The engine's `on_event` for one operation on one stack."""

    def __init__(self, spec: StackSpec, operation: Operation, listener: Listener) -> None:
        self.spec = spec
        self.operation = operation
        self.listener = listener
        self.planned: dict[str, ResourceChange] = {}  # by URN: a replace is several steps
        self.projected: dict[str, OutputValue] = {}
        self._drift: dict[str, StepEventMetadata] = {}
        self.violations: list[Violation] = []  # what the policy packs reported, in order

    def __call__(self, event: EngineEvent) -> None:
        policy = event.policy_event
        if policy is not None:
            self.violations.append(
                Violation.reported(
                    policy.policy_name,
                    policy.policy_pack_name,
                    policy.enforcement_level,
                    policy.resource_urn,
                    self.listener.redactor(policy.message),
                )
            )
        converted = resource_event(event, self.spec, self.operation)
        if converted is not None:
            self.listener.event(converted)
        pre = event.resource_pre_event
        if pre is not None and self.operation in (Operation.PREVIEW, Operation.UP):
            change = resource_change(pre.metadata, self.listener.redactor)
            if change is not None and (change.urn not in self.planned or change.properties):
                # the create-replacement step carries the diff; delete-replaced does not
                self.planned[change.urn] = change
        done = event.res_outputs_event
        if done is None:
            return
        metadata = done.metadata
        if self.operation is Operation.DRIFT and drifted(metadata):
            self._drift[metadata.urn] = metadata
        elif (
            self.operation is Operation.PREVIEW
            and metadata.type == ROOT_STACK_TYPE
            and metadata.new is not None
        ):  # the last one carries the outputs the program registered
            self.projected = {
                key: _projected(value)
                for key, value in (metadata.new.outputs or {}).items()
                if key != INTERNAL_OUTPUT
            }

    def drift(self) -> tuple[ResourceChange, ...]:
        """What drift found. Called after the operation, once the stack's secret outputs are
        known to the redactor (a value found in the cloud may hold one)."""
        return tuple(drifted_resource(m, self.listener.redactor) for m in self._drift.values())


def _projected(value: Any) -> OutputValue:
    """A stack output as a preview's event carries it; a secret's value is not shown there."""
    if isinstance(value, dict) and SECRET_SIG in value:
        return OutputValue(None, secret=True)
    return OutputValue(value)
