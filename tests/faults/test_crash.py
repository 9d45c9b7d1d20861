"""A deploy killed with SIGKILL mid-operation on the local cloud: the next deploy recovers what it left
behind (the Pulumi lock, the pending operation, the concurrency slot) and completes."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from stackflow.localcloud.knobs import get_knobs, set_knobs
from tests.faults.helpers import (
    FaultEnv,
    active_slots,
    kill_groups,
    lock_files,
    pending_operations,
    pulumi_pids,
    started,
    wait_until,
)
from tests.realenv import update_history

pytestmark = pytest.mark.faults

SUBNET = "aws:ec2/subnet:Subnet"


def test_sigkill_mid_deploy_is_recovered_by_the_next_up_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: `up` (networking) is held mid-operation by a hang knob on a subnet's create and
    SIGKILLed with its Pulumi CLI. It leaves the stack's lock, a pending create and its concurrency
    slot behind. The next `up` removes the lock, finds the cloud never made the subnet and clears
    the pending create, releases the slot, then completes (creating the subnet once); a third
    `up` makes no engine call and the outputs read back."""
    env, state_dir = fault_env.environment, fault_env.state_dir
    set_knobs(
        fault_env.cloud.url,
        {
            "faults": [
                {"kind": "hang", "count": 1, "environment": env, "type": SUBNET},
            ]
        },
    )

    def hung() -> bool:
        """A subnet's create reached the plugin, which will never answer, and every other create
        under way has finished: the stack's state holds that one pending create."""
        if not started(state_dir, env, "networking"):
            return False  # no update has taken the stack's lock yet
        (fault,) = [f for f in get_knobs(fault_env.cloud.url).faults if f.environment == env]
        if fault.count != 0:
            return False
        try:
            pending = pending_operations(state_dir, env, "networking")
        except (OSError, ValueError, KeyError):
            return False  # no state yet, or a write under way
        return [p["resource"]["type"] for p in pending] == [SUBNET]

    log = tmp_path / "killed-run.log"
    victim = fault_env.start("up", "--env", env, "--stacks", "networking", log=log)
    try:
        wait_until(
            lambda: hung() or victim.poll() is not None,
            timeout=180,
            what="the networking `up` to hang on a subnet's create, alone",
            poll=0.3,
        )
        assert victim.poll() is None, f"the run ended before it could be killed:\n{log.read_text()}"
        # the CLI process and its `pulumi` (a session of its own, with its plugins) at once: a
        # `pulumi` left alive sees its program die and settles the pending create itself
        kill_groups(victim.pid, *pulumi_pids(state_dir, env, "networking"))
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(timeout=30)

    # What the kill left behind: Pulumi's lock, a pending create, a held slot and its holder record.
    (lock,) = lock_files(state_dir, env, "networking")
    (pending,) = pending_operations(state_dir, env, "networking")
    assert (pending["type"], pending["resource"]["type"]) == ("creating", SUBNET), pending
    assert active_slots(env, "networking") == 1
    assert list((state_dir / "holders").glob("*.json")), "no slot holder record was left"
    assert update_history(state_dir, env, "networking") == []  # the update never finished

    second = fault_env.cli("up", "--env", env, "--stacks", "networking")
    assert second.returncode == 0, second
    # what it cleared is in the run's log (quiet by default), and told in the summary
    assert re.search(
        rf"stack {env}/networking: removed the lock of an interrupted update \(pulumi pid \d+",
        second.log,
    ), second
    assert (
        f"stack {env}/networking has 1 pending operations left by an interrupted update; "
        "looking its pending creates up in the local cloud" in second.log
    ), second
    # the hang held the create before it reached the cloud: nothing to import, so it is cleared
    subnet = pending["resource"]["urn"].rsplit("::", 1)[-1]
    cleared = f"cleared {SUBNET} {subnet}: the local cloud never made it"
    assert f"stack {env}/networking: {cleared}" in second.log, second
    assert (
        f"released the concurrency slot of {env}/networking held by pid {victim.pid}, which is "
        "gone" in second.output
    ), second
    assert not re.search(r"currently locked|will retry", second.output), second
    assert re.search(r"^networking\s+updated ", second.stdout, re.MULTILINE), second
    # the summary tells it too, not only the log
    assert re.search(
        rf"^networking: recovered what an interrupted operation left: removed its lock; "
        rf"{re.escape(cleared)}$",
        second.stdout,
        re.MULTILINE,
    ), second
    assert not lock.exists() and lock_files(state_dir, env, "networking") == []
    assert pending_operations(state_dir, env, "networking") == []
    assert active_slots(env, "networking") == 0
    assert not list((state_dir / "holders").glob("*.json")), "a slot holder record was left"

    # consistent: a third `up` finds the stack up to date; its outputs read back and name exactly
    # the subnets the cloud holds (the one whose create was killed among them, created once)
    third = fault_env.main("up", "--env", env, "--stacks", "networking")
    assert third.returncode == 0, third
    assert "engine operations: 0;" in third.stdout, third
    outputs = fault_env.outputs("networking")["networking"]
    subnets = fault_env.cloud.client("ec2").describe_subnets(
        Filters=[{"Name": "tag:environment", "Values": [env]}]
    )["Subnets"]
    declared = outputs["public_subnet_ids"] + outputs["private_subnet_ids"]
    assert sorted(s["SubnetId"] for s in subnets) == sorted(declared), (subnets, outputs)


@pytest.mark.slow  # two Prefect server starts and a 10 s loss window: the longer tier
def test_a_prefect_server_lost_mid_run_is_named_and_its_slots_free_when_it_is_back(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: the Prefect server a run reports to is stopped while the run holds its stack
    slots. The run ends with one clear line naming the server and what to do (exit 1, no traceback,
    never "this is a bug"); the same server started again, the next run of the environment takes
    the slots the lost run held (the holder record names that run's lease) and completes."""
    from stackflow.localprefect import start_prefect_server, stop_prefect_server
    from stackflow.processes import free_port

    env = fault_env.environment
    home, port = tmp_path / "own-prefect", free_port()
    server = start_prefect_server(home, port, ui=False)
    own = {"PREFECT_API_URL": server.api_url}
    try:
        set_knobs(fault_env.cloud.url, {"latency_s": {f"env:{env}": 0.5}})
        log = tmp_path / "lost.log"
        run = fault_env.start("up", "--env", env, "--stacks", "networking", log=log, env=own)
        wait_until(
            lambda: started(fault_env.state_dir, env, "networking"), 120, "the update to start"
        )
        stop_prefect_server(server.pid)
        code = run.wait(timeout=300)
        out = log.read_text()
        assert code == 1, out[-3000:]
        assert f"the Prefect server at {server.api_url} stopped answering" in out, out[-3000:]
        assert "what to do: start the server again" in out
        assert "Traceback" not in out and "this is a bug" not in out, out[-3000:]
    finally:
        set_knobs(fault_env.cloud.url, {})
    server = start_prefect_server(home, port, ui=False)  # the same database, again
    try:
        again = tmp_path / "again.log"
        code = fault_env.start(
            "up", "--env", env, "--stacks", "networking", log=again, env=own
        ).wait(timeout=300)
        assert code == 0, again.read_text()[-3000:]
    finally:
        stop_prefect_server(server.pid)


def test_cancel_in_prefect_stops_a_command_line_run_cleanly_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: a command-line `up` (every resource operation slowed to 0.5 s) is cancelled
    the way the UI's Cancel button does it, by setting its flow run CANCELLING. The command
    says so, Pulumi finishes the operations in flight and releases its lock, nothing new starts
    (the database never runs), the flow run ends Cancelled, the exit code is 130, and the next
    `up` completes."""
    import uuid

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.client.schemas.objects import State, StateType

    env, state_dir = fault_env.environment, fault_env.state_dir
    set_knobs(fault_env.cloud.url, {"latency_s": {f"env:{env}": 0.5}})
    tag = f"cancel-test-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "cancelled.log"
    run = fault_env.start(
        "up", "--env", env, "--stacks", "networking,database", "--tag", tag, log=log
    )
    wait_until(lambda: started(state_dir, env, "networking"), 120, "the update to start")
    with get_client(sync_client=True) as client:
        [flow_run] = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[tag]))
        )
        client.set_flow_run_state(
            flow_run.id,
            State(type=StateType.CANCELLING, message="cancelled by the test"),
            force=True,
        )
        code = run.wait(timeout=300)
        out = log.read_text()
        ended = client.read_flow_run(flow_run.id).state
    assert code == 130, out[-3000:]
    assert "cancelled in Prefect: cancelling the running operations" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert ended is not None and ended.type is StateType.CANCELLED, ended
    assert lock_files(state_dir, env, "networking") == []
    assert update_history(state_dir, env, "database") == []  # nothing started after the cancel
    set_knobs(fault_env.cloud.url, {})
    again = fault_env.start(
        "up", "--env", env, "--stacks", "networking", log=tmp_path / "again.log"
    )
    assert again.wait(timeout=300) == 0, (tmp_path / "again.log").read_text()[-3000:]
