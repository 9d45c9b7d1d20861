"""A create whose answer was lost, on the real engine and the **local cloud** (moto on loopback, not
AWS): the aws plugin crashes right after RDS made the instance (a `crash` knob with `when:
after`), so Pulumi records the create as failed and leaves no pending create; the cloud holds
the instance and every later create of it meets `DBInstanceAlreadyExists`. The next `up` adopts
it when its tags prove it the stack's and runs again; what is not provably the stack's is refused
by name, and nothing is adopted."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from stackflow.localcloud.knobs import set_knobs
from tests.faults.helpers import FaultEnv, checkpoint, pending_operations

pytestmark = pytest.mark.faults

INSTANCE = "aws:rds/instance:Instance"


def resources_of(fault_env: FaultEnv, stack: str, kind: str) -> list[dict[str, Any]]:
    """The resources of `kind` the stack's state holds."""
    found = checkpoint(fault_env.state_dir, fault_env.environment, stack).get("resources") or []
    return [r for r in found if r["type"] == kind]


def test_a_lost_create_is_adopted_when_its_tags_name_the_stack_and_refused_otherwise(
    fault_env: FaultEnv,
) -> None:
    """Local cloud:

    - the aws plugin crashes right after RDS made the instance: the `up` fails, and the state
      holds no instance and no pending create;
    - the instance's tags changed to name another environment (someone else's, as far as can be
      told): `up` fails on DBInstanceAlreadyExists naming the instance, its tags and what to do;
      nothing is adopted;
    - its tags as the program set them: `up --recreate` adopts nothing (it deploys anew on
      purpose, and fails on DBInstanceAlreadyExists); the next `up` adopts it (its tags name this project,
      environment and stack, and no state holds it), runs again and completes; the summary says
      so; the cloud holds that one instance, which the state holds by its id; a second `up`
      makes no engine call."""
    env = fault_env.environment
    rds = fault_env.cloud.client("rds")
    first = fault_env.main("up", "--env", env, "--stacks", "networking")
    assert first.returncode == 0, first

    crash = {"kind": "crash", "when": "after", "count": 1, "environment": env, "type": INSTANCE}
    set_knobs(fault_env.cloud.url, {"faults": [crash]})
    crashed = fault_env.main("up", "--env", env, "--stacks", "database")
    assert crashed.returncode == 1, crashed
    set_knobs(fault_env.cloud.url, {})

    def instances() -> list[dict[str, Any]]:
        found = rds.describe_db_instances()["DBInstances"]
        return [db for db in found if db["DBInstanceIdentifier"].startswith(f"stackflow-{env}-")]

    (made,) = instances()
    assert resources_of(fault_env, "database", INSTANCE) == []
    assert pending_operations(fault_env.state_dir, env, "database") == []  # nothing to heal there

    arn = made["DBInstanceArn"]
    rds.add_tags_to_resource(ResourceName=arn, Tags=[{"Key": "environment", "Value": "other"}])
    refused = fault_env.main("up", "--env", env, "--stacks", "database")
    assert refused.returncode == 1, refused
    assert re.search(
        "AWS refused to create what exists already, and it was not adopted from the local "
        rf"cloud: {re.escape(INSTANCE)} mysql \(DBInstanceAlreadyExists\): "
        rf"{made['DbiResourceId']} is tagged environment='other': not this project, environment "
        "and stack. Delete what is not this stack's, or `pulumi import` it; nothing was changed",
        refused.error_line,
    ), refused
    assert resources_of(fault_env, "database", INSTANCE) == []

    rds.add_tags_to_resource(ResourceName=arn, Tags=[{"Key": "environment", "Value": env}])
    # `--recreate` deploys anew on purpose: it adopts nothing
    anew = fault_env.main("up", "--env", env, "--stacks", "database", "--recreate")
    assert anew.returncode == 1, anew
    assert "AWS refused the request (DBInstanceAlreadyExists" in anew.error_line, anew
    assert f"adopted {INSTANCE}" not in anew.output and not resources_of(
        fault_env, "database", INSTANCE
    )

    healed = fault_env.main("up", "--env", env, "--stacks", "database", "--json")
    assert healed.returncode == 0, healed
    (database,) = json.loads(healed.stdout)["stacks"]
    adopted = (
        f"adopted {INSTANCE} mysql as {made['DbiResourceId']}: the local cloud had made it "
        "(DBInstanceAlreadyExists)"
    )
    assert adopted in database["healed"] and database["status"] == "updated", database
    assert f"stack {env}/database: {adopted}" in healed.log, healed.log
    trail = json.loads(fault_env.main("audit", "--env", env, "--json").stdout)["entries"]
    imported = [e for e in trail if e["action"] == "pending.imported" and e["stack"] == "database"]
    assert [r["id"] for e in imported for r in e["details"]["resources"]] == [
        made["DbiResourceId"]
    ], imported  # the state edit is in the audit log, as a recovery's import is
    assert [db["DbiResourceId"] for db in instances()] == [made["DbiResourceId"]]
    (held,) = resources_of(fault_env, "database", INSTANCE)
    assert held["id"] == made["DbiResourceId"], held
    again = fault_env.main("up", "--env", env, "--stacks", "database")
    assert again.returncode == 0 and "engine operations: 0;" in again.stdout, again
