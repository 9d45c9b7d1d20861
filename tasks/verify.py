"""The verify step: poll the app's health URL until it answers 2xx/3xx."""

from __future__ import annotations

import contextlib
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_run_logger

from programs.app import AppOutputs
from stackflow.engine import Operation
from stackflow.errors import StackError, TransientStackError
from stackflow.outcome import NodeOutcome, Status
from stackflow.plan import DeployPlan
from stackflow.progress import NodeState
from stackflow.records import RecordsError
from stackflow.retry import health_policy
from stackflow.status.history import record_health
from tasks.context import RunContext


class HealthCheckFailed(TransientStackError):
    """The app did not answer its health check yet (`answer`: its HTTP status, None if none)."""

    answer: int | None = None


@task(
    name="verify-health",
    retry_condition_fn=lambda task, run, state: True,  # every failure here is "not healthy yet"
    cache_policy=NO_CACHE,
    persist_result=False,
)
def verify_health(url: str, path: str, timeout_s: float = 10.0) -> int:
    """GET url+path and return the status; raises HealthCheckFailed (retried) otherwise."""
    logger = get_run_logger()
    target = url.rstrip("/") + path
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise HealthCheckFailed("app", f"{target} not reachable yet: {exc}") from None
    if status >= 400:
        unhealthy = HealthCheckFailed("app", f"{target} answered {status}")
        unhealthy.answer = status
        raise unhealthy
    logger.info("app healthy: %s answered %s", target, status)
    return status


def check_url(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise StackError("app", f"output url {url!r} is not an http(s) URL")


@task(name="verify", task_run_name="verify-{node}", cache_policy=NO_CACHE, persist_result=False)
def verify_step(
    ctx: RunContext,
    node: str,
    upstream: dict[str, NodeOutcome],
    plan: DeployPlan | None = None,
) -> NodeOutcome:
    """Poll the app's health URL until it answers healthy (retrying while it starts)."""
    ctx.check_not_cancelled(node)
    app = _app(upstream)
    ctx.publish(node, NodeState.RUNNING, detail=f"polling {app.url}")
    started = time.monotonic()
    path = ctx.settings.app.health_check_path
    try:
        check_url(app.url)
        status = verify_health.with_options(**health_policy().task_options())(app.url, path)
    except Exception as exc:
        detail = ctx.redactor(str(exc))
        _record_health(ctx, app.url, path, False, getattr(exc, "answer", None), detail)
        ctx.publish(node, NodeState.FAILED, detail=detail)
        raise
    note = f"{app.url}{path} answered {status}"
    _record_health(ctx, app.url, path, True, status, note)
    ctx.publish(node, NodeState.DONE, status=Status.HEALTHY, detail=note)
    took = time.monotonic() - started
    return NodeOutcome(node, Operation.UP, Status.HEALTHY, duration_s=took, note=note)


def _record_health(
    ctx: RunContext, url: str, path: str, healthy: bool, answer: int | None, detail: str
) -> None:
    """What `status` shows of the app's health: this answer, until the next verify (a record
    that cannot be written is the report's loss, never the step's failure)."""
    if ctx.records is None:
        return
    from prefect.runtime import flow_run

    with contextlib.suppress(RecordsError):
        record_health(
            ctx.records,
            ctx.settings.environment,
            url=url,
            path=path,
            healthy=healthy,
            answer=answer,
            detail=detail,
            commit=ctx.commit,
            run=str(flow_run.id) if flow_run.id else None,
        )


def _app(upstream: Mapping[str, NodeOutcome]) -> AppOutputs:
    """The upstream stack whose outputs are an app's (read by type, not name)."""
    for outcome in upstream.values():
        if isinstance(outcome.typed, AppOutputs):
            return outcome.typed
    raise StackError("verify", "no upstream stack has an app's outputs (url)")
