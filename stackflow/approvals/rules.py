"""Who may approve a run and how many must: the environment's `[approval]` approvers, the number
of distinct approvals needed, and whether the person who started the run may be one of them.

The requester (who started the run) is known per door: the command line's OS user, a sync's
commit author (unverified), nobody for a run started in the Prefect UI or API. When the requester
is unknown and may not approve, one more approval than `needed` is asked for: one of them may be
the requester's own."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Requester:
    """Who started the run, as far as the door tells.

    Attributes:
        name: the OS user, the commit's author ("Ana <ana@example.com>"), or "" when unknown.
        via: the door ("command line", "sync of commit ...", "the Prefect UI or API").
    """

    name: str
    via: str

    @property
    def known(self) -> bool:
        return bool(self.name)

    def is_(self, principal: str) -> bool:
        """Whether `principal` (of the allowed signers file) names this requester: the same name,
        or the email of a commit author's "Name <email>"."""
        if not self.name:
            return False
        names = {self.name.lower()}
        if self.name.endswith(">") and "<" in self.name:
            names.add(self.name[self.name.rindex("<") + 1 : -1].lower())
        return principal.lower() in names


@dataclass
class Tally:
    """The signed approvals a run has so far, under the environment's rules."""

    approvers: tuple[str, ...]
    needed: int
    requester: Requester
    requester_may_approve: bool
    approved_by: list[str] = field(default_factory=list)

    @property
    def required(self) -> int:
        """How many distinct approvals the run needs: `needed`, one more when the requester is
        unknown and may not approve."""
        unknown = not self.requester.known and not self.requester_may_approve
        return self.needed + (1 if unknown else 0)

    @property
    def missing(self) -> int:
        return max(0, self.required - len(self.approved_by))

    def refusal(self, principal: str) -> str | None:
        """Why an approval signed by `principal` does not count (None: it counts)."""
        if principal not in self.approvers:
            return (
                f"{principal} signed it but is not one of this environment's approvers "
                f"({', '.join(self.approvers)})"
            )
        if principal in self.approved_by:
            return f"{principal} already approved this plan: each approver counts once"
        if not self.requester_may_approve and self.requester.is_(principal):
            return (
                f"{principal} started this run ({self.requester.via}) and this environment's "
                "requester may not approve its own run"
            )
        return None

    def count(self, principal: str) -> None:
        self.approved_by.append(principal)

    def still(self) -> str:
        """What the pause's description says is still needed."""
        extra = (
            " (one more than required: who started this run is unknown)"
            if self.required > self.needed
            else ""
        )
        who = ", ".join(self.approved_by) or "nobody yet"
        return (
            f"{self.missing} more signed approval{'s' if self.missing != 1 else ''} needed of "
            f"{self.required}{extra}; approved so far by: {who}"
        )
