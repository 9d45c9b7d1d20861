"""Prefect events about a whole environment (approvals, syncs, review environments, expiry): one
resource shape, `stackflow.environment.<name>`, that automations and the UI's event feed match on.
Events about one stack are the summary's (flows/summary.py, `stackflow.stack.<env>.<stack>`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefect.events import emit_event


def emit_environment_event(event: str, environment: str, payload: Mapping[str, Any]) -> None:
    """Emit `event` about `environment` with `payload` (which must hold no secret)."""
    emit_event(
        event=event,
        resource={
            "prefect.resource.id": f"stackflow.environment.{environment}",
            "prefect.resource.name": environment,
            "stackflow.environment": environment,
        },
        payload=dict(payload),
    )
