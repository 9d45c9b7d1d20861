"""What drift found, resource by resource: from the steps of a refresh preview, the property that
moved (down to the nested key or item), the value the state holds and the value the cloud holds
now, secrets masked."""

from __future__ import annotations

from pulumi.automation.events import StepEventMetadata

from stackflow.engine.automation.properties import ABSENT, moved, property_change, value_at
from stackflow.engine.base import ResourceChange
from stackflow.redact import Redactor

# A refresh step that found the resource as the state holds it
_UNMOVED = frozenset({"same", "refresh", "read"})


def drifted(metadata: StepEventMetadata) -> bool:
    """Whether a refresh preview's step says the resource moved (changed, or gone)."""
    op = str(getattr(metadata.op, "value", metadata.op))
    return op not in _UNMOVED or bool(metadata.diffs or metadata.detailed_diff)


def drifted_resource(metadata: StepEventMetadata, redactor: Redactor) -> ResourceChange:
    """One resource drift found: `delete` when the cloud no longer has it, else `update` with
    each property that moved (old: what the state holds; new: what the cloud holds now)."""
    op = str(getattr(metadata.op, "value", metadata.op))
    name = metadata.urn.rsplit("::", 1)[-1]
    if metadata.new is None or op in ("delete", "discard"):
        return ResourceChange(metadata.urn, metadata.type, name, "delete")
    old = metadata.old
    stored = {**(old.outputs or {}), **(old.inputs or {})} if old is not None else {}
    found = {**(metadata.new.outputs or {}), **(metadata.new.inputs or {})}
    keys = list(metadata.detailed_diff or {}) or list(metadata.diffs or [])
    roots = [
        k for k in keys if ABSENT is not value_at(stored, k) or ABSENT is not value_at(found, k)
    ]
    # no diff named: whatever differs at the top
    roots = roots or [k for k in sorted({*stored, *found}) if stored.get(k) != found.get(k)]
    properties = [
        property_change(path, before, after, redactor)
        for root in roots
        for path, before, after in moved(root, value_at(stored, root), value_at(found, root))
    ]
    return ResourceChange(metadata.urn, metadata.type, name, "update", tuple(properties))
