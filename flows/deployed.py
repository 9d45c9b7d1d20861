"""Whether an environment was ever deployed, and whether it holds anything: read from its record
and its stacks' checkpoints in the backend, no `pulumi` process; and the local cloud serving it."""

from __future__ import annotations

from stackflow.backends import mask_url
from stackflow.errors import SettingsError, StackflowError
from stackflow.records import Records
from stackflow.records.environments import read
from stackflow.settings import Settings
from tasks.context import RunContext


class EnvironmentNotFound(SettingsError):
    """An operation on an environment that was never deployed (no record, no state)."""


def ensure_known(ctx: RunContext, records: Records) -> None:
    """Refuse drift, refresh or destroy of an environment that never existed: no record of it and
    no stack of it in the backend (a typo must not read as "no drift").

    Raises:
        EnvironmentNotFound: naming the environment and where it looked.
    """
    settings = ctx.settings
    if read(records, settings.environment) is not None:
        return
    for stack in ctx.graph.stacks:
        if ctx.engine.state(ctx.graph.bare_spec(settings, stack)) is not None:
            return
    raise EnvironmentNotFound(
        f"environment {settings.environment!r} was never deployed on the "
        f"{settings.target_label}: no record of it in {records.where} and no stack of it in the "
        f"backend {mask_url(settings.resolved_backend_url)}. Check the name; `up` deploys it. "
        "Nothing was changed."
    )


# A stack's state always holds its root stack resource and its default provider.
_BOOKKEEPING_RESOURCES = 2


def holds_resources(ctx: RunContext) -> bool:
    """Whether any stack of the environment holds a resource in the backend (read, no CLI)."""
    for stack in ctx.graph.stacks:
        try:
            state = ctx.engine.state(ctx.graph.bare_spec(ctx.settings, stack))
        except StackflowError:
            return True  # cannot tell: keep the record (cleanup will look again)
        if state is not None and (state.resources > _BOOKKEEPING_RESOURCES or state.pending):
            return True
    return False


def serve_local_cloud(settings: Settings) -> None:
    """On the local cloud, make sure its server runs before the run starts; nothing elsewhere.

    A stack's engine call starts it when needed, but a run whose stacks are all skipped makes
    none, and its migrate and verify steps still reach the databases and load balancers the
    local cloud serves (after `server stop`, they waited for a database nobody served). When the
    server runs, this reads its record and checks its process: no request, no `pulumi`.

    Raises:
        CloudServerError: it could not be started (its port taken, its log's last lines).
    """
    if settings.cloud != "local":
        return
    from stackflow.localcloud.server import ensure_cloud_for

    ensure_cloud_for(settings)
