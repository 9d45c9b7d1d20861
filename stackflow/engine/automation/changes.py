"""What the engine's events say, in stackflow's words: change counts, resource progress, and
per-resource property changes (values: `properties`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.automation.events import EngineEvent, OpMap, StepEventMetadata

from stackflow.engine.automation.properties import moved, property_change, shown, value_at
from stackflow.engine.base import (
    ChangeCounts,
    Operation,
    PropertyChange,
    ResourceChange,
    ResourceEvent,
    StackSpec,
)
from stackflow.engine.events import ResourceStatus
from stackflow.redact import Redactor

_CHANGE = {
    "create": "create",
    "import": "create",
    "import-replacement": "replace",
    "update": "update",
    "delete": "delete",
    "discard": "delete",
    "discard-replaced": "delete",
    "remove-pending-replace": "delete",
    "replace": "replace",
    "create-replacement": "replace",
    "delete-replaced": "replace",
    "same": "same",
    "read": "same",
    "read-replacement": "same",
    "refresh": "refresh",
}


def secret_strings(value: Any) -> list[str]:
    """Every string inside a secret output (a secret may be a dict or a list of strings)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in secret_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in secret_strings(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def counts(changes: OpMap | Mapping[str, int] | None) -> ChangeCounts:
    # OpType is a str enum, so the CLI's plain string keys and OpType keys look up alike.
    raw: Mapping[Any, int] = changes or {}
    return ChangeCounts(
        create=int(raw.get("create", 0)) + int(raw.get("import", 0)),
        update=int(raw.get("update", 0)),
        delete=int(raw.get("delete", 0)),
        replace=int(raw.get("replace", 0)),
        same=int(raw.get("same", 0)),
    )


def resource_event(
    event: EngineEvent, spec: StackSpec, operation: Operation
) -> ResourceEvent | None:
    metadata: StepEventMetadata
    if event.resource_pre_event is not None:
        metadata, status = event.resource_pre_event.metadata, ResourceStatus.STARTED
    elif event.res_outputs_event is not None:
        metadata, status = event.res_outputs_event.metadata, ResourceStatus.DONE
    elif event.res_op_failed_event is not None:
        metadata, status = event.res_op_failed_event.metadata, ResourceStatus.FAILED
    else:
        return None
    op = str(getattr(metadata.op, "value", metadata.op))
    return ResourceEvent(
        stack=spec.node,
        operation=operation,
        urn=metadata.urn,
        type=metadata.type,
        name=metadata.urn.rsplit("::", 1)[-1],
        change=_CHANGE.get(op, op),
        status=status,
    )


def resource_change(metadata: StepEventMetadata, redactor: Redactor) -> ResourceChange | None:
    """What one engine step changes, property by property (None for a step that changes nothing).

    Property names come from the provider's detailed diff (Pulumi's `diffs` when it has none);
    old and new values are the step's inputs, with secrets masked. A create names every input it
    sets (what it is known from, or "known after apply").
    """
    op = str(getattr(metadata.op, "value", metadata.op))
    change = _CHANGE.get(op, op)
    if change not in ("create", "update", "replace", "delete"):
        return None
    old = metadata.old.inputs if metadata.old is not None else None
    new = metadata.new.inputs if metadata.new is not None else None
    forcing = set(metadata.keys or [])
    properties: list[PropertyChange] = []
    if change == "create":
        properties = [
            PropertyChange(name=key, kind="add", new=shown(value, redactor))
            for key, value in sorted((new or {}).items())
            if not key.startswith("__")  # the provider's bookkeeping (pulumi-aws's __defaults)
        ]
    elif change in ("update", "replace"):
        detailed = metadata.detailed_diff or {}
        names = list(detailed) or list(metadata.diffs or [])
        for name in names:
            diff = detailed.get(name)
            kind = str(getattr(diff.diff_kind, "value", "update")) if diff else "update"
            forces = kind.endswith("-replace") or name in forcing
            # down to the leaves that differ: the item of a list, the key in a JSON document
            leaves = list(moved(name, value_at(old, name), value_at(new, name)))
            properties.extend(
                property_change(path, before, after, redactor, forces)
                for path, before, after in leaves
            )
            if not leaves:  # the provider says it differs where the inputs look alike
                properties.append(
                    PropertyChange(
                        name=name,
                        kind=kind.removesuffix("-replace"),
                        forces_replacement=forces,
                        old=shown(value_at(old, name, None), redactor),
                        new=shown(value_at(new, name, None), redactor),
                    )
                )
    return ResourceChange(
        urn=metadata.urn,
        type=metadata.type,
        name=metadata.urn.rsplit("::", 1)[-1],
        change=change,
        properties=tuple(properties),
    )
