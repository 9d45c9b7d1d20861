"""The stack engine: one interface (`Engine`), implemented by the Pulumi Automation API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackflow.engine.base import (
    ChangeCounts,
    ConfigValue,
    Engine,
    Listener,
    Operation,
    OperationResult,
    OutputValue,
    PropertyChange,
    ResourceChange,
    ResourceEvent,
    StackSpec,
    is_transient,
)

if TYPE_CHECKING:
    from stackflow.settings import Settings

__all__ = [
    "ChangeCounts",
    "ConfigValue",
    "Engine",
    "Listener",
    "Operation",
    "OperationResult",
    "OutputValue",
    "PropertyChange",
    "ResourceChange",
    "ResourceEvent",
    "StackSpec",
    "get_engine",
    "is_transient",
]


def get_engine(settings: Settings, adopts: bool = True) -> Engine:
    """The real Pulumi engine for these settings (the cloud they name), built on first use: the
    skip path's questions (versions, a stack's state) are answered without Pulumi's SDK (see
    `stackflow.engine.deferred`). `adopts`: an update AWS refused because a create's resource
    exists already adopts it when it is provably the stack's (off for `up --recreate`; see
    `stackflow.engine.automation.adoption`)."""
    from stackflow.engine.deferred import DeferredEngine

    engine: Engine = DeferredEngine(settings, adopts)
    return engine
