"""Whether an environment was ever deployed, whether it holds anything, and whether its stacks'
state is still where the records say it is: read from the records and the stacks' checkpoints in
the backend, no `pulumi` process; and the local cloud serving it."""

from __future__ import annotations

import time
from collections.abc import Iterable

from stackflow.backends import backend_for, mask_url
from stackflow.dag import StackGraph
from stackflow.engine import Engine
from stackflow.environment_records import read
from stackflow.errors import SettingsError, StackflowError
from stackflow.records import Records
from stackflow.settings import Settings
from stackflow.status.records import last_success
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


class StateLost(StackflowError, ValueError):
    """An `up` of stacks whose records say they were deployed while the backend holds no state
    for them: their resources may still be in the cloud, and an `up` would make a second copy."""


def ensure_state_kept(
    settings: Settings, engine: Engine, graph: StackGraph, records: Records, names: Iterable[str]
) -> None:
    """Refuse an `up` when a stack it runs or reads was last changed successfully by an `up`
    (its record says so) and the backend holds no checkpoint for it. The records are read first,
    then only those stacks' checkpoints (no `pulumi` process); `--recreate` skips this.

    Raises:
        StateLost: naming each such stack, when it was deployed, the backend, and how to restore
            the state or deploy anew.
    """
    wanted = set(names)
    for name in list(wanted):
        wanted |= graph.ancestors(name)
    lost: list[str] = []
    for stack in [s for s in graph.stacks if s in wanted]:
        success = last_success(records, settings.environment, stack)
        if success is None or success.get("operation") != "up":
            continue  # never deployed, or destroyed: no state is expected
        if engine.state(graph.bare_spec(settings, stack)) is None:
            at = success.get("at")
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(at)) if at else "an earlier run"
            lost.append(f"{settings.environment}/{stack} (deployed {when} UTC)")
    if not lost:
        return
    url = settings.resolved_backend_url
    raise StateLost(
        f"the state of {', '.join(lost)} is gone from the backend {mask_url(url)}, while "
        f"stackflow's records in {records.where} say the last successful change of each was an "
        "`up`: its resources may still be in the cloud, and an `up` would create a second copy "
        "beside them. Nothing was changed.",
        what_to_do=f"restore the state: {backend_for(url).restore(url)}, then run `up` again. "
        f"To deploy anew beside what is left in the cloud instead, run `up --env "
        f"{settings.environment} --recreate` (a synced environment: run its sync deployment "
        "with recreate set) and "
        "delete the old resources yourself",
    )
