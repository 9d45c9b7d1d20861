"""`python flows/run.py server start|stop|status|automation|backup|restore`: the local Prefect
server the CLI starts itself when PREFECT_API_URL is unset (`stop` stops the local cloud too)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.options import json_object
from stackflow.errors import StackflowError

if TYPE_CHECKING:
    from stackflow.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the server command's options to `parser`."""
    json_object(parser)
    parser.add_argument(
        "action",
        choices=("start", "stop", "status", "automation", "backup", "restore"),
        help="what to do (automation: install the crashed-run automation on the server "
        "PREFECT_API_URL names, a team's own; backup FILE / restore FILE: every database of the "
        "project's PostgreSQL, team mode on this machine)",
    )
    parser.add_argument(
        "file",
        nargs="?",
        type=Path,
        metavar="FILE",
        help="backup, restore: the backup file (written 0600; a restore replaces exactly the "
        "databases it holds, with the Prefect server stopped)",
    )
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgres"),
        help="start: the server's database. sqlite (the default: one person) or postgres (team "
        "mode on this machine: the project's own PostgreSQL, which also holds the Pulumi state "
        "and stackflow's records; Prefect's basic auth on)",
    )


class ServerUsage(StackflowError, ValueError):
    """`server` with a FILE it does not take, or without one it needs."""


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Start, stop or show the local Prefect server (`stop`: the local cloud too); 0."""
    from stackflow.backends import mask_url
    from stackflow.localcloud.server import cloud_status, stop_cloud
    from stackflow.localprefect import (
        ensure_local_prefect,
        healthy,
        ready,
        server_record,
        stop_local_prefect,
    )

    url = f"http://127.0.0.1:{settings.local_prefect_port}"
    say = (lambda _text: None) if args.json else print
    report: dict[str, Any] = {}
    if args.action == "automation":
        return install_on_team_server(args, settings, say)
    if (args.file is not None) != (args.action in ("backup", "restore")):
        raise ServerUsage(
            f"server {args.action} takes a FILE"
            if args.file is None
            else f"server {args.action} takes no FILE (only backup and restore do)"
        )
    if args.action in ("backup", "restore"):
        from cli.commands.backup import run as backup_or_restore

        return backup_or_restore(args, settings)
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
        reaches = running and (database != "postgres" or ready(url, auth_string=auth))
        report["prefect"] = {
            "url": url,
            "running": running,
            "database": database,
            "database_answers": reaches if running else None,
        }
        if reaches:
            state = "running"
        elif running:
            state = "running, but its database does not answer (`server start --database "
            state += "postgres` starts it again)"
        else:
            state = "not running"
        say(f"Prefect {url}: {state}" + (f" (on {database})" if database else ""))
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


def install_on_team_server(
    args: argparse.Namespace, settings: Settings, say: Callable[[str], object]
) -> int:
    """`server automation`: the zombie automation on the server PREFECT_API_URL names (a team's
    own server; those the project starts get it themselves), and the notification automations
    `[notifications] block` asks for (removed when it is unset); 0.

    Raises:
        ServerUsage: no PREFECT_API_URL (exit 2).
        NotificationBlockMissing: the block is not on that server (exit 2).
    """
    from prefect.client.orchestration import SyncPrefectClient

    from cli.prefectapi import api_url_set
    from stackflow.crashes import AUTOMATION_NAME, install_zombie_automation
    from stackflow.notifications import install_notifications

    api_url = api_url_set()
    if not api_url:
        raise ServerUsage("set PREFECT_API_URL to the team's Prefect server first")
    auth = os.environ.get("PREFECT_API_AUTH_STRING") or None
    with SyncPrefectClient(api_url, auth_string=auth) as client:
        created = install_zombie_automation(client)
        notices = install_notifications(client, settings.notifications.block)
    say(f"automation {AUTOMATION_NAME!r} {'installed' if created else 'already installed'}")
    for line in notices:
        say(line)
    if args.json:
        print(
            json.dumps(
                {"automation": AUTOMATION_NAME, "created": created, "notifications": notices},
                sort_keys=True,
            )
        )
    return 0


def team_lines(api_url: str, team: dict[str, Any], settings: Settings) -> list[str]:
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
