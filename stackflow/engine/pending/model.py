"""A pending create as the checkpoint holds it, what a lookup finds of it in the cloud, and the
verdict: import the one found, or clear it (the cloud never made it, or more than one resource
matches, or some stack's state already holds the match)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackflow.engine.envelope import is_secret

Props = Mapping[str, Any]


@dataclass(frozen=True)
class PendingCreate:
    """A create an interrupted update began: Pulumi recorded its inputs (the auto-name the engine
    chose among them), never the id the cloud answered with."""

    urn: str
    type: str
    inputs: Props = field(repr=False)

    @classmethod
    def from_operation(cls, operation: Mapping[str, Any]) -> PendingCreate:
        """From one entry of a checkpoint's `pending_operations`."""
        resource = operation.get("resource") or {}
        urn = str(resource.get("urn", ""))
        kind = str(resource.get("type") or (urn.split("::")[2] if urn.count("::") >= 3 else ""))
        return cls(urn, kind, dict(resource.get("inputs") or {}))

    @property
    def name(self) -> str:
        """The resource's logical name in the program."""
        return self.urn.rsplit("::", 1)[-1]

    @property
    def label(self) -> str:
        return f"{self.type} {self.name}"


@dataclass(frozen=True)
class Candidate:
    """A cloud resource a lookup found: the id pulumi-aws keeps for it, and the identity a state
    holding it would show, when that is not the id (a task definition's revision ARN)."""

    id: str
    key: str = ""

    @property
    def identity(self) -> str:
        return self.key or self.id


Lookup = Callable[[Any, Props], Sequence[Candidate]]
"""(clients, the pending create's inputs) -> every resource in the cloud it may have made."""


@dataclass(frozen=True)
class Verdict:
    """What to do with one pending create.

    Attributes:
        found: the id to import (None: clear it).
        ambiguous: ids of the resources that match when more than one does.
        held: ids of matches that some stack's state already holds (never adopted twice).
        looked: False when stackflow has no lookup for the type.
    """

    pending: PendingCreate
    found: str | None = None
    ambiguous: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    looked: bool = True

    def line(self, where: str) -> str:
        """One sentence for the run's log: what was done and why (and, when it matters, what to
        do); `where` names the cloud ("the local cloud", "AWS")."""
        what = self.pending.label
        if self.found is not None:
            return f"imported {what} as {self.found}: {where} had made it"
        if self.ambiguous:
            return f"cleared {what}: {self.advice(where)}"
        if not self.looked:
            return (
                f"cleared {what}: stackflow cannot look this type up; if {where} made it, "
                "delete it or `pulumi import` it"
            )
        if self.held:
            return (
                f"cleared {what}: what matches in {where} ({', '.join(self.held)}) is "
                "already in a stack's state"
            )
        return f"cleared {what}: {where} never made it"

    def advice(self, where: str) -> str:
        """For an ambiguous match: what the cloud holds and what to do."""
        return (
            f"{where} holds {len(self.ambiguous)} that match and no stack holds "
            f"({', '.join(self.ambiguous)}), so none was imported and the next update creates "
            "another; delete those no one uses"
        )


def text(inputs: Props, key: str) -> str | None:
    """A plain string input (None when missing, empty or secret)."""
    value = inputs.get(key)
    if value is None or value == "" or is_secret(value):
        return None
    return str(value)


def tags(inputs: Props) -> dict[str, str]:
    """The resource's plain tags."""
    found = inputs.get("tags")
    if not isinstance(found, Mapping):
        return {}
    return {str(k): str(v) for k, v in found.items() if v is not None and not is_secret(v)}


def tag_filters(inputs: Props) -> list[dict[str, Any]]:
    """EC2 filters that match the resource's tags."""
    return [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags(inputs).items())]


def has_tags(found: Sequence[Mapping[str, Any]] | None, wanted: Mapping[str, str]) -> bool:
    """Whether AWS's tag list (any key capitalisation) holds every wanted tag."""
    present = {
        str(t.get("Key", t.get("key"))): str(t.get("Value", t.get("value", "")))
        for t in found or []
    }
    return all(present.get(k) == v for k, v in wanted.items())
