"""Property values as a preview or a drift report shows them: found at a Pulumi property path,
compared down to the leaves that differ (a key of a map, an item of a list, a key inside a JSON
document held as a string), with secrets masked, unknowns named and long values cut."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from stackflow.engine.base import KNOWN_AFTER_APPLY, UNKNOWN_WIRE, PropertyChange
from stackflow.engine.envelope import SECRET_SIG
from stackflow.redact import MASK, Redactor

ABSENT: Any = object()  # a property (or key, or item) that is not there
_PATH_PART = re.compile(r'([^.\[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def value_at(values: Mapping[str, Any] | None, path: str, missing: Any = ABSENT) -> Any:
    """The value at a Pulumi property path ("tags.Name", "ingress[0].cidrBlocks"), or `missing`."""
    current: Any = values or {}
    for name, index, quoted in _PATH_PART.findall(path):
        if index:
            if not isinstance(current, list) or int(index) >= len(current):
                return missing
            current = current[int(index)]
        else:
            if not _is_map(current) or (quoted or name) not in current:
                return missing
            current = current[quoted or name]
    return current


def shown(value: Any, redactor: Redactor, limit: int = 120) -> Any:
    """A property value as a preview may show it: secrets masked, unknowns named, long cut."""
    if isinstance(value, Mapping) and SECRET_SIG in value:
        return MASK
    if value == UNKNOWN_WIRE:
        return KNOWN_AFTER_APPLY
    if isinstance(value, Mapping):
        return {k: shown(v, redactor, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v, redactor, limit) for v in value]
    if isinstance(value, str):
        text = redactor(value)
        return text if len(text) <= limit else text[: limit - 1] + "…"
    return value


def moved(path: str, before: Any, after: Any) -> Iterator[tuple[str, Any, Any]]:
    """The leaves under `path` whose values differ, as (path, before, after); ABSENT where a side
    has none. Maps and JSON documents are followed key by key, lists item by item (an item added
    or removed at the end is one leaf); a secret and an unknown value are leaves, never opened."""
    if before == after:
        return
    before, after = _document(before), _document(after)
    if _is_map(before) and _is_map(after):
        for key in sorted(set(before) | set(after)):
            step = f"{path}.{key}" if _PLAIN_KEY.match(key) else f'{path}["{key}"]'
            yield from moved(step, before.get(key, ABSENT), after.get(key, ABSENT))
        return
    if isinstance(before, list) and isinstance(after, list):
        for index in range(max(len(before), len(after))):
            a = before[index] if index < len(before) else ABSENT
            b = after[index] if index < len(after) else ABSENT
            yield from moved(f"{path}[{index}]", a, b)
        return
    yield path, before, after


def property_change(
    path: str, before: Any, after: Any, redactor: Redactor, forces: bool = False
) -> PropertyChange:
    """One leaf that differs, its values shown (ABSENT: the side has none, shown as None)."""
    return PropertyChange(
        name=path,
        kind="add" if before is ABSENT else "delete" if after is ABSENT else "update",
        forces_replacement=forces,
        old=None if before is ABSENT else shown(before, redactor),
        new=None if after is ABSENT else shown(after, redactor),
    )


def _document(value: Any) -> Any:
    """A JSON document held as a string (a policy, container definitions), parsed; else as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _is_map(value: Any) -> bool:
    return isinstance(value, Mapping) and SECRET_SIG not in value
