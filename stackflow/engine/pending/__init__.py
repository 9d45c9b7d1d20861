"""Pending creates: what an update interrupted between the cloud's create and Pulumi's record of
its id leaves in a stack's checkpoint, looked up in the cloud the engine deploys to.

Each type token has one lookup (a module per group of AWS services) that finds the resources the
create may have made: by physical name where the type has one (an RDS identifier, a role's name),
by its inputs and tags where it has none (a subnet by its VPC and CIDR). A match no stack's state
holds yet is imported with pulumi-aws's id for it; none, or a match already held, means the
create is cleared; two or more are ambiguous: cleared, and said with what to do. Nothing here
imports `pulumi.automation`: the engine edits the state (see
`stackflow.engine.automation.recovery`).
"""

from __future__ import annotations

from collections.abc import Collection

from stackflow.engine.pending import access, containers, databases, ec2, storage
from stackflow.engine.pending.cloud import CloudClients, LookupFailed, failure
from stackflow.engine.pending.model import Candidate, Lookup, PendingCreate, Verdict
from stackflow.engine.pending.report import Recovery

__all__ = [
    "LOOKUPS",
    "Candidate",
    "CloudClients",
    "LookupFailed",
    "PendingCreate",
    "Recovery",
    "Verdict",
    "look_up",
]

LOOKUPS: dict[str, Lookup] = {
    **ec2.LOOKUPS,
    **databases.LOOKUPS,
    **access.LOOKUPS,
    **containers.LOOKUPS,
    **storage.LOOKUPS,
}


def look_up(
    pending: PendingCreate, clients: CloudClients, held: Collection[tuple[str, str]]
) -> Verdict:
    """What to do with one pending create: the resource to import, or why it is cleared.

    Args:
        held: (type token, id or ARN) of every resource some stack's state holds.

    Raises:
        LookupFailed: the cloud did not answer (transient) or refused to (permanent); nothing
            may be cleared then, since the create may have succeeded.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    lookup = LOOKUPS.get(pending.type)
    if lookup is None:
        return Verdict(pending, looked=False)
    try:
        candidates = list(lookup(clients, pending.inputs))
    except (BotoCoreError, ClientError) as exc:
        raise failure(exc, pending.label, clients.where) from None
    free = [c.id for c in candidates if (pending.type, c.identity) not in held]
    taken = tuple(c.id for c in candidates if (pending.type, c.identity) in held)
    if len(free) == 1:
        return Verdict(pending, found=free[0])
    return Verdict(pending, ambiguous=tuple(free) if free else (), held=taken)
