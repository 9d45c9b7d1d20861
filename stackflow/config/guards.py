"""What guards an environment, as its settings answer it: whether it is protected, the
protection its file gives and the one its last successful `up` recorded, and the refusals that
follow (destroy without confirmation, a database with deletion protection, a checkout with edits).

Functions of the settings (`stackflow.config.model.Settings`, whose methods of the same names
call them), read through `Guarded`, what they need of them: kept apart from the settings' fields
because they are one concern (the rules are `stackflow.config.protection`'s, the answers these),
and below the settings' model, which builds on them.
"""

from __future__ import annotations

from typing import Protocol, Self, TypeVar

from stackflow.config.approval import ApprovalSettings
from stackflow.config.kinds import EnvironmentKind, Profile
from stackflow.config.policy import PolicySettings
from stackflow.config.protection import Protection, check_unprotect
from stackflow.errors import ConfirmationRequired, DeletionProtected


class _Source(Protocol):
    @property
    def environment_file(self) -> str | None: ...


class Guarded(Protocol):
    """What the guards read of an environment's settings."""

    _recorded_protection: Protection | None  # what its last successful `up` recorded

    @property
    def environment(self) -> str: ...

    @property
    def environment_kind(self) -> EnvironmentKind: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def approval(self) -> ApprovalSettings: ...

    @property
    def policy(self) -> PolicySettings: ...

    @property
    def deletion_protection(self) -> bool: ...

    @property
    def source(self) -> _Source: ...

    @property
    def protected(self) -> bool: ...

    @property
    def approval_required(self) -> bool: ...

    @property
    def file_protection(self) -> Protection: ...

    def lowered_protection(self, recorded: Protection | None = None) -> list[str]: ...

    def model_copy(self) -> Self: ...


G = TypeVar("G", bound=Guarded)


def protected(settings: Guarded) -> bool:
    """The one answer to "is this environment protected?" (its kind: prod; or the
    protection its last successful `up` recorded)."""
    recorded = settings._recorded_protection
    return settings.profile.protected or (recorded is not None and recorded.confirm_destroy)


def file_protection(settings: Guarded) -> Protection:
    """The protection the environment's file gives (kind, approval, deletion protection, the
    policy packs it enforces)."""
    approval = (
        settings.profile.protected
        if settings.approval.required is None
        else settings.approval.required
    )
    enforcement = settings.policy.enforcement or settings.profile.policy_enforcement
    enforced = () if enforcement == "advisory" else tuple(str(p) for p in settings.policy.packs)
    return Protection(
        settings.environment_kind.value,
        approval,
        settings.deletion_protection,
        settings.profile.protected,
        tuple(sorted(enforced)),
    )


def with_recorded_protection(settings: G, recorded: Protection | None) -> G:
    """These settings, guarded by the stronger of the file's and the `recorded` protection.

    Raises:
        ProtectionLowered: a prod or prod-* environment's file lowers its protection without
            `[approval] unprotect` (see `stackflow.config.protection`).
    """
    settings.lowered_protection(recorded)
    copy = settings.model_copy()
    copy._recorded_protection = recorded
    return copy


def lowered_protection(settings: Guarded, recorded: Protection | None = None) -> list[str]:
    """What the file lowers against the recorded protection (and prod's, for prod names).

    Raises:
        ProtectionLowered: lowered for a prod or prod-* name without a reason.
    """
    return check_unprotect(
        settings.environment,
        settings.file_protection,
        recorded if recorded is not None else settings._recorded_protection,
        settings.approval.unprotect,
        settings.source.environment_file or f"environments/{settings.environment}.toml",
    )


def exact_commit(settings: Guarded) -> str | None:
    """Why runs of this environment must deploy an exact commit (a checkout with edits is
    refused), or None when they need not."""
    if settings.protected or settings.approval_required:  # always: its file cannot opt out
        return "protected"
    return "set to exact_commit" if settings.approval.exact_commit else None


def confirm_destroy(settings: Guarded, confirmed: bool) -> None:
    """Refuse to destroy a protected (prod) environment unless `confirmed`.

    Raises:
        ConfirmationRequired: naming the environment and how to confirm.
    """
    if settings.protected and not confirmed:
        raise ConfirmationRequired(
            f"environment {settings.environment!r} is {settings.environment_kind.value}: destroying it "
            "needs explicit confirmation (CLI: --yes; flow parameter: confirm=true). "
            "Nothing was changed."
        )


def confirm_database_deletable(settings: Guarded) -> None:
    """Refuse, before anything is deleted, to destroy a database with deletion protection on.

    Raises:
        DeletionProtected: naming the environment, the setting and how to lift it.
    """
    recorded = settings._recorded_protection
    if not settings.deletion_protection and not (recorded and recorded.deletion_protection):
        return
    raise DeletionProtected(
        f"the database of {settings.environment!r} has RDS deletion protection on (its "
        f"{settings.environment_kind.value} kind, or `deletion_protection` under [database] in "
        f"its file): a destroy would fail at the database after the app was already gone. "
        f"Lift it first: set `deletion_protection = false` under [database] in "
        f"{settings.source.environment_file or 'its environment file'}, run `up --env "
        f"{settings.environment} --stacks database`, then destroy. Nothing was deleted."
    )


def approval_required(settings: Guarded) -> bool:
    """Whether `up` waits for approval of its plan ([approval] required, else the kind; on
    while the protection its last successful `up` recorded asks for it)."""
    recorded = settings._recorded_protection
    return settings.file_protection.approval or (recorded is not None and recorded.approval)


def approval_rules(settings: Guarded) -> tuple[tuple[str, ...], int, bool] | None:
    """The signed approvals the environment's file asks for: (approvers, approvals needed,
    whether the requester may approve); None when it names no approvers (anyone who reaches the
    gate decides, unsigned)."""
    approval = settings.approval
    if not approval.approvers:
        return None
    may = approval.requester_may_approve
    if may is None:
        may = settings.environment_kind is not EnvironmentKind.PROD
    return tuple(approval.approvers), approval.approvals_needed or 1, may
