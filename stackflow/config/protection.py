"""An environment's protection: its kind, whether `up` waits for approval, whether its database
has deletion protection, whether destroy needs confirming, and which policy packs it enforces.

Protection cannot be dropped by one line: each successful `up` records the protection its file
gave, and the next run follows the stronger of that record and the file (so the run that lowers
it is still gated by what was recorded). Lowering a `prod` or `prod-*` environment below its
kind's protection needs a reason in its file (`[approval] unprotect = "..."`), which the plan
shows and the record keeps.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from stackflow.config.kinds import EnvironmentKind, Profile
from stackflow.errors import SettingsError

_RANK = {"ephemeral": 0, "dev": 1, "staging": 2, "prod": 3}
_WORDS = {
    "approval": "approval of every up",
    "deletion_protection": "the database's deletion protection",
    "confirm_destroy": "confirmation of destroy (--yes)",
}


class ProtectionLowered(SettingsError):
    """A prod or prod-* environment's file lowers its protection without saying why."""


@dataclass(frozen=True)
class Protection:
    """What guards one environment (see the module)."""

    kind: str
    approval: bool
    deletion_protection: bool
    confirm_destroy: bool
    # the policy packs whose rules stop a run (enforcement not advisory), by folder as the file
    # names them: dropping one, or making it advisory, lowers the protection
    enforced_packs: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "enforced_packs": list(self.enforced_packs)}

    @classmethod
    def from_dict(cls, value: Any) -> Protection | None:
        """A recorded protection (None when there is none, or it is not one)."""
        if not isinstance(value, dict):
            return None
        try:
            return cls(
                str(value["kind"]),
                bool(value["approval"]),
                bool(value["deletion_protection"]),
                bool(value["confirm_destroy"]),
                tuple(str(p) for p in value.get("enforced_packs") or ()),  # none before packs
            )
        except (KeyError, TypeError):
            return None

    def stronger(self, other: Protection | None) -> Protection:
        """Each guard on when either has it on; the kind that ranks higher."""
        if other is None:
            return self
        kind = max(self.kind, other.kind, key=lambda k: _RANK.get(k, 0))
        return Protection(
            kind,
            self.approval or other.approval,
            self.deletion_protection or other.deletion_protection,
            self.confirm_destroy or other.confirm_destroy,
            tuple(sorted({*self.enforced_packs, *other.enforced_packs})),
        )

    def lowered_from(self, before: Protection | None) -> list[str]:
        """What this protection lacks that `before` had, one phrase each."""
        if before is None:
            return []
        lines = []
        if _RANK.get(self.kind, 0) < _RANK.get(before.kind, 0):
            lines.append(f"kind {before.kind} -> {self.kind}")
        for name, words in _WORDS.items():
            if getattr(before, name) and not getattr(self, name):
                lines.append(f"{words}: on -> off")
        for pack in before.enforced_packs:
            if pack not in self.enforced_packs:
                lines.append(f"policy pack {pack} enforced: on -> off")
        return lines


def kind_protection(kind: EnvironmentKind) -> Protection:
    """The protection a kind's profile gives when the file says nothing else."""
    profile = Profile(kind)
    return Protection(kind.value, profile.protected, profile.deletion_protection, profile.protected)


def prod_named(environment: str) -> bool:
    """Whether the name alone says prod (`prod`, `prod-*`): lowering it needs a reason."""
    return environment == "prod" or environment.startswith("prod-")


def check_unprotect(
    environment: str,
    file_protection: Protection,
    recorded: Protection | None,
    reason: str | None,
    file: str,
) -> list[str]:
    """What the file lowers (against the record, and for prod names the prod kind's own).

    Raises:
        ProtectionLowered: a prod or prod-* environment lowered without `[approval] unprotect`.
    """
    baseline = recorded
    if prod_named(environment):
        baseline = kind_protection(EnvironmentKind.PROD).stronger(recorded)
    lowered = file_protection.lowered_from(baseline)
    if lowered and prod_named(environment) and not reason:
        raise ProtectionLowered(
            f"{file} lowers the protection of {environment!r} ({'; '.join(lowered)}): a prod "
            'environment\'s protection is lowered only with a reason, `unprotect = "<why>"` '
            "under [approval] in that file (shown in the plan and recorded). Nothing was changed."
        )
    return lowered
