"""What every phase of one call of the stack task shares: the run's context, the node, the
operation, the attempt, the log, the gate, and the listener that hands the engine's resource
events to the live view and counts what they change."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from stackflow.engine import Listener, Operation
from stackflow.engine.base import ResourceEvent
from stackflow.engine.events import ResourceStatus
from stackflow.progress import NodeState, ResourceProgress, ResourcesDeclared
from tasks.approved import Gate
from tasks.context import RunContext

Logger = logging.Logger | logging.LoggerAdapter[Any]


@dataclass
class StackCall:
    """One call of the stack task: one operation on one stack, one attempt of it."""

    ctx: RunContext
    node: str
    operation: Operation
    attempt: int  # Prefect counts attempts from 1
    logger: Logger
    gate: Gate | None = None  # the approval it plans for (PREVIEW) or applies (UP)
    listener: Listener = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.listener = _listener(self.ctx, self.node, self.logger)

    @property
    def planning(self) -> bool:
        """A gated plan's preview: it saves the update plan an approval binds."""
        return self.operation is Operation.PREVIEW and self.gate is not None

    def say(self, state: NodeState, **details: Any) -> None:
        """Tell the live view this attempt's node moved to `state`."""
        self.ctx.publish(self.node, state, attempt=self.attempt, **details)

    def freed(self, message: str) -> None:
        """What taking the stack's slot or lock freed that a dead run held."""
        self.logger.info("%s", message)
        self.say(NodeState.RUNNING, detail=message)

    def waiting(self, why: str) -> None:
        """Another run holds the stack: say why it waits."""
        self.logger.info("waiting: %s", why)
        self.say(NodeState.WAITING, detail=why)


def _listener(ctx: RunContext, node: str, logger: Logger) -> Listener:
    environment = ctx.settings.environment
    begun, made = ctx.begun(node), ctx.made(node)

    def on_event(event: ResourceEvent) -> None:
        begun.set()  # the engine reads and writes its state: a stack may start beside it
        made.add(event)
        if event.status == ResourceStatus.DONE and event.change not in ("same", "refresh"):
            logger.debug("%s %s %s: %s", node, event.type, event.name, event.change)
        ctx.progress.publish(
            ResourceProgress(
                environment,
                node,
                event.urn,
                event.type,
                event.name,
                event.change,
                event.status,
            )
        )

    def on_declared(count: int) -> None:
        ctx.progress.publish(ResourcesDeclared(environment, node, count))

    return Listener(
        on_output=logger.info, on_event=on_event, redactor=ctx.redactor, on_declared=on_declared
    )
