"""A deploy killed with SIGKILL mid-operation: the next deploy recovers what it left behind."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from tests.faults.helpers import FaultEnv, active_slots, started, wait_until

pytestmark = pytest.mark.faults


def test_sigkill_mid_deploy_is_recovered_by_the_next_up_simulated(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """SIGKILL `up` while the simulated database stack is mid-update. The next `up` clears the
    pending operation and releases the dead run's concurrency slot, then finishes; a third `up`
    makes no engine call and every stack's outputs can be read."""
    state_dir = fault_env.state_dir
    log = tmp_path / "killed-run.log"
    victim = fault_env.start(
        "up", "--env", "dev", log=log, env={"STACKFLOW_SIM_LATENCY_S": '{"database": 20}'}
    )
    try:
        wait_until(
            lambda: started(state_dir, "database", "up") or victim.poll() is not None,
            timeout=120,
            what="the simulated database `up` to start",
        )
        assert victim.poll() is None, f"the run ended before it could be killed:\n{log.read_text()}"
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(timeout=30)

    # What the kill left behind: a pending operation in the stack's state and a held slot.
    database_state = state_dir / "simulated" / "stacks" / "stackflow-database" / "dev.json"
    pending = json.loads(database_state.read_text()).get("pending_operation")
    assert pending is not None and pending["pid"] == victim.pid, pending
    assert active_slots("dev", "database") == 1

    second = fault_env.cli("up", "--env", "dev")
    assert second.returncode == 0, second
    assert (
        f"has a pending up left by an interrupted run (pid {victim.pid}); clearing it"
        in second.output
    ), second
    assert (
        f"released the concurrency slot of dev/database held by pid {victim.pid}" in second.output
    ), second
    assert re.search(r"^database\s+updated ", second.stdout, re.MULTILINE), second  # finished now
    assert "pending_operation" not in json.loads(database_state.read_text())
    assert active_slots("dev", "database") == 0
    assert not list((state_dir / "holders").glob("*.json")), "a slot holder record was left"

    # consistent: a third `up` finds every stack up to date, and every stack's outputs read back
    third = fault_env.main("up", "--env", "dev")
    assert third.returncode == 0, third
    assert "engine operations: 0;" in third.stdout, third

    outputs = fault_env.main("outputs", "--env", "dev", "--json")
    assert outputs.returncode == 0, outputs
    shown = json.loads(outputs.stdout)
    assert set(shown) == {"networking", "database", "app"}
    assert all(shown.values()), shown  # every stack has outputs in its state
    assert shown["database"]["password"] == "[secret]"
