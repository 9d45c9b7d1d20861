"""The `[notifications]` section: the Prefect notification block a team's notices go through
(see `stackflow.notifications`)."""

from __future__ import annotations

from pydantic import Field

from stackflow.config.section import Section


class NotificationSettings(Section):
    """Notifications a team can switch on (see `stackflow.notifications`)."""

    block: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9-]{0,62}$",
        description="Prefect notification block, as <block type>/<block name> (e.g. "
        "slack-webhook/ops, custom-webhook/oncall): an approval waiting, a run failed, drift "
        "found, an environment expired or destroyed, a sync refused are sent through it. Unset: "
        "no notifications.",
    )
