"""Stack engines: one interface (`Engine`), two implementations chosen by settings."""

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
    "ResourceEvent",
    "StackSpec",
    "get_engine",
    "is_transient",
]


def get_engine(settings: Settings) -> Engine:
    """The engine that settings choose; imports only that implementation."""
    if settings.engine == "simulated":
        from stackflow.engine.simulated import SimulatedEngine

        return SimulatedEngine(settings)
    from stackflow.engine.automation import AutomationEngine

    engine: Engine = AutomationEngine(settings)
    return engine
