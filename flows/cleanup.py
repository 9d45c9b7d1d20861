"""The cleanup flow: destroy ephemeral environments (pr-123, ...) whose TTL has passed."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.events import emit_event
from prefect.logging import get_run_logger

from flows.pipeline import PipelineRequest, run_pipeline
from pipeline.graph import GRAPH
from stackflow.engine import Operation, get_engine
from stackflow.environments import forget, list_environments
from stackflow.graph import bare_spec
from stackflow.settings import get_settings


@flow(name="cleanup-expired", log_prints=False, persist_result=False)
def cleanup_expired(dry_run: bool = False) -> dict[str, Any]:
    """Destroy every ephemeral environment whose TTL has passed, then remove its stacks.

    Args:
        dry_run: only list what would be destroyed.
    """
    logger = get_run_logger()
    settings = get_settings(strict=False)
    expired = [r for r in list_environments(settings.state_dir) if r.expired()]
    if not expired:
        logger.info("no ephemeral environment has passed its TTL")
    destroyed: list[str] = []
    for record in expired:
        logger.info(
            "%s expired (ephemeral, TTL %.1f h)%s",
            record.name,
            record.ttl_hours or 0,
            ": dry run, left alone" if dry_run else ": destroying",
        )
        if dry_run:
            continue
        env_settings = get_settings(record.name, strict=False)
        run_pipeline(
            PipelineRequest(environment=record.name, operation=Operation.DESTROY), env_settings
        )
        engine = get_engine(env_settings)
        for stack in GRAPH.stacks:
            engine.remove(bare_spec(env_settings, stack))
        forget(settings.state_dir, record.name)
        destroyed.append(record.name)
        emit_event(
            event="stackflow.environment.expired",
            resource={
                "prefect.resource.id": f"stackflow.environment.{record.name}",
                "prefect.resource.name": record.name,
                "stackflow.environment": record.name,
            },
            payload={"ttl_hours": record.ttl_hours, "created": record.created},
        )
    return {"expired": [r.name for r in expired], "destroyed": destroyed, "dry_run": dry_run}
