"""`python flows/run.py server start|stop|status`: the local Prefect server the CLI starts itself
when PREFECT_API_URL is unset (`stop` stops the local cloud too), and starting it for a run."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from stackflow.errors import StackflowError


def use_local_prefect(settings: Any) -> None:
    """With no PREFECT_API_URL, run against the project's own local server (started once, reused;
    SQLite unless this state folder runs one in team mode). Runs send heartbeats either way."""
    api_url = os.environ.get("PREFECT_API_URL")
    if api_url:
        auth = os.environ.get("PREFECT_API_AUTH_STRING")
        _check_reachable(api_url, auth)
        point_prefect_at(api_url, auth)
        return
    from stackflow.localprefect import ensure_local_prefect

    def progress(text: str) -> None:
        print(text, file=sys.stderr)  # stdout is the summary's (and --json's)

    server = ensure_local_prefect(settings.state_dir, settings.local_prefect_port, say=progress)
    point_prefect_at(server.api_url, server.auth_string)
    progress(f"Prefect: {server.url} (local server; `python flows/run.py server stop` stops it)")


class ServerUsage(StackflowError, ValueError):
    """`server` with a FILE it does not take, or without one it needs."""


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


def run(args: argparse.Namespace, settings: Any) -> int:
    """Start, stop or show the local Prefect server (`stop`: the local cloud too); 0."""
    from stackflow.backends import mask_url
    from stackflow.localcloud.server import cloud_status, stop_cloud
    from stackflow.localprefect import (
        ensure_local_prefect,
        healthy,
        server_record,
        stop_local_prefect,
    )

    url = f"http://127.0.0.1:{settings.local_prefect_port}"
    say = (lambda _text: None) if args.json else print
    report: dict[str, Any] = {}
    if args.action == "automation":
        return install_on_team_server(args, say)
    if (args.file is not None) != (args.action in ("backup", "restore")):
        raise ServerUsage(
            f"server {args.action} takes a FILE"
            if args.file is None
            else f"server {args.action} takes no FILE (only backup and restore do)"
        )
    if args.action in ("backup", "restore"):
        from cli.commands import backup

        return backup.run(args, settings)
    if args.action == "start":
        quiet = (lambda text: print(text, file=sys.stderr)) if args.json else print
        server = ensure_local_prefect(
            settings.state_dir, settings.local_prefect_port, say=quiet, database=args.database
        )
        report["prefect"] = {"url": server.url, "running": True, "database": server.database}
        say(f"Prefect UI: {server.url} (on {server.database})")
        if server.database == "postgres":
            team = server_record(settings.state_dir) or {}
            report["team"] = {
                "backend_url": mask_url(str(team.get("backend_url"))),
                "records_url": mask_url(str(team.get("records_url"))),
            }
            for line in team_lines(server.api_url, team, settings):
                say(line)
    elif args.action == "stop":
        stopped = stop_local_prefect(settings.state_dir)
        report["prefect"] = {"url": url, "stopped": stopped}
        say(f"Prefect: {'stopped' if stopped else 'no local server was running'}")
        stopped = stop_cloud(settings.localcloud_root)
        report["local_cloud"] = {"stopped": stopped}
        say(f"local cloud: {'stopped' if stopped else 'no local cloud server was running'}")
    else:
        record = server_record(settings.state_dir) or {}
        database = str(record.get("database", "sqlite")) if record else None
        auth = None
        if database == "postgres":
            from stackflow.localprefect import auth_string

            auth = auth_string(settings.state.prefect)
        running = healthy(url, auth_string=auth)
        report["prefect"] = {"url": url, "running": running, "database": database}
        say(
            f"Prefect {url}: {'running' if running else 'not running'}"
            + (f" (on {database})" if database else "")
        )
        report["backend_url"] = mask_url(settings.resolved_backend_url)
        report["records_url"] = mask_url(settings.resolved_records_url)
        say(f"Pulumi backend: {report['backend_url']}")
        say(f"stackflow's records: {report['records_url']}")
        if record.get("backend_url"):
            report["team"] = {
                "backend_url": mask_url(str(record["backend_url"])),
                "records_url": mask_url(str(record.get("records_url"))),
            }
        cloud = cloud_status(settings.localcloud_root)
        report["local_cloud"] = {"url": cloud.url if cloud else None, "running": bool(cloud)}
        say(f"local cloud: {f'running at {cloud.url}' if cloud else 'not running'}")
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    return 0


def install_on_team_server(args: argparse.Namespace, say: Any) -> int:
    """`server automation`: the zombie automation on the server PREFECT_API_URL names (a team's
    own server; those the project starts get it themselves); 0, or 2 without PREFECT_API_URL."""
    from prefect.client.orchestration import SyncPrefectClient

    from stackflow.crashes import AUTOMATION_NAME, install_zombie_automation

    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        print("error: set PREFECT_API_URL to the team's Prefect server first", file=sys.stderr)
        return 2
    auth = os.environ.get("PREFECT_API_AUTH_STRING") or None
    with SyncPrefectClient(api_url, auth_string=auth) as client:
        created = install_zombie_automation(client)
    say(f"automation {AUTOMATION_NAME!r} {'installed' if created else 'already installed'}")
    if args.json:
        print(json.dumps({"automation": AUTOMATION_NAME, "created": created}, sort_keys=True))
    return 0


def team_lines(api_url: str, team: dict[str, Any], settings: Any) -> list[str]:
    """What a worker or a teammate's shell on this machine sets to use the team-mode server."""
    auth_file = settings.state.prefect / "auth"
    return [
        "Team mode on this machine: Prefect, the Pulumi state and stackflow's records on the "
        "project's PostgreSQL. For every worker and shell here:",
        f"  export PREFECT_API_URL={api_url}",
        f'  export PREFECT_API_AUTH_STRING="$(cat {auth_file})"',
        f"  export STACKFLOW_BACKEND_URL='{team.get('backend_url')}'",
        "  export STACKFLOW_STATE_PASSPHRASE=...   # one passphrase for the whole team",
        f"  export STACKFLOW_CHECKOUT={settings.project_dir}   # where the runs' pull step goes",
        f"  export STACKFLOW_LOCALCLOUD_DIR={settings.localcloud_root}   # the local cloud: one for all",
        "Then each worker, with a state folder of its own (caches and logs only):",
        "  STACKFLOW_STATE_DIR=<its folder> prefect worker start --pool stackflow --limit 1",
    ]
