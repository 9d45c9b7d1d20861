"""A rule's violation as a policy pack reported it, in the words the plan, the summary and a
refusal use: the stack, the resource, the pack's message (stackflow's own rules name the property
there) and the rule."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MANDATORY = "mandatory"


@dataclass(frozen=True)
class Violation:
    """One violation of one rule by one resource (urn "" : by the stack as a whole)."""

    policy: str
    pack: str
    level: str  # mandatory or advisory, as the run enforced it
    urn: str
    message: str  # the pack's own words about this resource
    description: str = ""  # what the rule asks, in general

    @classmethod
    def reported(cls, policy: str, pack: str, level: str, urn: str | None, text: str) -> Violation:
        """From Pulumi's policy event, whose text is the rule's description, a newline, then
        the message the pack reported."""
        description, _, message = text.strip().partition("\n")
        return cls(policy, pack, level, urn or "", message.strip() or description, description)

    @property
    def mandatory(self) -> bool:
        return self.level == MANDATORY

    @property
    def resource(self) -> str:
        """`<type> "<name>"` from the URN (the stack itself when it names none)."""
        parts = self.urn.split("::", 3)
        if len(parts) < 4:
            return "the stack"
        return f'{parts[2].rsplit("$", 1)[-1]} "{parts[3]}"'

    def line(self) -> str:
        """One line: the resource, what is wrong, the rule and its pack, the level."""
        return (
            f"{self.resource}: {' '.join(self.message.split())} "
            f"(policy {self.policy} of pack {self.pack}, {self.level})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "pack": self.pack,
            "level": self.level,
            "resource": self.resource,
            "urn": self.urn,
            "message": self.message,
        }


def refusal(stack: str, violations: Iterable[Violation]) -> str:
    """Why a stack's run stops: each mandatory violation, on one line."""
    found = [v for v in violations if v.mandatory]
    head = f"{len(found)} mandatory policy violation{'s' if len(found) != 1 else ''}"
    return f"{head} in {stack}: " + "; ".join(v.line() for v in found)
