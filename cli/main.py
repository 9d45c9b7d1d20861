"""stackflow's command line: `python flows/run.py <command> [options]`.

Runs the same Prefect flows the UI and schedules run. With no Prefect server configured it starts an
embedded one for the run. `--help` imports nothing heavy, so it answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

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
RUN_COMMANDS = ("up", "preview", "refresh", "destroy", "drift")


def _seconds(text: str) -> float:
    """A --heartbeat value: seconds, 1 to 3600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{echo(text)} is not a number of seconds") from None
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{value:g} is out of range: use 1 to 3600 seconds")
    return value


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
        if name in RUN_COMMANDS:
            p.add_argument(
                "--json",
                action="store_true",
                help="print the run's summary as one JSON object (progress goes to stderr)",
            )
            p.add_argument(
                "--verbose",
                "-v",
                action="store_true",
                help="also show Prefect's and Pulumi's own log lines as they come (they always go "
                "to the log file in the state folder)",
            )
            p.add_argument(
                "--heartbeat",
                type=_seconds,
                default=30.0,
                metavar="SECONDS",
                help="without a terminal, a line for a stack that has run quietly this long "
                "(1-3600, default 30)",
            )
        if name == "up":
            p.add_argument("--force", action="store_true", help="update stacks even if unchanged")
            p.add_argument(
                "--yes",
                "-y",
                action="store_true",
                help="approve the plan of a protected (prod) environment: it is printed, recorded "
                "as approved at this command line, and applied",
            )
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


def _fail(message: str, code: int = EXIT_FAILED, hint: str = "") -> int:
    """The last lines of a command that did not succeed: why (one line), then what to do."""
    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()  # so Prefect's workers print nothing after our last line
    sys.stdout.flush()  # the summary (stdout) before the reason (stderr), also when both are piped
    print(f"error: {_one_line(message)}", file=sys.stderr)
    if hint:
        print(f"  what to do: {hint}", file=sys.stderr)
    return code


def _one_line(text: str, limit: int = 600) -> str:
    """A message on one line (the engine's reasons quote several of Pulumi's lines)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "… (all of it is in the log)"


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

    def progress(text: str) -> None:
        print(text, file=sys.stderr)  # stdout is the summary's (and --json's)

    server = ensure_local_prefect(settings.state_dir, settings.local_prefect_port, say=progress)
    os.environ["PREFECT_API_URL"] = server.api_url
    progress(f"Prefect: {server.url} (local server; `python flows/run.py server stop` stops it)")


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
            f"{c['delete']:>3} {c['same']:>3} {s['duration_s']:>7.2f}  {_one_line(s['note'], 110)}"
        )
    for s in summary["stacks"]:
        for i, reason in enumerate(s.get("retries", []), 1):
            print(f"{s['stack']}: attempt {i} failed and was retried: {' '.join(reason.split())}")
        if s.get("healed"):
            print(f"{s['stack']}: {s['healed']}")
    for line in preview_lines(summary):
        print(line)
    if summary.get("migrations") is not None:
        from stackflow.plan import migration_lines

        print()
        for line in migration_lines(summary["migrations"], statements=True):
            print(line)
    for approval in summary.get("approvals") or []:
        why = f": {approval['reason']}" if approval.get("reason") else ""
        print(
            f"approval (round {approval['round']}): {approval['decision']} via "
            f"{approval['via']} at {approval['decided_at']}{why}"
        )
    print(
        f"engine operations: {len(summary['engine_calls'])}; wall time {summary['duration_s']:.2f}s"
    )
    if summary.get("ui_url"):
        print(f"Prefect UI: {summary['ui_url']}")


def preview_lines(summary: dict[str, Any]) -> list[str]:
    """Per resource, what a preview would do and which properties change (values masked)."""
    from stackflow.plan import resource_lines

    lines: list[str] = []
    for s in summary["stacks"]:
        resources = s.get("resources") or []
        if resources:
            lines.append(f"\n{summary['environment']}/{s['stack']}:")
            lines.extend(resource_lines(resources))
    return lines


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
    gated = args.command == "up" and settings.approval_required
    if gated and not args.yes and (args.json or not sys.stdin.isatty()):
        return _fail(
            f"{settings.environment} is a protected environment: `up` shows its plan and waits "
            "for approval, and there is no terminal to ask"
            + (" (--json is for scripts)" if args.json else ""),
            EXIT_USAGE,
            f"run it in a terminal to see the plan and answer, add --yes to approve the plan it "
            f"prints, or start deploy/{settings.environment} from the Prefect UI and approve it "
            "there. Nothing was changed.",
        )
    _use_local_prefect(settings)
    from flows.live import make_view, new_log_file, routed_logs
    from flows.pipeline import FLOWS
    from stackflow.progress import hub

    kwargs: dict[str, Any] = {"environment": settings.environment, "stacks": _stacks(args) or None}
    if args.command == "up":
        kwargs["force"] = args.force
    if args.command == "destroy":
        kwargs["confirm"] = args.yes
    log_file = new_log_file(settings.state_dir, args.command, settings.environment)
    progress = hub()
    progress.reset()
    view = make_view(sys.stderr, args.heartbeat)
    echo = view.echo if args.verbose else None
    with routed_logs(log_file, echo), view, progress.subscribed(view.on_event):
        runner = _FlowRun(FLOWS[args.command], kwargs)
        runner.start()
        _supervise(runner, view, args)
    return _report(runner, args, log_file)


class _FlowRun:
    """A flow run in a thread of its own, so the main thread keeps the screen and Ctrl-C."""

    def __init__(self, flow: Any, kwargs: dict[str, Any]) -> None:
        import contextvars
        import threading

        self.flow, self.kwargs = flow, kwargs
        self.state: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        context = contextvars.copy_context()  # Prefect's settings, as this thread has them
        self.thread = threading.Thread(
            target=context.run, args=(self._run,), name="flow-run", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            self.state = self.flow(**self.kwargs, return_state=True)
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.done.set()


def _supervise(runner: _FlowRun, view: Any, args: argparse.Namespace) -> None:
    """Wait for the run; answer its approval requests; on Ctrl-C cancel it (once cleanly; a
    second Ctrl-C stops at once)."""
    from stackflow.progress import hub

    progress = hub()
    try:
        while not runner.done.wait(0.1):
            request = view.take_approval()
            if request is not None:
                _approve_here(request, runner, view, args)
        return
    except KeyboardInterrupt:
        pass
    # From a terminal, Ctrl-C reached our `pulumi` children too (one foreground process group):
    # a second SIGINT would make Pulumi stop at once instead of cancelling cleanly.
    from_terminal = _terminal_signalled()
    view.echo(
        "interrupted: cancelling the running operations; Pulumi finishes the resource "
        "operations in flight (press Ctrl-C again to stop at once)"
    )
    progress.cancel(interrupt=not from_terminal)
    waiting = view.take_approval() or view.approval_open
    if waiting is not None:  # the run waits on this terminal: it ends now, nothing applied
        with contextlib.suppress(Exception):
            _decide(
                waiting.flow_run_id,
                False,
                "the command line that started the run was interrupted",
                timeout_s=5,
            )
    try:
        while not runner.done.wait(0.1):
            pass
    except KeyboardInterrupt:
        view.echo(
            "stopped at once: the next run clears what the interrupted operations left (their "
            "locks and pending operations)"
        )
        _end_flow_run(view.board.flow_run_id)
        os._exit(exits.INTERRUPTED)


def _terminal_signalled() -> bool:
    """Whether this process is in the foreground of its terminal (so Ctrl-C signalled its whole
    process group, our `pulumi` children included)."""
    for stream in (sys.stdin, sys.stderr):
        try:
            if stream.isatty() and os.tcgetpgrp(stream.fileno()) == os.getpgrp():
                return True
        except (OSError, ValueError):
            continue
    return False


def _approve_here(request: Any, runner: _FlowRun, view: Any, args: argparse.Namespace) -> None:
    """Show the plan the run waits on and answer it: --yes approves; a terminal is asked (and
    an answer given meanwhile in the Prefect UI ends the question)."""
    import select

    from stackflow.progress import elapsed

    with view.paused():
        for line in request.plan.lines():
            view.echo(line)
        where = f" or in the Prefect UI: {request.ui_url}" if request.ui_url else ""
        if args.yes:
            _decide(request.flow_run_id, True, "approved with --yes at the command line", yes=True)
            view.echo("\napproved with --yes: applying it")
            return
        view.approval_open = request
        view.echo(
            f"\nApply this plan to {request.environment}? Type yes to apply it, no to reject it "
            f"(decide here{where}; it expires in {elapsed(request.timeout_s)}):"
        )
        while not runner.done.is_set():
            elsewhere = view.decided_elsewhere()
            if elsewhere is not None:
                verdict = "approved" if elsewhere.approved else "rejected"
                view.echo(f"{verdict} via {elsewhere.via}")
                break
            ready, _, _ = select.select([sys.stdin], [], [], 0.3)
            if not ready:
                continue
            line = sys.stdin.readline()
            reply = line.strip().lower()
            if reply in ("yes", "y"):
                _decide(request.flow_run_id, True, "approved at the command line")
                view.echo("approved: applying it")
                break
            if reply in ("no", "n") or not line:
                reason = (
                    _ask("reason (recorded with the decision): ")
                    if line
                    else "no answer: the terminal's input ended"
                )
                _decide(request.flow_run_id, False, reason or "rejected at the command line")
                view.echo("rejected: nothing will be applied")
                break
            view.echo("please type yes or no:")
        view.approval_open = None


def _ask(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip()


def _decide(flow_run_id: str, approve: bool, reason: str, yes: bool = False, **kw: Any) -> None:
    """Answer the run's approval from this command line, recorded as this user on this host."""
    from flows.approval import answer, command_line_identity
    from stackflow.progress import hub

    hub().answered_here(flow_run_id, command_line_identity(yes=yes))
    answer(flow_run_id, approve, reason, **kw)


def _end_flow_run(flow_run_id: str | None) -> None:
    """On the way out after a second Ctrl-C: the flow run ends Cancelled, not Running forever
    (best effort: the process exits next, whatever the server says)."""
    if flow_run_id is None:
        return
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled

    with contextlib.suppress(Exception), get_client(sync_client=True) as client:
        client.set_flow_run_state(
            UUID(flow_run_id), Cancelled(message="stopped at once (a second Ctrl-C)"), force=True
        )


def _report(runner: _FlowRun, args: argparse.Namespace, log_file: Path) -> int:
    """The summary, then the reason and what to do; the exit code of how the run ended."""
    from stackflow.localprefect import drain_prefect_queues

    as_json = getattr(args, "json", False)
    log_hint = f"the full log is {log_file} (-v shows it as it comes)"
    if runner.error is not None:
        return _bug(runner.error, log_file)
    state = runner.state
    if state.is_completed():
        summary = state.result()
        drain_prefect_queues()
        print_summary(summary, as_json)
        print(f"log: {log_file}", file=sys.stderr)
        return exits.OK
    if state.is_cancelled():
        summary = state.result(raise_on_failure=False)
        drain_prefect_queues()
        if isinstance(summary, dict) and "stacks" in summary:
            print_summary(summary, as_json)
        message = state.message or state.name
        from flows.pipeline import ApprovalExpired, ApprovalRejected

        if state.name in (ApprovalRejected.state_name, ApprovalExpired.state_name):
            expired = state.name == ApprovalExpired.state_name
            return _fail(
                message,
                exits.REJECTED,
                "run `up` again to see a new plan"
                + ("; the wait is STACKFLOW_APPROVAL_TIMEOUT_S" if expired else ""),
            )
        return _fail(
            message,
            exits.INTERRUPTED,
            "run the same command again: it clears what the interrupted operations left "
            "(their locks and pending operations) and carries on",
        )
    from flows.pipeline import DriftDetected, PipelineError

    try:
        state.result()
    except PipelineError as exc:
        if exc.summary:
            print_summary(exc.summary, as_json)  # what did happen, then the reason last
        if isinstance(exc, DriftDetected):
            env = exc.summary["environment"] if exc.summary else "<env>"
            return _fail(
                str(exc),
                EXIT_DRIFT,
                f"`python flows/run.py up --env {env}` puts the cloud back as the code says; "
                f"`python flows/run.py refresh --env {env}` takes the cloud's values into state",
            )
        return _fail(str(exc), EXIT_FAILED, f"fix what it names, then run it again; {log_hint}")
    except Exception as exc:
        from stackflow.errors import StackflowError

        if isinstance(exc, StackflowError):
            return _fail(str(exc), EXIT_FAILED, log_hint)
        return _bug(exc, log_file)
    return _fail(f"flow ended in state {state.type.value}", EXIT_FAILED, log_hint)


def _bug(exc: BaseException, log_file: Path | None = None) -> int:
    """An error stackflow did not expect: the traceback, where it happened, how to report it."""
    import traceback

    sys.stdout.flush()
    traceback.print_exception(exc, file=sys.stderr)
    where = f" and the log {log_file}" if log_file else ""
    print(
        f"error: unexpected {type(exc).__name__} inside stackflow: this is a bug. Please report "
        f"it to the stackflow maintainers with the traceback above{where}.",
        file=sys.stderr,
    )
    return exits.BUG


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
        return _fail("interrupted", exits.INTERRUPTED)


if __name__ == "__main__":
    sys.unraisablehook = _drop_event_loop_noise
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head` and the like
        sys.exit(0)
