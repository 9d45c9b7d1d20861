"""A stack's state as its latest checkpoint says it, from the checkpoint's own bytes.

The skip path reads this instead of asking `pulumi`: one read of one object from the backend,
so an unchanged stack costs no process and agrees with the real state (a lost, changed, locked
or foreign checkpoint is never taken as "unchanged").
"""

from __future__ import annotations

import gzip
import json
from typing import Any

from stackflow.engine.base import StackState

_GZIP_MAGIC = b"\x1f\x8b"


class DamagedCheckpoint(ValueError):
    """A checkpoint that cannot be read as Pulumi writes them."""


def parse_checkpoint(raw: bytes, *, locked: bool = False) -> StackState | None:
    """The state a checkpoint file holds; None for a stack that was created but never updated.

    Raises:
        DamagedCheckpoint: not JSON (or gzip of JSON), or not a Pulumi checkpoint.
    """
    try:
        data: Any = json.loads(gzip.decompress(raw) if raw[:2] == _GZIP_MAGIC else raw)
        latest = data["checkpoint"].get("latest")
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise DamagedCheckpoint(f"not a Pulumi checkpoint ({exc})") from None
    if not latest:
        return None
    resources = latest.get("resources") or []
    root = next((r for r in resources if r.get("type") == "pulumi:pulumi:Stack"), None)
    outputs = (root or {}).get("outputs") or {}
    return StackState(
        updated=str((latest.get("manifest") or {}).get("time", "")),
        outputs=outputs,
        resources=len(resources),
        pending=len(latest.get("pending_operations") or []),
        locked=locked,
    )
