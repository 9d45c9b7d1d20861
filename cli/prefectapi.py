"""The Prefect API a run reports to: the one PREFECT_API_URL names (checked before the run
starts), else the project's local server, started on first use and reused after."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from stackflow.errors import SettingsError, StackflowError, echo

if TYPE_CHECKING:
    from stackflow.settings import Settings


class PrefectApiUrlError(SettingsError):
    """PREFECT_API_URL is set to something that is not the address of a Prefect API."""


def api_url_set() -> str | None:
    """PREFECT_API_URL when it is set (None: unset, the project's local server is used).

    Raises:
        PrefectApiUrlError: it is not an http(s) URL with a host (what it holds repeated short).
    """
    from urllib.parse import urlsplit

    from stackflow.backends import mask_url

    value = os.environ.get("PREFECT_API_URL")
    if not value:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (parsing the port is part of the check)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        usable = False
    if not usable:
        raise PrefectApiUrlError(
            f"PREFECT_API_URL={echo(mask_url(value))} is not the address of a Prefect API; "
            "accepted: http(s)://<host>[:port]/api. Nothing was changed.",
            what_to_do="set PREFECT_API_URL to your Prefect server's API (such as "
            "http://prefect-host:4200/api), or unset it to use this project's local server",
        )
    return value


def use_local_prefect(settings: Settings) -> None:
    """With no PREFECT_API_URL, run against the project's own local server (started once, reused;
    SQLite unless this state folder runs one in team mode). Runs send heartbeats either way.

    Raises:
        PrefectApiUrlError: PREFECT_API_URL is not a URL.
        PrefectUnreachable: it does not answer.
    """
    api_url = api_url_set()
    if api_url:
        auth = os.environ.get("PREFECT_API_AUTH_STRING")
        _check_reachable(api_url, auth)
        point_prefect_at(api_url, auth)
        install_notices(settings, api_url, auth)
        return
    from stackflow.localprefect import ensure_local_prefect

    def progress(text: str) -> None:
        print(text, file=sys.stderr)  # stdout is the summary's (and --json's)

    server = ensure_local_prefect(settings.state_dir, settings.local_prefect_port, say=progress)
    point_prefect_at(server.api_url, server.auth_string)
    install_notices(settings, server.api_url, server.auth_string)
    progress(f"Prefect: {server.url} (local server; `python flows/run.py server stop` stops it)")


def install_notices(settings: Settings, api_url: str, auth: str | None) -> None:
    """With `[notifications] block` set, the notification automations on the server a run
    reports to, installed or brought up to date (nothing is asked of it otherwise).

    Raises:
        NotificationBlockMissing: the block is not on that server (before the run starts).
    """
    if settings.notifications.block is None:
        return
    from prefect.client.orchestration import SyncPrefectClient

    from stackflow.notifications import install_notifications

    with SyncPrefectClient(api_url, auth_string=auth) as client:
        for line in install_notifications(client, settings.notifications.block):
            print(line, file=sys.stderr)


def use_local_cloud(settings: Settings) -> None:
    """On the local cloud, its server (started now when it is not running), said on stderr as
    the Prefect server is: the first run of a machine starts both."""
    if settings.cloud != "local":
        return
    from stackflow.localcloud.server import cloud_status, ensure_cloud_for

    running = cloud_status(settings.localcloud_root)
    if running is None:
        print(f"starting the local cloud on 127.0.0.1:{settings.localcloud.port}", file=sys.stderr)
    server = running or ensure_cloud_for(settings)
    print(
        f"local cloud: {server.url} (moto on loopback, not AWS; "
        "`python flows/run.py server stop` stops it)",
        file=sys.stderr,
    )


class PrefectUnreachable(StackflowError):
    """The Prefect API a command is pointed at does not answer."""


def _check_reachable(api_url: str, auth: str | None) -> None:
    """Name the Prefect API and what to do when it does not answer, before any run starts.

    Raises:
        PrefectUnreachable: naming PREFECT_API_URL (masked) and the two ways on.
    """
    from stackflow.backends import mask_url
    from stackflow.localprefect import healthy

    base = api_url.rstrip("/").removesuffix("/api")
    if healthy(base, timeout=5.0, auth_string=auth):
        return
    raise PrefectUnreachable(
        f"the Prefect API at PREFECT_API_URL={mask_url(api_url)} does not answer (or refuses "
        "its credentials, PREFECT_API_AUTH_STRING): start that server or correct the URL, or "
        "unset PREFECT_API_URL to run against this project's local server. Nothing was changed."
    )


def point_prefect_at(api_url: str, auth: str | None = None) -> None:
    """Make this process's Prefect client (every thread's) talk to `api_url` and send heartbeats,
    through Prefect's own settings (never this process's environment, which children inherit).

    Prefect reads its settings when it is imported, and the cheap refusals may have imported it
    already (the graph's tasks): the settings of this context and the global ones (threads
    without a context of their own, such as the Automation API's output readers) both change.
    """
    import prefect.context
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    )

    from stackflow.crashes import HEARTBEAT_S, stop_heartbeats_promptly

    stop_heartbeats_promptly()
    updates: dict[Any, Any] = {PREFECT_API_URL: api_url}
    if auth:
        updates[PREFECT_API_AUTH_STRING] = auth
    if prefect.context.get_settings_context().settings.flows.heartbeat_frequency is None:
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = HEARTBEAT_S
    settings = prefect.context.get_settings_context().settings.copy_with_update(updates=updates)
    context = prefect.context.SettingsContext(
        profile=prefect.context.get_settings_context().profile, settings=settings
    )
    context.__enter__()  # for the rest of this command (the flow run's thread copies it)
    prefect.context.GLOBAL_SETTINGS_CONTEXT = context
