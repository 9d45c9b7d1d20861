"""Binding an approval to what is applied: the pending files' checksums an approval showed
(key -> checksum), compared with what is pending when the run starts."""

from __future__ import annotations

from collections.abc import Mapping

from stackflow.migrator.errors import MigrationPlanChanged
from stackflow.migrator.plan import Plan


def pin_changes(
    pinned: Mapping[str, str],
    pending: Mapping[str, str],
    applied: Mapping[str, str],
    names: Mapping[str, str],
) -> list[str]:
    """How the pending files (key -> checksum) differ from those an approval pinned: files
    added or changed since, and approved files no longer pending that were not applied with the
    approved checksum. [] when they are the approved ones.

    Args:
        applied: key -> checksum of the applied files.
        names: key -> file name, for the files pending now.
    """
    added = sorted(pending.keys() - pinned.keys())
    changed = sorted(v for v in pending.keys() & pinned.keys() if pending[v] != pinned[v])
    gone = sorted(v for v in pinned.keys() - pending.keys() if applied.get(v) != pinned[v])
    parts = []
    if added:
        parts.append("added since approval: " + ", ".join(names[v] for v in added))
    if changed:
        parts.append("changed since approval: " + ", ".join(names[v] for v in changed))
    if gone:
        parts.append("approved but no longer pending: " + ", ".join(gone))
    return parts


def check_pinned(todo: Plan, pinned: Mapping[str, str]) -> None:
    """Refuse unless every pending file was approved as it is now.

    An approved file that is no longer pending is fine only if it was applied with the approved
    checksum (an earlier attempt of the same run applied it).

    Raises:
        MigrationPlanChanged: naming the files added, changed or gone since the approval.
    """
    parts = pin_changes(
        pinned,
        {m.key: m.checksum for m in todo.pending},
        {r.key: r.checksum for r in todo.applied},
        {m.key: m.filename for m in todo.pending},
    )
    if parts:
        raise MigrationPlanChanged(
            "the pending migrations are not the ones approved (" + "; ".join(parts) + "); "
            "preview and approve again"
        )
