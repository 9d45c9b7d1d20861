"""`python flows/run.py cloud start|stop|status|ls|knobs`: the local cloud (moto on loopback), not AWS.

The table of commands (cli/commands/__init__.py) gives `cloud` these options and `run`. Nothing
heavy is imported until `run` is called, so `--help` stays fast. `ls` reuses the shared `--env/-e`
(dest `environment`) as its filter.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from stackflow.localcloud.inventory_row import Row
    from stackflow.localcloud.server import CloudServer
    from stackflow.settings import Settings

ACTIONS = ("start", "stop", "status", "ls", "knobs")
DEFAULT_PORT = 4566
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_COLUMNS = ("service", "kind", "name", "id", "state")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the cloud command's options to `parser` (which already has `--env/-e`)."""
    parser.add_argument(
        "action",
        choices=ACTIONS,
        help="start, stop or show the local cloud server, list (ls) what it holds "
        "(ls --env NAME: one environment only), or show and set its latency and fault knobs",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    knobs = parser.add_mutually_exclusive_group()
    knobs.add_argument(
        "--set",
        metavar="SPEC",
        dest="knobs_set",
        help='knobs: replace every knob with this JSON spec, e.g. \'{"latency_s": {"database": 2}, '
        '"faults": [{"kind": "transient", "count": 2, "node": "app"}]}\'',
    )
    knobs.add_argument(
        "--clear", action="store_true", dest="knobs_clear", help="knobs: remove every knob"
    )


def _port(settings: Settings) -> int:
    return int(settings.localcloud.port)


def _where(port: int) -> str:
    return f"local cloud (moto on 127.0.0.1:{port})"


def table(rows: list[Row]) -> str:
    """Rows as an aligned table, one block per environment (rows already sorted)."""
    if not rows:
        return "  (no resources)"
    widths = {c: max(len(c), *(len(str(getattr(r, c)) or "-") for r in rows)) for c in _COLUMNS}

    def line(values: dict[str, str]) -> str:
        return "  " + "  ".join(f"{values[c]:<{widths[c]}}" for c in _COLUMNS).rstrip()

    lines: list[str] = []
    current: str | None = None
    for row in rows:
        if row.environment != current:
            current = row.environment
            count = sum(1 for r in rows if r.environment == current)
            title = "untagged" if current == "-" else f"environment {current}"
            if lines:
                lines.append("")
            lines.append(f"{title} ({count} resource{'s' * (count != 1)})")
            lines.append(line({c: c for c in _COLUMNS}))
        lines.append(line({c: str(getattr(row, c)) or "-" for c in _COLUMNS}))
    return "\n".join(lines)


def _row_dict(row: Row) -> dict[str, str]:
    return dict(row._asdict())


def run(
    args: argparse.Namespace,
    settings: Settings,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run `cloud <action>` as the parsed arguments say.

    Args:
        args: parsed options from `add_arguments` (plus the shared `environment`).
        settings: stackflow settings (state_dir, aws.region, localcloud.port).
        out: where the report goes (default stdout).
        err: where the one-line error goes (default stderr).

    Returns:
        0 on success; 1 when the local cloud could not be started, stopped or listed.
    """
    from cli.report import print_outcome
    from stackflow.errors import StackflowError

    out = out or sys.stdout
    err = err or sys.stderr

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    def failed(message: str, code: int) -> int:
        if args.json:  # the one JSON object of every outcome
            print_outcome(message, code, file=out)
        print(f"error: {message}", file=err, flush=True)
        return code

    progress: Callable[[str], object] = (lambda _t: None) if args.json else say
    if args.action != "knobs" and (args.knobs_set is not None or args.knobs_clear):
        return failed(
            f"--set and --clear belong to `cloud knobs`, not `cloud {args.action}`", EXIT_USAGE
        )
    try:
        return _run(args, settings, say, progress)
    except StackflowError as exc:
        return failed(str(exc), EXIT_FAILED)
    except OSError as exc:  # the server is recorded as running but does not answer
        return failed(f"the local cloud did not answer: {exc}", EXIT_FAILED)


def _run(
    args: argparse.Namespace,
    settings: Settings,
    say: Callable[[str], None],
    progress: Callable[[str], object],
) -> int:
    from stackflow.localcloud.server import cloud_status, ensure_cloud, stop_cloud

    port = _port(settings)
    region = str(settings.aws.region)
    if args.action == "stop":
        server = cloud_status(settings.localcloud_root)
        stopped = stop_cloud(settings.localcloud_root)
        where = _where(server.port if server else port)
        if args.json:
            say(json.dumps({"local_cloud": "moto", "stopped": stopped}))
        elif stopped:
            say(f"{where}: stopped, with its databases and app stand-ins (its journal is kept)")
        else:
            say(f"{where}: not running")
        return EXIT_OK
    if args.action == "start":
        server = ensure_cloud(settings.localcloud_root, port, region=region, say=progress)
        return _report(args, server, region, say)
    server = cloud_status(settings.localcloud_root)
    if server is None:
        if args.action == "ls":
            from stackflow.localcloud.server import CloudServerError

            raise CloudServerError(
                f"{_where(port)} is not running; start it with `python flows/run.py cloud start`"
            )
        if args.json:
            say(json.dumps({"local_cloud": "moto", "running": False, "port": port}))
        else:
            say(f"{_where(port)}: not running")
        return EXIT_OK
    if args.action == "ls":
        return _ls(args, server, region, say)
    if args.action == "knobs":
        return _knobs(args, server, say)
    return _report(args, server, region, say)


def _knobs(args: argparse.Namespace, server: CloudServer, say: Callable[[str], None]) -> int:
    """Show the knobs, or replace or clear them first (every plugin process sees the change)."""
    from stackflow.localcloud.knobs import KnobsError, clear_knobs, get_knobs, set_knobs

    if args.knobs_clear:
        clear_knobs(server.url)
    elif args.knobs_set is not None:
        try:
            raw = json.loads(args.knobs_set)
        except json.JSONDecodeError as exc:
            raise KnobsError(f"--set: not JSON ({exc.msg} at character {exc.pos})") from None
        set_knobs(server.url, raw)
    spec = get_knobs(server.url).dump()
    if args.json:
        say(json.dumps({"local_cloud": "moto", "url": server.url, "knobs": spec}))
        return EXIT_OK
    latency = spec.get("latency_s") or {}
    faults = spec.get("faults") or []
    say(f"{_where(server.port)}: {len(latency)} latency knob(s), {len(faults)} fault(s)")
    for selector, seconds in sorted(latency.items()):
        say(f"  latency {selector}: {seconds} s per resource operation")
    for fault in faults:
        where = ", ".join(f"{k}={v}" for k, v in fault.items() if k not in ("kind", "count"))
        count = "every call" if fault.get("count") is None else f"{fault['count']} call(s) left"
        say(f"  fault {fault['kind']}: {count}" + (f" ({where})" if where else ""))
    return EXIT_OK


def _report(
    args: argparse.Namespace, server: CloudServer, region: str, say: Callable[[str], None]
) -> int:
    """The status of a running server: resources, journal, data plane endpoints."""
    from stackflow.localcloud.context import CloudContext
    from stackflow.localcloud.inventory import list_resources

    rows = list_resources(server.url, region)
    ctx = CloudContext(server.url, region)
    health: dict[str, Any] = ctx.control("health")
    endpoints = ctx.dataplane()
    if args.json:
        say(
            json.dumps(
                {
                    "local_cloud": "moto",
                    "running": True,
                    "url": server.url,
                    "port": server.port,
                    "pid": server.pid,
                    "root": str(server.root),
                    "region": region,
                    "resources": len(rows),
                    "journal_entries": health.get("journal_entries"),
                    "dataplane": endpoints,
                }
            )
        )
        return EXIT_OK
    n = len(rows)
    say(f"{_where(server.port)}: running, {n} resource{'s' * (n != 1)}")
    say(
        f"  pid {server.pid}, {health.get('journal_entries', 0)} API calls in its journal, "
        f"files in {server.root}"
    )
    for name, db in sorted((endpoints.get("databases") or {}).items()):
        state = "running" if db.get("running") else "stopped"
        say(f"  database {name}: {db.get('host')}:{db.get('port')} ({state})")
    for name, lb in sorted((endpoints.get("load_balancers") or {}).items()):
        ports = ", ".join(str(p) for p in lb.get("ports") or []) or "no listeners"
        say(f"  load balancer {name}: {lb.get('host')} ({ports})")
    return EXIT_OK


def _ls(
    args: argparse.Namespace, server: CloudServer, region: str, say: Callable[[str], None]
) -> int:
    from stackflow.localcloud.inventory import list_resources

    environment = getattr(args, "environment", None) or None
    rows = list_resources(server.url, region, environment)
    if args.json:
        say(
            json.dumps(
                {
                    "local_cloud": "moto",
                    "url": server.url,
                    "environment": environment,
                    "resources": [_row_dict(r) for r in rows],
                }
            )
        )
        return EXIT_OK
    n = len(rows)
    scope = f", environment {environment}" if environment else ""
    say(f"{_where(server.port)}: {n} resource{'s' * (n != 1)}{scope}")
    say("")
    say(table(rows))
    return EXIT_OK
