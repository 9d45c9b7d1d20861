"""A flow run's heartbeats (stackflow.crashes): the same heartbeat events as Prefect's own thread,
from a thread that stops when the run ends instead of finishing its one-second sleep."""

from __future__ import annotations

import inspect
import threading
from typing import Any

import prefect.flow_engine as flow_engine
import pytest

from stackflow import crashes

pytestmark = pytest.mark.unit


class Engine:
    """What the heartbeat context reads of Prefect's flow run engine."""

    heartbeat_seconds = 30
    flow_run = None
    logger = None

    def __init__(self) -> None:
        self.beats: list[tuple[Any, Any]] = []
        self.beat = threading.Event()

    def _build_heartbeat_event_template(self) -> tuple[Any, Any]:
        return {"prefect.resource.id": "prefect.flow-run.x"}, []

    def _emit_flow_run_heartbeat(self, resource: Any, related: Any) -> None:
        self.beats.append((resource, related))
        self.beat.set()


def test_heartbeats_stop_when_the_run_ends() -> None:
    crashes.stop_heartbeats_promptly()
    crashes.stop_heartbeats_promptly()  # idempotent
    assert flow_engine._send_heartbeats is crashes._prompt_heartbeats
    [prefects] = crashes._replaced
    # The function replaced, and what it reads of Prefect's engine, still have this shape.
    assert list(inspect.signature(prefects).parameters) == ["engine", "join_on_exit"]
    for name in (
        "heartbeat_seconds",
        "_build_heartbeat_event_template",
        "_emit_flow_run_heartbeat",
    ):
        assert hasattr(flow_engine.FlowRunEngine, name)
    assert flow_engine.MINIMUM_HEARTBEAT_INTERVAL == crashes.HEARTBEAT_S

    engine = Engine()
    before = set(threading.enumerate())
    with flow_engine._send_heartbeats(engine):
        assert engine.beat.wait(10)  # the first heartbeat goes at once, as Prefect's does
        [thread] = [t for t in threading.enumerate() if t not in before]
        assert thread.daemon and thread.name == "heartbeat"
    assert not thread.is_alive()  # stopped and joined when the run ended
    assert engine.beats == [({"prefect.resource.id": "prefect.flow-run.x"}, [])]


def test_no_heartbeat_thread_without_a_frequency() -> None:
    crashes.stop_heartbeats_promptly()
    engine = Engine()
    engine.heartbeat_seconds = None  # type: ignore[assignment]
    before = set(threading.enumerate())
    with flow_engine._send_heartbeats(engine):
        assert set(threading.enumerate()) == before
    assert engine.beats == []
