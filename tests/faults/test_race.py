"""Two deploys of one environment at once on the local cloud: they take turns on the stack."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stackflow.localcloud.knobs import set_knobs
from tests.faults.helpers import FaultEnv, active_slots, intervals, lock_files, pending_operations
from tests.realenv import update_history

pytestmark = pytest.mark.faults


def test_two_deploys_of_one_environment_take_turns_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: two `up --force` runs of one environment's networking stack started together
    (every resource operation of the environment takes 0.5 s, so the first update holds the stack
    for several seconds): they do contend, Pulumi's history shows two updates that never overlap,
    no lock conflict reaches the user, both end with exit 0, and nothing is left locked, pending or
    held."""
    env, state_dir = fault_env.environment, fault_env.state_dir
    set_knobs(fault_env.cloud.url, {"latency_s": {f"env:{env}": 0.5}})
    logs = [tmp_path / f"run-{i}.log" for i in range(2)]
    runs = [
        fault_env.start("up", "--env", env, "--stacks", "networking", "--force", log=log)
        for log in logs
    ]
    codes = [run.wait(timeout=300) for run in runs]
    outs = [log.read_text() for log in logs]
    shown = "\n".join(
        f"--- run {i}: exit {c}\n{out[-4000:]}"
        for i, (c, out) in enumerate(zip(codes, outs, strict=True))
    )
    assert codes == [0, 0], shown
    # they did race: one run found the other changing the environment and waited for it
    waited = [f"another run of {env} is changing it" in out for out in outs]
    assert sorted(waited) == [False, True], shown

    for out in outs:
        # no lock conflict, retry or traceback reaches the user; the run ends with its summary
        assert not re.search(r"currently locked|Conflict|will retry|Traceback", out), shown
        assert "engine operations: 1;" in out, shown
        assert re.search(r"^networking\s+(updated|unchanged) ", out, re.MULTILINE), shown

    # Pulumi's own record: two successful updates, the second begun after the first ended
    history = update_history(state_dir, env, "networking")
    assert [(r["kind"], r["result"]) for r in history] == [("update", "succeeded")] * 2, history
    (first, second) = intervals(state_dir, env, "networking")
    assert first[1] - first[0] >= 2, f"the first update was too short to overlap: {first}"
    assert first[1] <= second[0], f"two updates of the stack overlapped: {first}, {second}"

    # both ended in a clear state: no lock, nothing pending, no slot held, no holder record left
    assert lock_files(state_dir, env, "networking") == []
    assert pending_operations(state_dir, env, "networking") == []
    assert active_slots(env, "networking") == 0
    assert not list((state_dir / "holders").glob("*.json"))


def test_an_up_and_a_destroy_of_one_environment_never_interleave_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: an `up` and a `destroy --yes` of one environment started together walk the
    stacks in opposite orders; per-stack turns alone let them cross (once both exited 0 and left
    the app deployed on a destroyed network). They take turns for the whole environment: one
    waits for the other, Pulumi's history shows every operation of one after every operation of
    the other, and the environment ends whole (deployed) or gone (destroyed), never half."""
    env, state_dir = fault_env.environment, fault_env.state_dir
    first = fault_env.start(
        "up", "--env", env, "--stacks", "networking,database", log=tmp_path / "first.log"
    )
    assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()[-3000:]
    set_knobs(fault_env.cloud.url, {"latency_s": {f"env:{env}": 0.3}})
    logs = [tmp_path / "up.log", tmp_path / "destroy.log"]
    runs = [
        fault_env.start(
            "up", "--env", env, "--stacks", "networking,database", "--force", log=logs[0]
        ),
        fault_env.start("destroy", "--env", env, "--yes", log=logs[1]),
    ]
    codes = [run.wait(timeout=400) for run in runs]
    outs = [log.read_text() for log in logs]
    shown = "\n".join(
        f"--- {n}: exit {c}\n{o[-3000:]}"
        for n, c, o in zip(("up", "destroy"), codes, outs, strict=True)
    )
    assert codes == [0, 0], shown
    assert sum(f"another run of {env} is changing it" in out for out in outs) == 1, shown
    spans: dict[str, list[tuple[int, int]]] = {}
    ups: list[tuple[int, int]] = []  # the forced up's update of each stack: its last one
    for stack in ("networking", "database"):
        history = update_history(state_dir, env, stack)
        for record in history:
            spans.setdefault(record["kind"], []).append((record["startTime"], record["endTime"]))
        updates = [r for r in history if r["kind"] == "update"]
        assert len(updates) == 2, history  # the first deploy's and the forced up's
        last = max(updates, key=lambda r: r["startTime"])
        ups.append((last["startTime"], last["endTime"]))
    destroys = spans.get("destroy", [])
    assert len(destroys) == 2, spans
    up_window = (min(s for s, _ in ups), max(e for _, e in ups))
    destroy_window = (min(s for s, _ in destroys), max(e for _, e in destroys))
    assert up_window[1] <= destroy_window[0] or destroy_window[1] <= up_window[0], spans
    for stack in ("networking", "database"):
        assert lock_files(state_dir, env, stack) == []
        assert pending_operations(state_dir, env, stack) == []
