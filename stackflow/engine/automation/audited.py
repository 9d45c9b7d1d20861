"""What recovering a stack after an interrupted run records in the audit log: each lock a dead run
left that was broken (and why it was judged dead), each pending create imported into the state or
cleared, and the other pending operations cleared. Called by the engine's recovery
(`stackflow.engine.automation.recovery`) once it has done each; it lives with the engine, whose
types it reads, so the audit log knows nothing of the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from stackflow.audit import Action, record

if TYPE_CHECKING:
    from stackflow.engine.base import StackSpec
    from stackflow.engine.pending import Verdict
    from stackflow.settings import Settings


def lock_broken(settings: Settings, spec: StackSpec, why: str) -> None:
    """The lock a dead run left on `spec`'s stack was removed; `why` says how it was judged dead."""
    record(
        settings,
        Action.LOCK_BROKEN,
        environment=spec.environment,
        stack=spec.node,
        details={"stack": spec.label, "why": why},
    )


def pending_settled(
    settings: Settings, spec: StackSpec, verdicts: Sequence[Verdict], others: int, where: str
) -> None:
    """The pending operations of `spec`'s stack were settled: each create imported (with its id)
    or cleared (`verdicts`, looked up in `where`, the cloud), and `others` pending updates,
    deletes or reads cleared."""
    imported = [v for v in verdicts if v.found is not None]
    cleared = [v for v in verdicts if v.found is None]
    if imported:
        record(
            settings,
            Action.PENDING_IMPORTED,
            environment=spec.environment,
            stack=spec.node,
            details={"resources": [{"urn": v.pending.urn, "id": v.found} for v in imported]},
        )
    if cleared or others:
        record(
            settings,
            Action.PENDING_CLEARED,
            environment=spec.environment,
            stack=spec.node,
            details={
                "creates": [{"urn": v.pending.urn, "why": v.line(where)} for v in cleared],
                "other_operations": others,
            },
        )


def adopted(settings: Settings, spec: StackSpec, found: Sequence[tuple[str, str]]) -> None:
    """Resources a create's lost answer had left in the cloud were adopted into `spec`'s stack
    (`found`: each one's URN and id), as imported pending creates are."""
    record(
        settings,
        Action.PENDING_IMPORTED,
        environment=spec.environment,
        stack=spec.node,
        details={"resources": [{"urn": urn, "id": id_} for urn, id_ in found], "lost_answer": True},
    )
