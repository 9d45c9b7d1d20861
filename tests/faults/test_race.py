"""Two deploys of one environment at once: they take turns on every stack."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.faults.helpers import FaultEnv, active_slots, intervals

pytestmark = pytest.mark.faults

STACKS = ("networking", "database", "app")


def test_two_deploys_of_one_environment_take_turns_on_each_stack_simulated(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Two `up --force` runs of `dev` started together (simulated engine; networking takes 4 s, so
    they meet there): they do contend, no two operations on one stack overlap, no lock conflict
    reaches the user, both end with exit 0, and nothing is left pending or held."""
    logs = [tmp_path / f"run-{i}.log" for i in range(2)]
    # networking takes long enough to cover the two processes' start-up skew (2 s was not always
    # enough on a loaded machine): they must meet there
    slow = {"STACKFLOW_SIM_LATENCY_S": '{"*": 0.5, "networking": 4.0}'}
    runs = [fault_env.start("up", "--env", "dev", "--force", log=log, env=slow) for log in logs]
    codes = [run.wait(timeout=200) for run in runs]
    outs = [log.read_text() for log in logs]
    shown = "\n".join(
        f"--- run {i}: exit {c}\n{out[-4000:]}"
        for i, (c, out) in enumerate(zip(codes, outs, strict=True))
    )
    assert codes == [0, 0], shown
    # they did race: one run found the other holding a stack's slot and waited for it
    assert any("waiting: another run holds stackflow-dev-networking" in out for out in outs), shown

    for out in outs:
        # no lock conflict, retry or traceback reaches the user; the run ends with its summary
        assert not re.search(r"currently locked|Conflict|will retry|Traceback", out), shown
        assert "engine operations: 3;" in out, shown
    for stack in STACKS:
        spans = intervals(fault_env.state_dir, stack, "up")
        assert len(spans) == 2, (stack, spans)
        assert spans[0][1] <= spans[1][0], f"{stack}: two operations overlapped: {spans}"

    # both ended in a clear state: nothing pending, no slot held, no holder record left
    for stack in STACKS:
        state = fault_env.state_dir / "simulated" / "stacks" / f"stackflow-{stack}" / "dev.json"
        assert "pending_operation" not in json.loads(state.read_text())
        assert active_slots("dev", stack) == 0
    assert not list((fault_env.state_dir / "holders").glob("*.json"))
