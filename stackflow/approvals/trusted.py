"""An environment's signed-approval rules as this machine reads them: its `[approval]` approvers
and counts, with the allowed signers read from their trusted place (a path on this machine or a
file on a git ref, never the commit being approved) and the requester of this run. Free of
Prefect, so a command line refuses a run that cannot be checked before it starts anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackflow.approvals.rules import Requester, Tally
from stackflow.approvals.signatures import ssh_keygen
from stackflow.approvals.signers import read_signers
from stackflow.audit.who import UNKNOWN, current_actor
from stackflow.config.guards import approval_rules
from stackflow.config.sources import variable
from stackflow.errors import SettingsError

if TYPE_CHECKING:
    from stackflow.settings import Settings

SIGNERS_VARIABLE = variable(("approval", "allowed_signers"))


@dataclass(frozen=True)
class SignedRules:
    """The environment's approval rules with the allowed signers read from their trusted place."""

    approvers: tuple[str, ...]
    needed: int
    requester_may_approve: bool
    allowed_signers: bytes
    requester: Requester

    def tally(self) -> Tally:
        return Tally(self.approvers, self.needed, self.requester, self.requester_may_approve)


def signed_rules(settings: Settings) -> SignedRules | None:
    """The signed-approval rules of the environment (None: its file names no approvers).

    Raises:
        SettingsError: approvers are named but this machine says no allowed signers file, or
            that file cannot be read.
    """
    rules = approval_rules(settings)
    if rules is None:
        return None
    source = settings.approval.allowed_signers
    if not source:
        raise SettingsError(
            f"the file of {settings.environment} names approvers under [approval], but this "
            f"machine sets no {SIGNERS_VARIABLE}: nobody's signature can be checked. Nothing "
            "was changed.",
            what_to_do=f"set {SIGNERS_VARIABLE} to the allowed signers file (an absolute path, "
            "or refs/heads/main:.stackflow/allowed_signers); see docs/concepts/approvals.md",
        )
    ssh_keygen()  # a machine that cannot check signatures says so before anything is planned
    signers = read_signers(source, settings.project_dir, SIGNERS_VARIABLE)
    actor = current_actor(settings.project_dir)
    requester = Requester("" if actor.name == UNKNOWN else actor.name, actor.via)
    return SignedRules(*rules, signers, requester)
