"""Stacks whose next `up` may not be skipped although their stamp matches: drift was found (the
cloud differs from the state: refresh first, then put it back) or a refresh took the cloud's
values into the state (the update puts the code's back). Kept with stackflow's records, beside
the backend: a drift found on one worker makes the next `up` on any worker run the stack."""

from __future__ import annotations

import time
from enum import StrEnum

from stackflow.engine.base import StackSpec
from stackflow.records import DamagedRecord, Records


class DriftMark(StrEnum):
    """Why a stack's next up may not be skipped; the value is what its record keeps."""

    DRIFTED = "drifted"  # refresh first, then update
    REFRESHED = "refreshed"  # the state holds the cloud's values: update


class DriftMarks:
    """Drift found by `drift`, per stack, until an `up` or `destroy` puts the stack right.

    Args:
        records: stackflow's records (the team's backend, or the state folder's for one person).
        scope: the cloud ("local", "aws"): an environment's stacks on one cloud only.
    """

    def __init__(self, records: Records, scope: str) -> None:
        self.records, self.scope = records, scope

    def _key(self, spec: StackSpec) -> str:
        return f"drift/{self.scope}/{spec.pulumi_project}/{spec.environment}"

    def mark(self, spec: StackSpec, why: DriftMark = DriftMark.DRIFTED) -> None:
        self.records.put(self._key(spec), {"found": time.time(), "why": why}, expect_version=None)

    def marked(self, spec: StackSpec) -> DriftMark | None:
        """Why the stack's next up must run, or None."""
        try:
            found = self.records.get(self._key(spec))
        except DamagedRecord:
            return DriftMark.DRIFTED  # a damaged mark errs on the side of running
        if found is None:
            return None
        try:
            return DriftMark(found.value.get("why", DriftMark.DRIFTED))
        except ValueError:  # a word this version does not know errs on the side of running too
            return DriftMark.DRIFTED

    def clear(self, spec: StackSpec) -> None:
        self.records.delete(self._key(spec), expect_version=None)
