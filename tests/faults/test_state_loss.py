"""State lost or edited behind stackflow's back, on the real engine and the **local cloud** (moto on
loopback, not AWS): a checkpoint deleted while the records say the stack is deployed is refused
by name, never deployed a second time beside its orphaned resources (unless `--recreate` asks
for it); outputs edited under an intact stamp are never handed on as "unchanged"."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.faults.helpers import FaultEnv, backend_dir

pytestmark = pytest.mark.faults


def checkpoint_file(fault_env: FaultEnv, stack: str) -> Path:
    """The stack's checkpoint in the file backend."""
    folder = backend_dir(fault_env.state_dir) / "stacks" / f"stackflow-{stack}"
    return folder / f"{fault_env.environment}.json"


def vpcs(fault_env: FaultEnv) -> list[dict[str, Any]]:
    """The VPCs of this test's environment in the local cloud (by their tags)."""
    ec2 = fault_env.cloud.client("ec2")
    filters = [{"Name": "tag:environment", "Values": [fault_env.environment]}]
    return list(ec2.describe_vpcs(Filters=filters)["Vpcs"])


def test_lost_state_is_refused_by_name_and_edited_outputs_run_the_stack_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud, networking deployed:

    - its `vpc_id` output edited in the checkpoint, the stamp left intact: the next `up` runs the
      stack (its log says why) and the checkpoint holds the VPC's real id again;
    - its checkpoint deleted (the records still say deployed): `up` is refused with exit 2 before
      anything is created, naming the stack, the backend, how to restore and `--recreate`, and so
      is the deploy flow (the UI, a schedule, a sync); the cloud still holds one VPC;
    - the checkpoint put back: `up` skips it, no engine call;
    - deleted again, `up --recreate` deploys anew: a second VPC beside the orphaned first, as
      asked."""
    env = fault_env.environment
    first = fault_env.main("up", "--env", env, "--stacks", "networking")
    assert first.returncode == 0, first
    (vpc,) = vpcs(fault_env)
    path = checkpoint_file(fault_env, "networking")

    # outputs edited under an intact stamp: never "unchanged"
    saved = json.loads(path.read_text())
    edited = json.loads(path.read_text())
    (root,) = [
        r for r in edited["checkpoint"]["latest"]["resources"] if r["type"] == "pulumi:pulumi:Stack"
    ]
    assert root["outputs"]["vpc_id"] == vpc["VpcId"] and "_stackflow" in root["outputs"]
    root["outputs"]["vpc_id"] = "vpc-0123456789abcdef0"
    path.write_text(json.dumps(edited))
    rerun = fault_env.main("up", "--env", env, "--stacks", "networking", "--json")
    assert rerun.returncode == 0, rerun
    assert json.loads(rerun.stdout)["engine_calls"] == ["up:networking"], rerun
    assert re.search(
        rf"{env}/networking runs: its outputs in the backend \(vpc_id\) differ from those its "
        "last up recorded",
        rerun.log,
    ), rerun.log
    assert fault_env.outputs("networking")["networking"]["vpc_id"] == vpc["VpcId"]

    # the checkpoint lost, the records still saying deployed: refused, nothing created
    kept = tmp_path / "networking.json"
    shutil.copy(path, kept)
    path.unlink()
    refused = fault_env.main("up", "--env", env, "--stacks", "networking")
    assert refused.returncode == 2, refused
    error = refused.error_line
    assert f"the state of {env}/networking (deployed " in error, refused
    assert f"is gone from the backend file://{backend_dir(fault_env.state_dir).parent}" in error
    assert "a second copy" in error and "Nothing was changed." in error, refused
    what = next(line for line in refused.stderr.splitlines() if "what to do:" in line)
    assert f"put the folder {backend_dir(fault_env.state_dir).parent} back" in what, what
    assert f"up --env {env} --recreate" in what, what
    assert "engine operations" not in refused.output and not path.exists()
    # a run from the UI, a schedule or a sync checks the same in its flow
    from flows.pipeline import deploy

    flow_run = deploy(environment=env, stacks=["networking"], return_state=True)
    assert flow_run.is_failed(), flow_run
    assert f"the state of {env}/networking (deployed " in str(flow_run.message), flow_run.message
    assert [v["VpcId"] for v in vpcs(fault_env)] == [vpc["VpcId"]] and not path.exists()

    # restored from the backup: skipped as before
    shutil.copy(kept, path)
    skipped = fault_env.main("up", "--env", env, "--stacks", "networking")
    assert skipped.returncode == 0, skipped
    assert "engine operations: 0;" in skipped.stdout, skipped

    # lost again, and deployed anew on purpose: a second VPC beside the first
    path.unlink()
    recreated = fault_env.main("up", "--env", env, "--stacks", "networking", "--recreate")
    assert recreated.returncode == 0, recreated
    assert re.search(r"^networking\s+updated\s+\d+ ", recreated.stdout, re.M), recreated
    found = sorted(v["VpcId"] for v in vpcs(fault_env))
    assert len(found) == 2 and vpc["VpcId"] in found, found
    assert saved["checkpoint"]["latest"] is not None  # the backup was a real checkpoint
