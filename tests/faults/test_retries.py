"""Retries on the local cloud: an AWS error a retry may get past (Throttling) is retried exactly as
often as it happens; a permanent one never; retries stop at STACKFLOW_STACK_RETRIES.

The faults come from the local cloud's knobs: the provider plugin refuses the VPC's create with AWS's
own error code, the real Pulumi CLI fails the update, and the flow's retry policy decides. Each case
deploys only the networking stack of an environment of its own. Attempts are counted three ways:
what the knob consumed, the Prefect task run's run count, and Pulumi's own update history.
"""

from __future__ import annotations

from typing import Any

import pytest

from stackflow.localcloud.knobs import get_knobs, set_knobs
from tests.faults.helpers import FaultEnv, statuses, task_runs
from tests.realenv import update_history

pytestmark = pytest.mark.faults

VPC = "aws:ec2/vpc:Vpc"


def fault_on_the_vpc(fault_env: FaultEnv, kind: str, count: int, **extra: Any) -> None:
    """A fault on the create of this environment's VPC (networking stack) only."""
    fault = {
        "kind": kind,
        "count": count,
        "environment": fault_env.environment,
        "node": "networking",
        "type": VPC,
        "operations": ["create"],
        **extra,
    }
    set_knobs(fault_env.cloud.url, {"faults": [fault]})


def faults_left(fault_env: FaultEnv) -> int:
    """How many hits the environment's fault has left (each attempt that reached it took one)."""
    (fault,) = [
        f for f in get_knobs(fault_env.cloud.url).faults if f.environment == fault_env.environment
    ]
    assert fault.count is not None
    return fault.count


def update_results(fault_env: FaultEnv) -> list[str]:
    """The result of every update of the networking stack, oldest first (Pulumi's history)."""
    history = update_history(fault_env.state_dir, fault_env.environment, "networking")
    return [record["result"] for record in history if record["kind"] == "update"]


def vpcs_of(fault_env: FaultEnv) -> list[str]:
    """The VPCs the local cloud holds for this environment."""
    ec2 = fault_env.cloud.client("ec2")
    found = ec2.describe_vpcs(
        Filters=[{"Name": "tag:environment", "Values": [fault_env.environment]}]
    )["Vpcs"]
    return [vpc["VpcId"] for vpc in found]


def test_throttling_is_retried_exactly_n_times_then_succeeds_on_the_local_cloud(
    fault_env: FaultEnv,
) -> None:
    """Local cloud: two Throttling refusals of the VPC's create: three attempts (the knob's two hits
    consumed, the task run ran three times, Pulumi recorded two failed updates then a successful
    one), the third succeeds, and the cloud holds exactly one VPC."""
    from flows.pipeline import deploy

    fault_on_the_vpc(fault_env, "transient", 2, code="Throttling")
    state = deploy(environment=fault_env.environment, stacks=["networking"], return_state=True)
    assert state.is_completed(), state
    summary = state.result()
    assert summary["engine_calls"].count("up:networking") == 3, summary["engine_calls"]
    assert statuses(summary)["networking"] == "updated"
    assert task_runs(state)["up-networking"].run_count == 3
    [networking] = summary["stacks"]
    assert len(networking["retries"]) == 2  # the summary tells each retry and why
    assert all("Throttling" in reason for reason in networking["retries"]), networking
    assert faults_left(fault_env) == 0  # both refusals were met
    assert update_results(fault_env) == ["failed", "failed", "succeeded"]
    assert len(vpcs_of(fault_env)) == 1


def test_permanent_aws_error_is_not_retried_on_the_local_cloud(fault_env: FaultEnv) -> None:
    """Local cloud: an InvalidParameterValue (a refusal no retry fixes) on the VPC's create: one
    attempt only (one of the knob's five hits consumed, one task run attempt, one failed update),
    and the deploy fails naming the stack and AWS's error code."""
    from flows.pipeline import PipelineFailed, deploy

    fault_on_the_vpc(fault_env, "permanent", 5)
    state = deploy(environment=fault_env.environment, stacks=["networking"], return_state=True)
    assert state.is_failed(), state
    with pytest.raises(
        PipelineFailed,
        match=rf"stack '{fault_env.environment}/networking'.*api error InvalidParameterValue",
    ):
        state.result()
    run = task_runs(state)["up-networking"]
    assert run.run_count == 1, run
    assert run.state is not None and run.state.is_failed()
    assert faults_left(fault_env) == 4
    assert update_results(fault_env) == ["failed"]
    assert vpcs_of(fault_env) == []


def test_throttling_beyond_the_retry_budget_fails_naming_the_stack_on_the_local_cloud(
    fault_env: FaultEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local cloud: more Throttling refusals than STACKFLOW_STACK_RETRIES allows: retries stop at
    the budget (1 retry: two attempts, two of the knob's five hits consumed) and the deploy fails
    naming the stack and AWS's error code."""
    from flows.pipeline import PipelineFailed, deploy

    monkeypatch.setenv("STACKFLOW_STACK_RETRIES", "1")
    fault_on_the_vpc(fault_env, "transient", 5, code="Throttling")
    state = deploy(environment=fault_env.environment, stacks=["networking"], return_state=True)
    with pytest.raises(
        PipelineFailed,
        match=rf"stack '{fault_env.environment}/networking'.*api error Throttling",
    ) as failed:
        state.result()
    assert failed.value.summary is not None
    [networking] = failed.value.summary["stacks"]
    # one retry told with its reason; the last attempt failed the run and is not called a retry
    assert networking["status"] == "failed" and len(networking["retries"]) == 1, networking
    assert "Throttling" in networking["retries"][0]
    assert task_runs(state)["up-networking"].run_count == 2
    assert faults_left(fault_env) == 3
    assert update_results(fault_env) == ["failed", "failed"]
