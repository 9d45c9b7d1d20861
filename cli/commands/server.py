"""`python flows/run.py server start|stop|status`: the local Prefect server the CLI starts itself
when PREFECT_API_URL is unset (`stop` stops the local cloud too), and starting it for a run."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def use_local_prefect(settings: Any) -> None:
    """With no PREFECT_API_URL, run against the project's own local server (started once, reused)."""
    if os.environ.get("PREFECT_API_URL"):
        return
    from stackflow.localprefect import ensure_local_prefect

    def progress(text: str) -> None:
        print(text, file=sys.stderr)  # stdout is the summary's (and --json's)

    server = ensure_local_prefect(settings.state_dir, settings.local_prefect_port, say=progress)
    point_prefect_at(server.api_url)
    progress(f"Prefect: {server.url} (local server; `python flows/run.py server stop` stops it)")


def point_prefect_at(api_url: str) -> None:
    """Make this process's Prefect client (every thread's) talk to `api_url`.

    Prefect reads its settings when it is imported, and the cheap refusals may have imported it
    already (the graph's tasks): its global settings are rebuilt, or runs would start a temporary
    server of their own. The variable is Prefect's own, and reaches the flow run's threads.
    """
    os.environ["PREFECT_API_URL"] = api_url
    if "prefect" in sys.modules:
        import prefect.context

        prefect.context.refresh_global_settings_context()


def run(args: argparse.Namespace, settings: Any) -> int:
    """Start, stop or show the local Prefect server (`stop`: the local cloud too); 0."""
    from stackflow.localcloud.server import cloud_status, stop_cloud
    from stackflow.localprefect import ensure_local_prefect, healthy, stop_local_prefect

    url = f"http://127.0.0.1:{settings.local_prefect_port}"
    say = (lambda _text: None) if args.json else print
    report: dict[str, Any] = {}
    if args.action == "start":
        quiet = (lambda text: print(text, file=sys.stderr)) if args.json else print
        server = ensure_local_prefect(settings.state_dir, settings.local_prefect_port, say=quiet)
        report["prefect"] = {"url": server.url, "running": True}
        say(f"Prefect UI: {server.url}")
    elif args.action == "stop":
        stopped = stop_local_prefect(settings.state_dir)
        report["prefect"] = {"url": url, "stopped": stopped}
        say(f"Prefect: {'stopped' if stopped else 'no local server was running'}")
        stopped = stop_cloud(settings.localcloud_root)
        report["local_cloud"] = {"stopped": stopped}
        say(f"local cloud: {'stopped' if stopped else 'no local cloud server was running'}")
    else:
        running = healthy(url)
        report["prefect"] = {"url": url, "running": running}
        say(f"Prefect {url}: {'running' if running else 'not running'}")
        cloud = cloud_status(settings.localcloud_root)
        report["local_cloud"] = {"url": cloud.url if cloud else None, "running": bool(cloud)}
        say(f"local cloud: {f'running at {cloud.url}' if cloud else 'not running'}")
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    return 0
