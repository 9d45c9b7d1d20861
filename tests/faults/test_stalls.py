"""A provider call that never answers (the local cloud's hang knob: moto on loopback, not AWS)
cannot hold a run for ever: with no progress for `stall_timeout_s` the run ends interrupted, and
one Ctrl-C ends it within `cancel_grace_s`. The next run heals what the stopped one left."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from stackflow import exits
from stackflow.localcloud.knobs import get_knobs, set_knobs
from tests.faults.helpers import FaultEnv, wait_until
from tests.realenv import summary_of

pytestmark = pytest.mark.faults

VPC = "aws:ec2/vpc:Vpc"
BOUNDS = {"STACKFLOW_STALL_TIMEOUT_S": "4", "STACKFLOW_CANCEL_GRACE_S": "3"}


def _hang_the_vpc(fault_env: FaultEnv) -> None:
    hang = {"kind": "hang", "count": 1, "environment": fault_env.environment, "type": VPC}
    set_knobs(fault_env.cloud.url, {"faults": [hang]})


def _vpcs(fault_env: FaultEnv) -> list[str]:
    found = fault_env.cloud.client("ec2").describe_vpcs(
        Filters=[{"Name": "tag:environment", "Values": [fault_env.environment]}]
    )
    return [v["VpcId"] for v in found["Vpcs"]]


def _heals(fault_env: FaultEnv) -> None:
    set_knobs(fault_env.cloud.url, {})
    again = fault_env.cli("up", "--env", fault_env.environment, "--stacks", "networking")
    assert again.returncode == exits.OK, again
    assert summary_of(again.stdout)["networking"] == "updated", again
    assert len(_vpcs(fault_env)) == 1, "one VPC: the stopped create was healed, not doubled"


def test_a_call_that_never_answers_ends_the_run_interrupted_after_the_stall_bound(
    fault_env: FaultEnv,
) -> None:
    fault_env.declare()
    _hang_the_vpc(fault_env)
    run = fault_env.cli("up", "--env", fault_env.environment, "--stacks", "networking", env=BOUNDS)
    assert run.returncode == exits.INTERRUPTED, run
    assert "no progress for 4s (stall_timeout_s)" in run.output, run
    assert "Traceback" not in run.output
    assert run.seconds < 120, run
    _heals(fault_env)


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, exits.INTERRUPTED), (signal.SIGTERM, exits.TERMINATED)]
)
def test_one_ctrl_c_or_sigterm_ends_a_call_that_never_answers_and_the_run_cancelled(
    fault_env: FaultEnv, tmp_path: Path, signum: int, code: int
) -> None:
    fault_env.declare()
    _hang_the_vpc(fault_env)
    log = tmp_path / "up.log"
    env = {**BOUNDS, "STACKFLOW_STALL_TIMEOUT_S": "3600"}  # only the signal ends it
    run = fault_env.start(
        "up", "--env", fault_env.environment, "--stacks", "networking", log=log, env=env
    )
    try:
        wait_until(
            lambda: (
                all(f.count == 0 for f in get_knobs(fault_env.cloud.url).faults)
                or run.poll() is not None
            ),
            timeout=180,
            what="the VPC's create to hang in the local cloud",
        )
        assert run.poll() is None, log.read_text()
        sent = time.monotonic()
        run.send_signal(signum)  # once: one Ctrl-C, or a container stop
        ended = run.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if run.poll() is None:
            run.kill()
    output = log.read_text()
    assert ended == code, output
    assert took < 30, f"{took:.1f}s after one signal:\n{output}"
    assert "Traceback" not in output
    assert _flow_run_state(output) == "Cancelled", output
    _heals(fault_env)


def _flow_run_state(output: str) -> str:
    """The final state of the flow run a command line's output links to."""
    from uuid import UUID

    from prefect.client.orchestration import get_client

    found = re.search(r"/runs/flow-run/([0-9a-f-]{36})", output)
    assert found, output
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(UUID(found.group(1))).state
    assert state is not None
    return str(state.type.value).title()
