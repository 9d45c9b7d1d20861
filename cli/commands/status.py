"""`python flows/run.py status [--env E] [--json] [--prometheus FILE]`: every environment found in
stackflow's records (beside the team's backend): whether it is ready and why not, the commit
deployed and its branch's head, the app's health, the last drift check, migrations, expiry, and
per stack its last operation (see `stackflow.status.report`). Reads the records only: no `pulumi`
process, no database, no Prefect server started."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackflow.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--prometheus",
        metavar="FILE",
        type=Path,
        help="also write the status in Prometheus's text format to FILE (atomically; for "
        "node_exporter's textfile collector: name it *.prom in its folder)",
    )


def _liveness(settings: Settings) -> Callable[[str], bool] | None:
    from cli.prefectapi import api_url_set
    from stackflow.localprefect import server_record
    from stackflow.status.live import prefect_liveness

    api = api_url_set()
    auth = os.environ.get("PREFECT_API_AUTH_STRING")
    if not api:
        found = server_record(settings.state_dir)
        if not found:
            return None
        api = f"{found['url']}/api"
        if found.get("database") == "postgres":
            from stackflow.localprefect import auth_string

            auth = auth_string(settings.state.prefect)
    return prefect_liveness(api, auth)


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(text)
    staging.replace(path)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the status (a table, or one JSON object); 0."""
    from stackflow.environment_records import records_of
    from stackflow.graphs import graph_of
    from stackflow.status.metrics import prometheus
    from stackflow.status.report import collect
    from stackflow.status.text import environment_lines

    records = records_of(settings)
    only = args.environment  # None: every environment
    found = collect(records, graph_of(settings).stacks, _liveness(settings), only=only)
    if args.prometheus is not None:
        write_atomically(args.prometheus, prometheus(found))
    if args.json:
        print(
            json.dumps(
                {"records": records.where, "environments": [e.as_dict() for e in found]},
                indent=2,
                sort_keys=True,
            )
        )
        return 0
    if not found:
        print(f"no environment is recorded in {records.where}" + (f" named {only}" if only else ""))
        return 0
    for e in found:
        print("\n".join(environment_lines(e)))
    print(f"(records: {records.where})", file=sys.stderr)
    return 0
