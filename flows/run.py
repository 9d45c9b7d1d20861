"""stackflow's command line: `python flows/run.py <command> [options]`.

Runs the same Prefect flows the UI and schedules run. With no Prefect server configured it starts an
embedded one for the run. `--help` imports nothing heavy, so it answers at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, cast

from stackflow import exits
from stackflow.errors import echo

COMMANDS = {
    "up": "deploy the environment: networking, database, migrations, app, verification",
    "preview": "show what `up` would change, changing nothing",
    "refresh": "update state from what exists in the cloud",
    "destroy": "destroy the environment's stacks in reverse order",
    "drift": "check every stack for drift; exits 3 when drift is found",
    "outputs": "print the stacks' outputs (secrets masked)",
    "graph": "print the stack graph as Mermaid",
    "migrate": "run schema migrations against the environment's database or --database-url",
    "server": "start, stop or show the local Prefect server the CLI starts when PREFECT_API_URL is unset; stop also stops the local cloud",
    "cloud": "start, stop, show or list the local cloud (moto's AWS APIs on loopback, a MariaDB per database); `up` starts it on demand",
}
EXIT_FAILED, EXIT_USAGE, EXIT_DRIFT = exits.FAILED, exits.USAGE, exits.DRIFT


class _Once(argparse.Action):
    """An option that may be given once: a second value is refused, never "the last one wins"."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option} given twice: give it once")
        setattr(namespace, self.dest, values)


class _StackList(argparse.Action):
    """`--stacks a,b`; repeating it adds to the list (a union). An empty list is refused: leaving
    the option out is how to run every stack."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        names = [n.strip() for n in str(values).split(",")]
        if not any(names):
            parser.error(
                f"{option} {echo(str(values))} names no stack: leave it out to run every stack, "
                "or name some (comma-separated)"
            )
        if "" in names:
            parser.error(f"{option} {echo(str(values))} has an empty name between commas")
        chosen = list(getattr(namespace, self.dest, None) or [])
        setattr(namespace, self.dest, chosen + [n for n in names if n not in chosen])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python flows/run.py",
        description="Deploy a whole environment (networking, database, app) as one Prefect pipeline.",
        epilog="Settings come from STACKFLOW_* variables and .env (see README). "
        "By default the real Pulumi engine deploys to the local cloud (moto on loopback): "
        "nothing reaches AWS unless STACKFLOW_CLOUD=aws (or --cloud aws).\n\n" + exits.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, text in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=text,
            description=text,
            epilog=exits.help_text(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument(
            "--env",
            "-e",
            dest="environment",
            action=_Once,
            help="environment name (default: STACKFLOW_ENVIRONMENT or dev); give it once",
        )
        p.add_argument(
            "--cloud",
            choices=("local", "aws"),
            action=_Once,
            help="override STACKFLOW_CLOUD (default local: moto on loopback, never AWS)",
        )
        if name in ("up", "preview", "refresh", "destroy", "drift", "outputs"):
            p.add_argument(
                "--stacks",
                action=_StackList,
                help="comma-separated stacks to run (default: all); repeating it adds to the list",
            )
        if name in ("up", "preview", "refresh", "destroy", "drift"):
            p.add_argument(
                "--json",
                action="store_true",
                help="print the run's summary as one JSON object (progress goes to stderr)",
            )
        if name == "up":
            p.add_argument("--force", action="store_true", help="update stacks even if unchanged")
        if name == "destroy":
            p.add_argument(
                "--yes",
                "-y",
                action="store_true",
                help="confirm destroying a protected (prod) environment",
            )
        if name == "outputs":
            p.add_argument(
                "--json", action="store_true", help="print one JSON object keyed by stack"
            )
        if name in ("graph", "server"):
            p.add_argument("--json", action="store_true", help="print one JSON object")
        if name == "server":
            p.add_argument("action", choices=("start", "stop", "status"), help="what to do")
        if name == "migrate":
            from flows.migrate_cli import add_arguments

            add_arguments(p)
        if name == "cloud":
            from flows.cloud_cli import add_arguments as add_cloud_arguments

            add_cloud_arguments(p)
    return parser


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()  # so Prefect's workers print nothing after our last line
    sys.stdout.flush()  # the summary (stdout) before the reason (stderr), also when both are piped
    print(f"error: {message}", file=sys.stderr)
    return code


def _settings(args: argparse.Namespace) -> Any:
    if getattr(args, "cloud", None):
        os.environ["STACKFLOW_CLOUD"] = args.cloud
    if args.environment:
        os.environ["STACKFLOW_ENVIRONMENT"] = args.environment
    from stackflow.settings import get_settings

    return get_settings()


def _use_local_prefect(settings: Any) -> None:
    """With no PREFECT_API_URL, run against the project's own local server (started once, reused)."""
    if os.environ.get("PREFECT_API_URL"):
        return
    from stackflow.localprefect import ensure_local_prefect

    server = ensure_local_prefect(settings.state_dir, settings.local_prefect_port, say=print)
    os.environ["PREFECT_API_URL"] = server.api_url
    print(f"Prefect: {server.url} (local server; `python flows/run.py server stop` stops it)")


def _server(args: argparse.Namespace, settings: Any) -> int:
    """The local Prefect server the CLI starts itself (when PREFECT_API_URL is unset); `stop` stops
    the local cloud too."""
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


def _stacks(args: argparse.Namespace) -> list[str]:
    names: list[str] = list(getattr(args, "stacks", None) or [])
    from stackflow.graph import GRAPH

    GRAPH.select(names)  # raises UnknownStackError naming the accepted stacks
    return names


def print_summary(summary: dict[str, Any], as_json: bool = False) -> None:
    """A run's summary: the table, what a preview would change, retries, recoveries, the UI link.

    With `as_json`, one JSON object on stdout instead (secrets are masked in both).
    """
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return
    where = {
        "local cloud": "local cloud: moto on loopback, nothing was deployed to AWS",
        "AWS": "AWS",
    }.get(summary["target"], summary["target"])
    print(f"\n{summary['operation']} {summary['environment']}  [{where}]")
    header = f"{'stack':<11} {'status':<10} {'+':>3} {'~':>3} {'+-':>3} {'-':>3} {'=':>3} {'secs':>7}  note"
    print(header)
    print("-" * len(header))
    for s in summary["stacks"]:
        c = s["changes"]
        print(
            f"{s['stack']:<11} {s['status']:<10} {c['create']:>3} {c['update']:>3} {c['replace']:>3} "
            f"{c['delete']:>3} {c['same']:>3} {s['duration_s']:>7.2f}  {s['note']}"
        )
    for s in summary["stacks"]:
        for i, reason in enumerate(s.get("retries", []), 1):
            print(f"{s['stack']}: attempt {i} failed and was retried: {' '.join(reason.split())}")
        if s.get("healed"):
            print(f"{s['stack']}: {s['healed']}")
    for line in preview_lines(summary):
        print(line)
    print(
        f"engine operations: {len(summary['engine_calls'])}; wall time {summary['duration_s']:.2f}s"
    )
    if summary.get("ui_url"):
        print(f"Prefect UI: {summary['ui_url']}")


_SIGN = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}


def preview_lines(summary: dict[str, Any]) -> list[str]:
    """Per resource, what a preview would do and which properties change (values masked)."""
    lines: list[str] = []
    for s in summary["stacks"]:
        resources = s.get("resources") or []
        if not resources:
            continue
        lines.append(f"\n{summary['environment']}/{s['stack']}:")
        for r in resources:
            lines.append(f"  {_SIGN.get(r['change'], '?'):>2} {r['type']}  {r['name']}")
            for prop in r["properties"]:
                why = "  (forces replacement)" if prop["forces_replacement"] else ""
                if prop["kind"] == "add":
                    change = f"+ {_value(prop['new'])}"
                elif prop["kind"] == "delete":
                    change = f"- {_value(prop['old'])}"
                else:
                    change = f"{_value(prop['old'])} => {_value(prop['new'])}"
                lines.append(f"       {prop['name']}: {change}{why}")
    return lines


def _value(value: Any, limit: int = 70) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _run_flow(args: argparse.Namespace, settings: Any) -> int:
    # The same checks the flow makes (for the UI and schedules), before a flow run starts: no
    # failed run, no traceback in the output, nothing changed.
    from stackflow.environments import check_cloud
    from stackflow.errors import ConfirmationRequired, DeletionProtected, SettingsError

    try:
        check_cloud(settings)
        if args.command == "destroy":
            settings.confirm_destroy(args.yes)
            if "database" in (_stacks(args) or ["database"]):
                settings.confirm_database_deletable()
    except (ConfirmationRequired, DeletionProtected, SettingsError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    from flows.pipeline import FLOWS

    kwargs: dict[str, Any] = {"environment": settings.environment, "stacks": _stacks(args) or None}
    if args.command == "up":
        kwargs["force"] = args.force
    if args.command == "destroy":
        kwargs["confirm"] = args.yes
    from prefect.client.schemas.objects import State

    state = cast(State[Any], FLOWS[args.command](**kwargs, return_state=True))
    if state.is_completed():
        summary = state.result()
        from stackflow.localprefect import drain_prefect_queues

        drain_prefect_queues()
        print_summary(summary, getattr(args, "json", False))
        return 0
    from flows.pipeline import DriftDetected, PipelineError

    try:
        state.result()
    except PipelineError as exc:
        if exc.summary:
            print_summary(
                exc.summary, getattr(args, "json", False)
            )  # what did happen, then the reason on the last line
        return _fail(str(exc), EXIT_DRIFT if isinstance(exc, DriftDetected) else EXIT_FAILED)
    except Exception as exc:
        return _fail(str(exc))
    return _fail(f"flow ended in state {state.type.value}")


def _outputs(args: argparse.Namespace, settings: Any) -> int:
    from stackflow.engine import get_engine
    from stackflow.graph import GRAPH, bare_spec

    engine = get_engine(settings)
    wanted = _stacks(args) or GRAPH.stacks
    result = {
        n: {k: v.shown() for k, v in engine.outputs(bare_spec(settings, n)).items()}
        for n in wanted
        if n in GRAPH.stacks
    }
    if args.json:
        if settings.target_label != "AWS":  # stdout stays pure JSON; the caveat goes beside it
            print(f"{settings.target_label} outputs: nothing was deployed to AWS", file=sys.stderr)
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    where = f" [{settings.target_label}]" if settings.target_label != "AWS" else ""
    for stack, outs in result.items():
        print(f"{settings.environment}/{stack}{where}" + ("" if outs else ": not deployed"))
        for k, v in outs.items():
            print(f"  {k:<24} {v}")
    return 0


def _drop_event_loop_noise(unraisable: Any) -> None:
    """At exit, the garbage collector closes event loops Prefect's threads left behind, and asyncio
    prints "Exception ignored in BaseEventLoop.__del__ ... Invalid file descriptor" after our last
    line. That one is noise; anything else unraisable is reported as usual."""
    where = getattr(unraisable.object, "__qualname__", "")
    if where == "BaseEventLoop.__del__" and isinstance(unraisable.exc_value, ValueError):
        return
    sys.__unraisablehook__(unraisable)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "graph":
        from stackflow.graph import GRAPH

        if args.json:
            nodes = [
                {"name": n, "kind": GRAPH[n].kind.value, "upstream": list(GRAPH[n].upstream)}
                for n in GRAPH.order()
            ]
            print(json.dumps({"nodes": nodes}, indent=2))
        else:
            print(GRAPH.mermaid())
        return 0
    from stackflow.errors import StackflowError

    try:
        settings = _settings(args)
        if args.command == "outputs":
            return _outputs(args, settings)
        if args.command == "server":
            return _server(args, settings)
        if args.command == "cloud":
            from flows.cloud_cli import run as cloud_run

            return int(cloud_run(args, settings))
        if args.command == "migrate":
            from flows.migrate_cli import run as migrate_run
            from flows.pipeline import database_target

            return int(
                migrate_run(args, settings, target_from_stack=lambda: database_target(settings))
            )
        _use_local_prefect(settings)
        return _run_flow(args, settings)
    except StackflowError as exc:
        return _fail(str(exc), EXIT_USAGE if isinstance(exc, ValueError) else EXIT_FAILED)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


if __name__ == "__main__":
    sys.unraisablehook = _drop_event_loop_noise
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head` and the like
        sys.exit(0)
