"""What the command line says about a run, from the run's progress events (no servers): the plain
lines, the heartbeat, a retry's next attempt, resources done out of declared; and the hub that
carries events and interruptions."""

from __future__ import annotations

import io
import re
import time

import pytest

from cli.live import Board, PlainView, make_view
from stackflow.engine.base import ChangeCounts
from stackflow.outcome import describe_changes
from stackflow.progress import (
    NodeChanged,
    NodeState,
    ProgressHub,
    ResourceProgress,
    ResourcesDeclared,
    RunStarted,
    elapsed,
)

pytestmark = pytest.mark.unit
ENV = "dev-1"


def started(*nodes: str, operation: str = "up") -> RunStarted:
    return RunStarted(ENV, operation, nodes, "local cloud")


def node(name: str, state: NodeState, **kw: object) -> NodeChanged:
    return NodeChanged(ENV, name, state, **kw)  # type: ignore[arg-type]


def resource(
    name: str, status: str, change: str = "create", kind: str = "aws:ec2/vpc:Vpc"
) -> ResourceProgress:
    return ResourceProgress(ENV, "networking", f"urn::{kind}::{name}", kind, name, change, status)


def test_a_run_says_one_line_per_state_change_and_nothing_per_resource() -> None:
    board = Board()
    assert board.apply(started("networking", "database")) == [
        "up dev-1  [local cloud]: networking, database"
    ]
    assert board.apply(node("networking", NodeState.RUNNING)) == ["networking: running"]
    assert board.apply(node("networking", NodeState.RUNNING)) == []  # the same state again
    assert board.apply(resource("vpc", "started")) == []
    assert board.apply(resource("vpc", "done")) == []
    [line] = board.apply(
        node("networking", NodeState.DONE, status="updated", changes=ChangeCounts(create=24))
    )
    assert re.fullmatch(r"networking: updated \(24 created\) in \d+s", line), line
    assert board.apply(
        node(
            "database", NodeState.SKIPPED, status="unchanged", detail="unchanged since its last up"
        )
    ) == ["database: unchanged: unchanged since its last up"]


def test_a_preview_counts_what_it_would_do() -> None:
    board = Board()
    board.apply(started("app", operation="plan"))
    board.apply(node("app", NodeState.RUNNING))
    [line] = board.apply(
        node("app", NodeState.DONE, status="previewed", changes=ChangeCounts(update=1, replace=1))
    )
    assert "(1 to update, 1 to replace)" in line
    assert describe_changes(ChangeCounts()) == "no changes"


def test_a_retry_says_why_and_when_the_next_attempt_starts() -> None:
    board = Board()
    board.apply(started("networking"))
    board.apply(node("networking", NodeState.RUNNING))
    at = time.time() + 65
    [line] = board.apply(
        node(
            "networking",
            NodeState.RETRYING,
            detail="AWS throttled the requests (Throttling on EC2 CreateVpc)",
            next_attempt_at=at,
        )
    )
    clock = time.strftime("%H:%M:%S", time.localtime(at))
    assert line.startswith("networking: attempt 1 failed: AWS throttled the requests"), line
    assert f"; attempt 2 at {clock} (in 1m0" in line, line
    [again] = board.apply(node("networking", NodeState.RUNNING, attempt=2))
    assert again == "networking: running (attempt 2)"


def test_the_heartbeat_speaks_of_quiet_running_nodes_only_with_their_progress() -> None:
    board = Board()
    board.apply(started("networking", "database"))
    board.apply(node("networking", NodeState.RUNNING))
    board.apply(ResourcesDeclared(ENV, "networking", 3))
    for name in ("vpc", "igw"):
        board.apply(resource(name, "started"))
        board.apply(resource(name, "done"))
    board.apply(resource("default", "done", "same", "pulumi:providers:aws"))  # not declared
    board.apply(resource("nat", "started", "create", "aws:ec2/natGateway:NatGateway"))
    assert board.heartbeat(60) == []  # it spoke just now
    [beat] = board.heartbeat(0)
    assert beat.startswith("networking: still running "), beat
    assert "2/3 resources; creating aws:ec2/natGateway:NatGateway nat (" in beat, beat
    assert "database" not in beat  # waiting for its upstream: not a quiet node


def test_without_a_terminal_the_view_is_plain_lines_with_timestamps() -> None:
    stream = io.StringIO()
    view = make_view(stream)
    assert isinstance(view, PlainView)
    with view:
        view.on_event(started("networking"))
        view.on_event(node("networking", NodeState.FAILED, detail="AWS refused\nthe request"))
    lines = stream.getvalue().splitlines()
    assert all(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines), lines
    assert lines[-1].endswith("networking: failed: AWS refused the request"), lines
    assert "\x1b[" not in stream.getvalue()


def test_the_hub_delivers_to_subscribers_and_interrupts_what_registered() -> None:
    hub = ProgressHub()
    seen: list[object] = []
    interrupts: list[bool] = []
    event = started("app")
    hub.publish(event)  # nobody watches: nothing happens
    with hub.subscribed(seen.append), hub.cancellable(interrupts.append):
        hub.publish(event)
        hub.cancel(interrupt=False)
    hub.publish(event)  # unsubscribed: not delivered
    hub.cancel()  # no longer registered: not called
    assert seen == [event] and interrupts == [False] and hub.cancelled
    hub.reset()
    assert not hub.cancelled


def test_a_subscriber_that_fails_never_reaches_the_run() -> None:
    hub = ProgressHub()

    def broken(_: object) -> None:
        raise RuntimeError("a view bug")

    with hub.subscribed(broken):
        hub.publish(started("app"))  # does not raise


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0s"), (59.9, "59s"), (61, "1m01s"), (3600 + 120, "1h02m")]
)
def test_elapsed_reads_as_people_say_it(seconds: float, shown: str) -> None:
    assert elapsed(seconds) == shown


def test_the_terminal_view_draws_a_row_per_node_and_the_resource_in_progress() -> None:
    from rich.console import Console

    from cli.live.terminal import render

    board = Board()
    board.apply(started("networking", "database"))
    board.apply(node("networking", NodeState.RUNNING))
    board.apply(ResourcesDeclared(ENV, "networking", 3))
    board.apply(resource("vpc", "done"))
    board.apply(resource("nat", "started", "create", "aws:ec2/natGateway:NatGateway"))
    console = Console(file=io.StringIO(), width=140, record=True)
    console.print(render(board))
    text = console.export_text()
    assert re.match(r"up dev-1  \[local cloud\]   \d+s\n", text), text
    assert re.search(r"networking\s+running\s+\d+s\s+1/3 resources", text), text
    assert re.search(r"creating aws:ec2/natGateway:NatGateway nat \(\d+s\)", text), text
    assert re.search(r"database\s+waiting", text), text


def test_a_resource_refreshed_then_updated_or_replaced_counts_once() -> None:
    """An up that refreshes first (a drifted stack) and a replace's several steps touch each
    resource more than once: the counter counts resources, so it never passes the total."""
    board = Board()
    board.apply(ResourcesDeclared(ENV, "networking", 2))
    for change in ("refresh", "update", "replace", "replace"):
        board.apply(resource("vpc", "done", change))
    board.apply(resource("a", "done", "refresh", "aws:ec2/subnet:Subnet"))
    board.apply(resource("a", "done", "update", "aws:ec2/subnet:Subnet"))
    assert (board.nodes["networking"].done, board.nodes["networking"].total) == (2, 2)
