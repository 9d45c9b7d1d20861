"""No run left "Running": Prefect's own mechanism, for one machine and many.

Every flow run stackflow starts (the command line's, a worker's, a served deployment's) sends a
heartbeat event every `HEARTBEAT_S` seconds (Prefect's `PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, 30 s
at least). An automation, installed on every Prefect server the project starts (and by
`python flows/run.py server automation` on a team's own), marks a flow run Crashed when its
heartbeats stop for `ZOMBIE_WINDOW_S` without it ending: a killed process, a lost machine.
Its concurrency slots' leases then expire, and the next run of the environment breaks the locks
it left (fenced, see `stackflow.holders`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

HEARTBEAT_S = 30  # Prefect's minimum
ZOMBIE_WINDOW_S = 90  # three missed heartbeats
AUTOMATION_NAME = "stackflow: crash flow runs whose heartbeats stopped"
HEARTBEAT_VARIABLE = "PREFECT_FLOWS_HEARTBEAT_FREQUENCY"


def heartbeat_environment() -> dict[str, str]:
    """What a process that runs flows needs in its environment to send heartbeats."""
    return {HEARTBEAT_VARIABLE: str(HEARTBEAT_S)}


def send_heartbeats() -> None:
    """Make the flow runs this process runs or starts (its children inherit the variable) send
    heartbeats every `HEARTBEAT_S`, unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set already.

    Prefect's own default (180 s) is longer than the automation's window: without this, the
    automation would end a live run as Crashed.
    """
    stop_heartbeats_promptly()
    if HEARTBEAT_VARIABLE in os.environ:
        return
    os.environ.update(heartbeat_environment())
    if "prefect" in sys.modules:  # settings read at import: rebuilt with the variable
        import prefect.context

        prefect.context.refresh_global_settings_context()


def stop_heartbeats_promptly() -> None:
    """Make a flow run's heartbeat thread stop as soon as its run ends (idempotent).

    Prefect 3.8's heartbeat thread (`prefect.flow_engine._send_heartbeats`) sleeps in steps of one
    second and the ending run joins it: every sync flow run ended 0-1 s (0.5 s on average) after
    its work, a quarter of a no-op `up`. This is the same context manager, same heartbeats, with a
    sleep that wakes when the run ends. Prefect is pinned (constraints.txt); the unit test
    `test_heartbeats_stop_when_the_run_ends` fails if the function it replaces changes shape.
    """
    import prefect.flow_engine as flow_engine

    if getattr(flow_engine._send_heartbeats, "__stackflow__", False):
        return
    _replaced.append(flow_engine._send_heartbeats)
    flow_engine._send_heartbeats = _prompt_heartbeats


def _heartbeats(engine: Any, join_on_exit: bool = True) -> Iterator[None]:
    import contextvars
    import threading

    from prefect.flow_engine import MINIMUM_HEARTBEAT_INTERVAL

    seconds = engine.heartbeat_seconds
    if seconds is None:
        yield
        return
    seconds = max(seconds, MINIMUM_HEARTBEAT_INTERVAL)
    resource, related = engine._build_heartbeat_event_template()
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            state = engine.flow_run.state if engine.flow_run else None
            if state is not None and state.is_final():
                return
            try:
                engine._emit_flow_run_heartbeat(resource, related)
            except Exception:
                engine.logger.debug("Failed to emit heartbeat", exc_info=True)
            stop.wait(seconds)  # Prefect's: time.sleep(1) x seconds, deaf to the stop

    # The thread sees this context's settings (the API URL), as Prefect's does.
    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(beat,), daemon=True, name="heartbeat"
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        if join_on_exit:
            thread.join(timeout=2)


_prompt_heartbeats = contextlib.contextmanager(_heartbeats)
_replaced: list[Any] = []  # Prefect's own, once replaced
_prompt_heartbeats.__stackflow__ = True  # type: ignore[attr-defined]


def zombie_automation(window_s: int = ZOMBIE_WINDOW_S) -> Any:
    """The automation (Prefect's documented one): a flow run that sent a heartbeat and then
    neither another one nor a final state within `window_s` is set Crashed."""
    from datetime import timedelta

    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    return AutomationCore(
        name=AUTOMATION_NAME,
        description=(
            f"stackflow: a flow run whose heartbeats (every {HEARTBEAT_S}s) stop for {window_s}s "
            "without a final state ended with its process or machine: mark it Crashed, so its "
            "concurrency slots free up and the next run may heal the locks it left"
        ),
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={
                "prefect.flow-run.heartbeat",
                "prefect.flow-run.Completed",
                "prefect.flow-run.Failed",
                "prefect.flow-run.Cancelled",
                "prefect.flow-run.Crashed",
            },
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=window_s),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                message=(
                    f"stackflow: no heartbeat for {window_s}s: the process running this flow run "
                    "ended without reporting (killed, or its machine lost)"
                ),
            )
        ],
    )


def install_zombie_automation(client: SyncPrefectClient, window_s: int = ZOMBIE_WINDOW_S) -> bool:
    """Create the automation on the server `client` talks to, once (by name); whether it was
    created now."""
    wanted = zombie_automation(window_s)
    existing = [a for a in client.read_automations_by_name(AUTOMATION_NAME)]
    if existing:
        return False
    client.create_automation(wanted)
    return True


def flow_run_state(flow_run_id: str) -> str | None:
    """The state type of a flow run (COMPLETED, CRASHED, RUNNING, ...), None if unknown."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(UUID(flow_run_id)).state
    except (ObjectNotFound, ValueError):
        return None
    return state.type.value if state is not None else None
