"""What recovering a stack did about what an interrupted update left: the lock it broke, the
pending creates it imported (the cloud had made them) or cleared, and the other pending
operations its refresh cleared."""

from __future__ import annotations

from dataclasses import dataclass

from stackflow.engine.pending.model import Verdict


@dataclass(frozen=True)
class Recovery:
    """What `Engine.recover` did; true when it did anything. `note` says it in one line, for a
    run's summary."""

    unlocked: bool = False
    verdicts: tuple[Verdict, ...] = ()
    other_pending: int = 0  # pending updates, deletes and reads: cleared by the refresh
    where: str = "the cloud"  # how reports name it: "the local cloud", "AWS"

    def __bool__(self) -> bool:
        return self.unlocked or bool(self.verdicts) or self.other_pending > 0

    @property
    def imported(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.found is not None)

    @property
    def ambiguous(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.ambiguous)

    @property
    def note(self) -> str:
        """E.g. "recovered what an interrupted operation left: removed its lock; imported
        aws:rds/instance:Instance mysql as db-...: the local cloud had made it"."""
        parts = ["removed its lock"] if self.unlocked else []
        if self.other_pending:
            parts.append(f"cleared {self.other_pending} pending updates, deletes or reads")
        parts += [verdict.line(self.where) for verdict in self.verdicts]
        return f"recovered what an interrupted operation left: {'; '.join(parts)}" if parts else ""
