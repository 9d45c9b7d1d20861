"""The cleanup flow: destroy ephemeral environments (pr-123, ...) whose TTL has passed."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.logging import get_run_logger

from flows.events import emit_environment_event
from flows.pipeline import PipelineRequest, run_pipeline
from flows.trail import EXPIRED, environment_expired
from stackflow.engine import Operation, get_engine
from stackflow.environment_records import forget, list_environments, records_of
from stackflow.errors import StackflowError
from stackflow.gitops import sync as gitops
from stackflow.graphs import graph_of
from stackflow.settings import get_settings
from tasks.limits import prune_limits


class CleanupFailed(StackflowError):
    """Some expired environments could not be destroyed (each named, with why)."""


def destroy_environment(name: str, cloud: str, why: str) -> None:
    """Destroy every stack of `name` (this worker's code), remove the stacks from the backend,
    and forget the environment: its record, its status records and its concurrency limits.
    `why` says why, for the audit log and the notification.

    Raises:
        StackflowError: the destroy failed (named); what is recorded stays, for a later try.
    """
    env_settings = get_settings(name, cloud, strict=False)
    run_pipeline(
        PipelineRequest(environment=name, cloud=cloud, operation=Operation.DESTROY),
        env_settings,
        why,
    )
    engine = get_engine(env_settings)
    graph = graph_of(env_settings)
    for stack in graph.stacks:
        engine.remove(graph.bare_spec(env_settings, stack))
    records = records_of(env_settings)
    forget(records, name)
    prune_limits(name, graph.stacks)


def expiry(ttl_hours: float | None) -> str:
    """Why cleanup destroys an environment, as the audit log and the notification say it."""
    return f"{EXPIRED}its TTL of {ttl_hours or 0:g} h from its first deploy passed"


@flow(name="cleanup-expired", log_prints=False, persist_result=False)
def cleanup_expired(dry_run: bool = False) -> dict[str, Any]:
    """Destroy every ephemeral environment whose TTL has passed, then remove its stacks.

    Args:
        dry_run: only list what would be destroyed.
    """
    logger = get_run_logger()
    settings = get_settings(strict=False)
    records = records_of(settings)
    expired = [r for r in list_environments(records) if r.expired()]
    if not expired:
        logger.info("no ephemeral environment has passed its TTL")
    destroyed: list[str] = []
    failed: dict[str, str] = {}
    for record in expired:
        logger.info(
            "%s expired (ephemeral, TTL %.1f h from its first deploy)%s",
            record.name,
            record.ttl_hours or 0,
            ": dry run, left alone" if dry_run else ": destroying",
        )
        if dry_run:
            continue
        environment_expired(settings, record.name, record.ttl_hours)
        try:
            destroy_environment(record.name, record.cloud, expiry(record.ttl_hours))
        except StackflowError as exc:  # one environment's failure does not stop the others
            logger.error("%s: not destroyed: %s", record.name, exc)
            failed[record.name] = str(exc)
            continue
        gitops.note_expired(records, record.name)  # a review branch's next commit brings it back
        destroyed.append(record.name)
        emit_environment_event(
            "stackflow.environment.expired",
            record.name,
            {"ttl_hours": record.ttl_hours, "created": record.created},
        )
    if failed:
        raise CleanupFailed(
            f"{len(failed)} expired environment(s) could not be destroyed: "
            + "; ".join(f"{name}: {why}" for name, why in failed.items())
        )
    return {"expired": [r.name for r in expired], "destroyed": destroyed, "dry_run": dry_run}
