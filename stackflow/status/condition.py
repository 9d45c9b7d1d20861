"""A stack's or an environment's condition as `status` names it (the first that holds):

    damaged record        one of its records cannot be read (named, with what to do); the rest
                          of the status still shows
    expired               an ephemeral environment past its TTL (the cleanup destroys it)
    waiting for approval  a run of the environment waits for someone to approve its plan
    reconciling           a run is changing the stack, or a sync is deploying a new commit
    failed                its last operation failed
    drifted               its last drift check found drift (until an up or refresh)
    ready                 deployed, and its last operation succeeded
    not deployed          no operation has deployed it yet

An environment's condition is its stacks' worst (`Condition.worst`). The values are what
`status`, its JSON, the pages and the metrics' labels show.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Condition(StrEnum):
    """Worst first."""

    DAMAGED = "damaged record"
    FAILED = "failed"
    DRIFTED = "drifted"
    WAITING = "waiting for approval"
    RECONCILING = "reconciling"
    EXPIRED = "expired"
    READY = "ready"
    NOT_DEPLOYED = "not deployed"

    @staticmethod
    def worst(conditions: Iterable[Condition]) -> Condition:
        """The worst of `conditions` (none: not deployed)."""
        order = list(Condition)
        return min(conditions, key=order.index, default=Condition.NOT_DEPLOYED)


# deployed, whatever its condition (a damaged record's stacks are not known)
ACTIVE = frozenset(set(Condition) - {Condition.DAMAGED, Condition.NOT_DEPLOYED})
