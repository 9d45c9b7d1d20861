"""An update killed after the cloud made a resource but before Pulumi recorded its id, on the local
cloud: the stack's state holds a pending create of a resource the cloud has. The next `up` finds
it in the cloud, imports it with its id and completes; the cloud ends with exactly one of it.

The kill: a `hang` knob with `when: after` holds the plugin's answer once the create has reached
the cloud, then the run and its `pulumi` (with the plugin) are SIGKILLed, as a lost machine
would leave them. (A plugin that crashes alone leaves no pending create: Pulumi records the
create as failed.)"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stackflow.localcloud.knobs import get_knobs, set_knobs
from tests.faults.helpers import (
    FaultEnv,
    checkpoint,
    kill_groups,
    pending_operations,
    pulumi_pids,
    started,
    wait_until,
)

pytestmark = pytest.mark.faults

SUBNET = "aws:ec2/subnet:Subnet"
INSTANCE = "aws:rds/instance:Instance"


def kill_after_create(
    fault_env: FaultEnv, stack: str, kind: str, made: Callable[[dict[str, Any]], bool], log: Path
) -> dict[str, Any]:
    """Start `up --stacks <stack>` with the answer of one create of `kind` held after the cloud
    made it; once the state holds that pending create alone and `made(its inputs)` sees it in
    the cloud, SIGKILL the run and its `pulumi`. Returns the pending create."""
    env, state_dir = fault_env.environment, fault_env.state_dir
    fault = {"kind": "hang", "when": "after", "count": 1, "environment": env, "type": kind}
    set_knobs(fault_env.cloud.url, {"faults": [fault]})

    def held() -> dict[str, Any] | None:
        if not started(state_dir, env, stack):
            return None
        if any(f.count != 0 for f in get_knobs(fault_env.cloud.url).faults):
            return None  # the create has not reached the plugin yet
        try:
            pending = pending_operations(state_dir, env, stack)
        except (OSError, ValueError, KeyError):
            return None  # no state yet, or a write under way
        if [p["resource"]["type"] for p in pending] != [kind]:
            return None  # other creates still under way
        return pending[0] if made(pending[0]["resource"]["inputs"]) else None

    victim = fault_env.start("up", "--env", env, "--stacks", stack, log=log)
    try:
        wait_until(
            lambda: held() is not None or victim.poll() is not None,
            timeout=180,
            what=f"the {stack} `up` to hang after the cloud made a {kind}, alone",
            poll=0.3,
        )
        assert victim.poll() is None, f"the run ended before it could be killed:\n{log.read_text()}"
        (pulumi,) = pulumi_pids(state_dir, env, stack)
        kill_groups(victim.pid, pulumi)  # its `pulumi` leads a group of its own, with its plugins
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(timeout=30)
    # The held create is the only one of its type. Others may have begun between the moment the
    # state held it alone and the kill (a subnet's route table association, once the other
    # subnets were made): they are the next run's to heal too.
    left = pending_operations(state_dir, env, stack)
    (pending,) = [p for p in left if p["resource"]["type"] == kind]
    assert pending["type"] == "creating", left
    set_knobs(fault_env.cloud.url, {})
    return pending


def state_id(fault_env: FaultEnv, stack: str, urn: str) -> str:
    """The id the stack's state holds for `urn`."""
    resources = checkpoint(fault_env.state_dir, fault_env.environment, stack)["resources"]
    (resource,) = [r for r in resources if r["urn"] == urn]
    return str(resource["id"])


def test_an_rds_instance_made_before_the_kill_is_imported_not_made_twice_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: a database `up` killed after RDS created the instance (its fixed identifier
    refused every later create: DBInstanceAlreadyExists). The next `up` imports it as its resource
    id, completes, and says so in the summary; the cloud holds exactly one instance of it."""
    env = fault_env.environment
    rds = fault_env.cloud.client("rds")
    first = fault_env.main("up", "--env", env, "--stacks", "networking")
    assert first.returncode == 0, first

    def instances(identifier: str) -> list[dict[str, Any]]:
        found = rds.describe_db_instances()["DBInstances"]
        return [db for db in found if db["DBInstanceIdentifier"] == identifier]

    pending = kill_after_create(
        fault_env,
        "database",
        INSTANCE,
        lambda inputs: bool(instances(inputs["identifier"])),
        tmp_path / "killed.log",
    )
    identifier, urn = pending["resource"]["inputs"]["identifier"], pending["resource"]["urn"]
    (made,) = instances(identifier)

    healed = fault_env.main("up", "--env", env, "--stacks", "database")
    assert healed.returncode == 0, str(healed)
    # nothing left to create: the instance was the last, and it is imported, not made again
    assert re.search(r"^database\s+unchanged\s+0\s+0\s+0\s+0 ", healed.stdout, re.M), str(healed)
    imported = f"imported {INSTANCE} mysql as {made['DbiResourceId']}: the local cloud had made it"
    assert f"stack {env}/database: {imported}" in healed.log, str(healed)
    # the heal line names it among what it cleared (a create that began between the moment the
    # state held the instance's alone and the kill, such as the secret's version, is healed too)
    said = re.search(
        r"^database: recovered what an interrupted operation left: removed its lock; (.*)$",
        healed.stdout,
        re.MULTILINE,
    )
    assert said is not None and imported in said.group(1).split("; "), str(healed)
    # exactly one instance: the one made before the kill, in the state with its id
    assert [db["DbiResourceId"] for db in instances(identifier)] == [made["DbiResourceId"]]
    mine = [
        db for db in rds.describe_db_instances()["DBInstances"] if env in db["DBInstanceIdentifier"]
    ]
    assert len(mine) == 1, mine
    assert state_id(fault_env, "database", urn) == made["DbiResourceId"]
    assert pending_operations(fault_env.state_dir, env, "database") == []


def test_a_subnet_made_before_the_kill_is_imported_by_its_vpc_and_cidr_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: a networking `up` killed after EC2 created a subnet, which has no name to
    find it by. The next `up` finds it by its VPC and CIDR, imports it and completes; the cloud
    holds exactly the subnets the outputs name, that one among them, each once."""
    env = fault_env.environment
    ec2 = fault_env.cloud.client("ec2")

    def subnets(**by: str) -> list[dict[str, Any]]:
        filters = [{"Name": k.replace("_", "-"), "Values": [v]} for k, v in by.items()]
        return list(ec2.describe_subnets(Filters=filters)["Subnets"])

    pending = kill_after_create(
        fault_env,
        "networking",
        SUBNET,
        lambda inputs: bool(subnets(vpc_id=inputs["vpcId"], cidr_block=inputs["cidrBlock"])),
        tmp_path / "killed.log",
    )
    inputs, urn = pending["resource"]["inputs"], pending["resource"]["urn"]
    (made,) = subnets(vpc_id=inputs["vpcId"], cidr_block=inputs["cidrBlock"])

    healed = fault_env.main("up", "--env", env, "--stacks", "networking")
    assert healed.returncode == 0, str(healed)
    name = urn.rsplit("::", 1)[-1]
    imported = f"imported {SUBNET} {name} as {made['SubnetId']}: the local cloud had made it"
    assert f"stack {env}/networking: {imported}" in healed.log, str(healed)
    assert re.search(
        rf"^networking: recovered what an interrupted operation left: .*{re.escape(imported)}",
        healed.stdout,
        re.MULTILINE,
    ), str(healed)
    assert state_id(fault_env, "networking", urn) == made["SubnetId"]
    outputs = fault_env.outputs("networking")["networking"]
    declared = outputs["public_subnet_ids"] + outputs["private_subnet_ids"]
    in_cloud = subnets(vpc_id=inputs["vpcId"])
    assert sorted(s["SubnetId"] for s in in_cloud) == sorted(declared), (in_cloud, outputs)
    assert made["SubnetId"] in declared
    assert len({s["CidrBlock"] for s in in_cloud}) == len(in_cloud)  # each CIDR once
