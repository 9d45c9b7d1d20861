"""The notification automations as data: one per kind of notice, each matching its one event on
an environment and sending once per event through the block it names, and each message rendered
by Prefect's own template engine from an event shaped as `flows.trail` emits it, every
placeholder filled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from stackflow.notifications import (
    APPROVAL_WAITING,
    DRIFT_FOUND,
    ENVIRONMENT_GONE,
    NAME_PREFIX,
    NOTICES,
    RUN_FAILED,
    SYNC_REFUSED,
    automation,
)

pytestmark = pytest.mark.unit

URL = "http://127.0.0.1:4200/runs/flow-run/1"
PAYLOADS: dict[str, dict[str, Any]] = {
    APPROVAL_WAITING: {
        "target": "local cloud",
        "round": 2,
        "summary": "networking: 3 to create; 1 pending migration",
        "ui_url": URL,
    },
    RUN_FAILED: {
        "operation": "up",
        "target": "AWS",
        "commit": "a" * 40,
        "stacks": ["database", "app"],
        "error": "database: api error InvalidParameterValue",
        "ui_url": URL,
    },
    DRIFT_FOUND: {"operation": "drift", "target": "AWS", "stacks": ["networking"], "ui_url": None},
    ENVIRONMENT_GONE: {
        "what": "expired and was destroyed",
        "why": "expired: its TTL of 24 h from its first deploy passed",
        "target": "local cloud",
        "ui_url": URL,
    },
    SYNC_REFUSED: {"commit": "b" * 40, "branch": "main", "why": "it locks zzz 1.0"},
}


def rendered(template: str, event_name: str) -> str:
    from prefect.server.events.schemas.events import ReceivedEvent
    from prefect.server.utilities.user_templates import render_user_template_sync

    event = ReceivedEvent(
        event=event_name,
        resource={
            "prefect.resource.id": "stackflow.environment.pr-7",
            "stackflow.environment": "pr-7",
        },
        payload=PAYLOADS[event_name],
        id=uuid4(),
        occurred=datetime.now(UTC),
    )
    return render_user_template_sync(template, {"event": event})


def test_one_automation_per_notice_each_once_per_event_through_the_block() -> None:
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import EventTrigger, Posture

    block = uuid4()
    made = [automation(n, block, "custom-webhook/ops") for n in NOTICES]
    assert [a.name for a in made] == [NAME_PREFIX + n.name for n in NOTICES]
    assert len({n.event for n in NOTICES}) == 5
    for notice, auto in zip(NOTICES, made, strict=True):
        trigger = auto.trigger
        assert isinstance(trigger, EventTrigger)
        assert trigger.expect == {notice.event}
        assert trigger.posture == Posture.Reactive
        assert (trigger.threshold, trigger.within) == (1, timedelta(0))
        assert trigger.match.get("prefect.resource.id") == ["stackflow.environment.*"]
        [action] = auto.actions
        assert isinstance(action, SendNotification) and action.block_document_id == block
        assert "custom-webhook/ops" in auto.description
    again = automation(NOTICES[0], block, "custom-webhook/ops")
    other = automation(NOTICES[0], uuid4(), "custom-webhook/ops")
    assert again.description == made[0].description != other.description  # a new block: replaced


@pytest.mark.parametrize("notice", NOTICES, ids=lambda n: n.event)
def test_each_message_renders_whole_from_its_event(notice: Any) -> None:
    subject = rendered(notice.subject, notice.event)
    body = rendered(notice.body, notice.event)
    assert "{{" not in subject + body and "{%" not in subject + body
    assert "pr-7" in subject and "\n" not in subject
    assert "Event " in body or "Run: " in body
    expected = {
        APPROVAL_WAITING: ("networking: 3 to create; 1 pending migration", URL),
        RUN_FAILED: ("database, app", "database: api error InvalidParameterValue", "a" * 40),
        DRIFT_FOUND: ("networking", "(no Prefect UI link)"),
        ENVIRONMENT_GONE: ("expired: its TTL of 24 h", URL),
        SYNC_REFUSED: ("b" * 40, "main", "it locks zzz 1.0"),
    }[notice.event]
    for text in expected:
        assert text in body, (text, body)
    if notice.event == ENVIRONMENT_GONE:
        assert subject == "stackflow: pr-7 expired and was destroyed"
    if notice.event == SYNC_REFUSED:
        assert subject == f"stackflow: the sync of pr-7 refused commit {'b' * 12}"
