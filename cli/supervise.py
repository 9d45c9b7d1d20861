"""The flow run behind `up`, `preview`, `refresh`, `destroy` and `drift`: it runs in a thread of its
own while the main thread keeps the screen, answers approvals asked at this terminal, and on
Ctrl-C cancels it (once cleanly; a second Ctrl-C stops at once)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackflow import exits

if TYPE_CHECKING:
    from prefect import Flow

    from stackflow.settings import Settings


def run_flow(
    args: argparse.Namespace, settings: Settings, flow: Flow[..., Any], parameters: dict[str, Any]
) -> tuple[FlowRun, Path]:
    """Run the command's flow to its end, showing its progress on stderr.

    Args:
        args: the parsed command line (command, --yes, --verbose, --heartbeat, --tag).
        settings: the run's settings (environment, state folder).
        flow: the flow to run.
        parameters: its parameters.

    Returns:
        The finished run (its final state, or what the flow call raised) and this command's log.
    """
    from cli.live import make_view, new_log_file, routed_logs
    from stackflow.progress import hub

    log_file = new_log_file(settings.state_dir, args.command, settings.environment)
    progress = hub()
    progress.reset()
    view = make_view(sys.stderr, args.heartbeat)
    echo = view.echo if args.verbose else None
    with (
        routed_logs(log_file, echo),
        view,
        progress.subscribed(view.on_event),
        sigterm_interrupts(),
    ):
        runner = FlowRun(flow, parameters, getattr(args, "tags", None) or [])
        runner.start()
        runner.terminated = _supervise(runner, view, args)
    return runner, log_file


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, a worker or container stop): handled as an interrupt; the flow run ends
    Cancelled, as after a Ctrl-C."""


@contextlib.contextmanager
def sigterm_interrupts() -> Any:
    """While inside, SIGTERM interrupts the main thread the way Ctrl-C does (so running
    operations are cancelled cleanly instead of the process vanishing under them)."""
    import signal

    def interrupt(_signum: int, _frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class FlowRun:
    """A flow run in a thread of its own, so the main thread keeps the screen and Ctrl-C."""

    def __init__(self, flow: Any, kwargs: dict[str, Any], tags: list[str] | None = None) -> None:
        import contextvars
        import threading

        self.flow, self.kwargs, self.tags = flow, kwargs, list(tags or [])
        self.state: Any = None
        self.error: BaseException | None = None
        self.terminated = False  # ended by SIGTERM (exit 143, the flow run Cancelled)
        self.lost = False  # the Prefect server stopped answering during the run
        self.done = threading.Event()
        context = contextvars.copy_context()  # Prefect's settings, as this thread has them
        self.thread = threading.Thread(
            target=context.run, args=(self._run,), name="flow-run", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        from prefect import tags

        try:
            with tags(*self.tags):
                self.state = self.flow(**self.kwargs, return_state=True)
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.done.set()


def _supervise(runner: FlowRun, view: Any, args: argparse.Namespace) -> bool:
    """Wait for the run; answer its approval requests; on Ctrl-C or SIGTERM cancel it (once
    cleanly; a second one stops at once). Returns whether SIGTERM ended it."""
    from stackflow.progress import hub

    progress = hub()
    watch = ServerWatch()
    cancelled = CancelWatch()
    try:
        while not runner.done.wait(0.1):
            request = view.take_approval()
            if request is not None:
                _approve_here(request, runner, view, args)
            if watch.lost():
                _end_lost_run(runner, view, watch)
                return False
            if cancelled.asked(view.board.flow_run_id):
                _cancel_asked(runner, view)
                return False
        return False
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
    # Our `pulumi` processes run in process groups of their own: the terminal's Ctrl-C reached
    # only us, and each gets exactly one SIGINT from here (Pulumi's graceful cancel).
    view.echo(
        ("terminated (SIGTERM)" if terminated else "interrupted")
        + ": cancelling the running operations; Pulumi finishes the resource "
        "operations in flight (press Ctrl-C again to stop at once)"
    )
    progress.cancel(interrupt=True)
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
        return terminated  # the flow ended itself Cancelled, as after a Ctrl-C
    except KeyboardInterrupt:
        # A second SIGINT makes Pulumi stop at once (what a second Ctrl-C means to it).
        progress.cancel(interrupt=True)
        view.echo(
            "stopped at once: operations in flight may be left pending; the next run of this "
            "environment clears what they left (their locks and pending operations)"
        )
        _end_flow_run(view.board.flow_run_id)
        os._exit(exits.INTERRUPTED)


def _approve_here(request: Any, runner: FlowRun, view: Any, args: argparse.Namespace) -> None:
    """Show the plan the run waits on and answer it: --yes approves; a terminal is asked (and
    an answer given meanwhile in the Prefect UI ends the question)."""
    import select

    from cli.commands.approve import sign_at_gate
    from stackflow.progress import elapsed

    with view.paused():
        for line in request.plan.lines():
            view.echo(line)
        where = f" or in the Prefect UI: {request.ui_url}" if request.ui_url else ""
        if args.yes:
            signature = sign_at_gate(request, args, view.echo)
            if signature is None:
                return
            _decide(
                request.flow_run_id,
                True,
                "approved with --yes at the command line",
                yes=True,
                signature=signature,
            )
            view.echo("\napproved with --yes: applying it")
            return
        if getattr(args, "approve_in_ui", False):
            view.approval_open = request
            view.echo(f"\nwaiting for a decision in the Prefect UI: {request.ui_url or 'its run'}")
            while not runner.done.is_set():
                elsewhere = view.decided_elsewhere()
                if elsewhere is not None:
                    verdict = "approved" if elsewhere.approved else "rejected"
                    view.echo(f"{verdict} via {elsewhere.via}")
                    break
                runner.done.wait(0.3)
            view.approval_open = None
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
                signature = sign_at_gate(request, args, view.echo)
                if signature is None:
                    break
                _decide(
                    request.flow_run_id, True, "approved at the command line", signature=signature
                )
                view.echo(
                    "approved: applying it"
                    if not signature
                    else "signed approval sent: the run checks it, and waits for any other "
                    "approvals it needs (`approve`)"
                )
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


class ServerWatch:
    """Whether the Prefect server this command reports to stopped answering: asked every few
    seconds. It is "lost" once its port refused connections for GONE_AFTER_S in a row (the server
    process is gone; a restart in progress is not), or once it answered nothing for LOST_AFTER_S:
    longer than the 60 s a one-person (SQLite) server may stall on its own database lock (Prefect
    3.8.8's busy timeout), which is not a lost server."""

    EVERY_S = 2.0
    GONE_AFTER_S = 10.0
    LOST_AFTER_S = 75.0

    def __init__(self) -> None:
        import time

        self._clock = time.monotonic
        self._next = self._clock() + self.EVERY_S
        self._failing_since: float | None = None
        self._refused_since: float | None = None

    def lost(self) -> bool:
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self.EVERY_S
        from prefect.settings import get_current_settings

        from stackflow.localprefect import healthy

        api = get_current_settings().api
        base = str(api.url or "").rstrip("/").removesuffix("/api")
        auth = api.auth_string.get_secret_value() if api.auth_string else None
        if not base or healthy(base, timeout=2.0, auth_string=auth):
            self._failing_since = self._refused_since = None
            return False
        self._failing_since = self._failing_since or now
        if _refuses_connections(base):
            self._refused_since = self._refused_since or now
        else:
            self._refused_since = None
        gone = self._refused_since is not None and now - self._refused_since >= self.GONE_AFTER_S
        return gone or now - self._failing_since >= self.LOST_AFTER_S


def _refuses_connections(url: str) -> bool:
    """Whether nothing listens at `url`'s address any more (a connection is refused)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=1.0):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


class CancelWatch:
    """Whether someone asked Prefect to cancel this command's flow run (Cancel in the UI, or a
    sync superseding it): its state is read every few seconds."""

    EVERY_S = 2.0

    def __init__(self) -> None:
        import time

        self._clock = time.monotonic
        self._next = self._clock() + self.EVERY_S

    def asked(self, flow_run_id: str | None) -> bool:
        now = self._clock()
        if flow_run_id is None or now < self._next:
            return False
        self._next = now + self.EVERY_S
        from uuid import UUID

        from prefect.client.orchestration import get_client

        try:
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(UUID(flow_run_id)).state
        except Exception:  # a server that does not answer is ServerWatch's to judge
            return False
        # CANCELLING: asked from outside. A CANCELLED of our own making (a rejected plan ends
        # so) is the run's own end, not a request.
        return state is not None and state.type.value == "CANCELLING"


def _cancel_asked(runner: FlowRun, view: Any) -> None:
    """Cancelled in Prefect: as a Ctrl-C here (nothing new starts, running operations are
    cancelled cleanly); the flow run ends Cancelled."""
    from stackflow.progress import hub

    view.echo(
        "cancelled in Prefect: cancelling the running operations (Pulumi finishes the resource "
        "operations in flight)"
    )
    hub().cancel(interrupt=True)
    runner.done.wait()
    ended = getattr(runner.state, "is_final", lambda: False)()
    if not ended:  # the flow did not end its run itself: it ends Cancelled, never Cancelling
        _end_flow_run(view.board.flow_run_id, message="cancelled in Prefect (the UI or a sync)")


def _end_lost_run(runner: FlowRun, view: Any, watch: ServerWatch) -> None:
    """The server is gone: nothing new starts, running operations are cancelled cleanly, and the
    run is reported as lost (not left to Prefect's client, which retries for minutes)."""
    import logging

    from stackflow.progress import hub

    # Prefect's client keeps retrying (and printing tracebacks of) every log line and event it
    # cannot send: the server is gone, so they are not ours to show.
    logging.raiseExceptions = False
    logging.getLogger("prefect").setLevel(logging.CRITICAL)
    view.echo(
        "the Prefect server stopped answering: cancelling the running operations (Pulumi "
        "finishes the resource operations in flight)"
    )
    hub().cancel(interrupt=True)
    runner.done.wait(60.0)  # a cancelled pulumi ends within seconds
    runner.lost = True


def _end_flow_run(flow_run_id: str | None, message: str = "") -> None:
    """On the way out after a second Ctrl-C: the flow run ends Cancelled, never Running forever
    (best effort: the process exits next, whatever the server says)."""
    if flow_run_id is None:
        return
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled

    state: Any = Cancelled(message=message or "stopped at once (a second Ctrl-C)")
    with contextlib.suppress(Exception), get_client(sync_client=True) as client:
        client.set_flow_run_state(UUID(flow_run_id), state, force=True)
