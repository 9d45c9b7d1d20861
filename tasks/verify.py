"""The verify step: poll the app's health URL until it answers 2xx/3xx."""

from __future__ import annotations

import urllib.error
import urllib.request

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_run_logger

from stackflow.errors import StackError, TransientStackError


class HealthCheckFailed(TransientStackError):
    """The app did not answer its health check yet."""


@task(
    name="verify",
    retries=10,
    retry_delay_seconds=15,
    retry_jitter_factor=0.3,
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
        raise HealthCheckFailed("app", f"{target} answered {status}")
    logger.info("app healthy: %s answered %s", target, status)
    return status


def check_url(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise StackError("app", f"output url {url!r} is not an http(s) URL")
