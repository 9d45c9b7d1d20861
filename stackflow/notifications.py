"""Notifications a team can switch on: `[notifications] block = "<block type>/<block name>"` in
stackflow.toml names a Prefect notification block (Slack, Microsoft Teams, a custom webhook, ...),
and the project installs one Prefect automation per kind of notice on its server, each sending one
message through that block per event it matches:

    an approval waits       stackflow.approval.requested    the plan's summary, the run's link
    a run failed            stackflow.run.failed            the stacks, the error line, the link
    drift found             stackflow.drift.found           the drifted stacks, the link
    an environment gone     stackflow.environment.destroyed destroyed, or expired and destroyed
    a sync refused          stackflow.gitops.refused        the commit and why

Each event is emitted once per run (per round of an approval), never once per stack or per retry
(`flows.trail` emits them), and Prefect acts once per event (it drops an event it has seen and
an action it has done), so each reaches the block once. Automations are installed by
`python flows/run.py server automation`, by `deployments/serve.py` when it starts, and by every
command-line run on the server it reports to; a changed block or template replaces them, and no
block set removes them (`server automation`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from stackflow.errors import SettingsError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.events.schemas.automations import AutomationCore

APPROVAL_WAITING = "stackflow.approval.requested"
RUN_FAILED = "stackflow.run.failed"
DRIFT_FOUND = "stackflow.drift.found"
ENVIRONMENT_GONE = "stackflow.environment.destroyed"
SYNC_REFUSED = "stackflow.gitops.refused"
NAME_PREFIX = "stackflow: notify "
_ENV = "{{ event.resource['stackflow.environment'] }}"
_LINK = "{{ event.payload.ui_url or '(no Prefect UI link)' }}"
_ID = "Event {{ event.id }}."


@dataclass(frozen=True)
class Notice:
    """One kind of notification: the event it answers and the message it sends (Jinja, as
    Prefect renders it: `event` is the event, its payload what `flows.trail` put in it)."""

    name: str
    event: str
    subject: str
    body: str


NOTICES: tuple[Notice, ...] = (
    Notice(
        "an approval waits",
        APPROVAL_WAITING,
        f"stackflow: {_ENV} waits for approval",
        f"The plan for {_ENV} (round {{{{ event.payload.round }}}}, on "
        f"{{{{ event.payload.target }}}}) waits for a decision: {{{{ event.payload.summary }}}}.\n"
        f"Approve or reject it: {_LINK}\n{_ID}",
    ),
    Notice(
        "a run failed",
        RUN_FAILED,
        f"stackflow: {{{{ event.payload.operation }}}} of {_ENV} failed",
        f"{{{{ event.payload.operation }}}} of {_ENV} (on {{{{ event.payload.target }}}}, commit "
        f"{{{{ event.payload.commit or 'unknown' }}}}) failed at "
        f"{{{{ event.payload.stacks | join(', ') or 'a step' }}}}: {{{{ event.payload.error }}}}\n"
        f"Run: {_LINK}\n{_ID}",
    ),
    Notice(
        "drift found",
        DRIFT_FOUND,
        f"stackflow: drift in {_ENV}",
        f"A drift check of {_ENV} (on {{{{ event.payload.target }}}}) found "
        f"{{{{ event.payload.stacks | join(', ') }}}} changed outside stackflow. `up` puts them "
        f"back; a preview shows what it would change.\nRun: {_LINK}\n{_ID}",
    ),
    Notice(
        "an environment expired or was destroyed",
        ENVIRONMENT_GONE,
        f"stackflow: {_ENV} {{{{ event.payload.what }}}}",
        f"{_ENV} (on {{{{ event.payload.target }}}}) was destroyed: {{{{ event.payload.why }}}}.\n"
        f"Run: {_LINK}\n{_ID}",
    ),
    Notice(
        "a sync refused a commit",
        SYNC_REFUSED,
        f"stackflow: the sync of {_ENV} refused commit {{{{ event.payload.commit[:12] }}}}",
        f"The sync of {_ENV} refused commit {{{{ event.payload.commit }}}} of "
        f"{{{{ event.payload.branch }}}}: {{{{ event.payload.why }}}}\nNothing of it ran; it is held "
        f"until a newer commit.\n{_ID}",
    ),
)


class NotificationBlockMissing(SettingsError):
    """`[notifications] block` names no notification block on the Prefect server."""


def split_block(name: str) -> tuple[str, str]:
    """("slack-webhook", "ops") from "slack-webhook/ops" (the settings checked its form)."""
    kind, _, block = name.partition("/")
    return kind, block


def block_id(client: SyncPrefectClient, name: str) -> UUID:
    """The id of the notification block `name` ("<block type>/<block name>") on the server.

    Raises:
        NotificationBlockMissing: no such block, or not one that sends notifications.
    """
    from prefect.exceptions import ObjectNotFound

    kind, block = split_block(name)
    where = f"the Prefect server at {client.api_url}"
    try:
        found = client.read_block_document_by_name(block, kind, include_secrets=False)
    except ObjectNotFound:
        raise NotificationBlockMissing(
            f"[notifications] block = {name!r}: {where} has no {kind} block named {block!r}",
            what_to_do="create it (Prefect UI: Blocks, +), or correct the name in "
            "stackflow.toml (STACKFLOW_NOTIFICATIONS_BLOCK)",
        ) from None
    schema = found.block_schema
    if schema is not None and "notify" not in (schema.capabilities or []):
        raise NotificationBlockMissing(
            f"[notifications] block = {name!r} on {where} is not a notification block (a "
            "Slack, Microsoft Teams or custom webhook block, ...)"
        )
    return found.id


def automation(notice: Notice, block: UUID, block_name: str) -> AutomationCore:
    """The automation that sends `notice` through the block, once per event it matches."""
    from datetime import timedelta

    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    spec = {"event": notice.event, "subject": notice.subject, "body": notice.body}
    version = hashlib.sha256(json.dumps([spec, str(block)], sort_keys=True).encode()).hexdigest()[
        :12
    ]
    return AutomationCore(
        name=NAME_PREFIX + notice.name,
        description=(
            f"stackflow: a message through {block_name} when {notice.name} "
            f"({notice.event}); installed by stackflow [version {version}]"
        ),
        trigger=EventTrigger(
            expect={notice.event},
            match=ResourceSpecification({"prefect.resource.id": "stackflow.environment.*"}),
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[
            SendNotification(block_document_id=block, subject=notice.subject, body=notice.body)
        ],
    )


def install_notifications(client: SyncPrefectClient, block: str | None) -> list[str]:
    """Make the server's notification automations what `block` asks for: one per notice
    through it, or none when it is None. Unchanged ones are left as they are.

    Returns:
        One line per automation created, replaced or removed.

    Raises:
        NotificationBlockMissing: `block` names no notification block on the server.
    """
    wanted: dict[str, AutomationCore] = {}
    if block is not None:
        found = block_id(client, block)
        wanted = {a.name: a for a in (automation(n, found, block) for n in NOTICES)}
    said = []
    for name in [NAME_PREFIX + n.name for n in NOTICES]:
        existing = client.read_automations_by_name(name)
        want = wanted.get(name)
        if want is not None and [a.description for a in existing] == [want.description]:
            continue
        for old in existing:
            client.delete_automation(old.id)
        if want is not None:
            client.create_automation(want)
            said.append(f"automation {name!r} {'replaced' if existing else 'installed'}")
        elif existing:
            said.append(f"automation {name!r} removed (no [notifications] block set)")
    return said


def payload_text(value: Any, limit: int = 1000) -> str:
    """A text for an event's payload: one line, at most `limit` characters."""
    flat = " ".join(str(value).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
