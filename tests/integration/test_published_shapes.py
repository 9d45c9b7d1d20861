"""Published pulumi/examples Python programs' shapes (tests/integration/published_shapes.py), and
RDS inputs AWS refuses, through the real Pulumi engine (CLI v3.259.0, Automation API) on the
**local cloud** (moto on loopback behind the project's own provider plugins, not AWS).

Each program deploys, a preview right after shows 0 changes, reading the cloud back finds no
drift (what the plugins read is what they created), and it is destroyed; what AWS
refuses fails the update with AWS's own error, naming the stack, before anything is created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stackflow.engine import Listener, Operation, StackSpec
from stackflow.engine.automation import AutomationEngine
from stackflow.errors import StackError
from tests.fixtures.localcloud import LocalCloud
from tests.integration import published_shapes as shapes
from tests.realenv import unique

pytestmark = pytest.mark.integration

PROJECT = "shapes"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, local_cloud: LocalCloud) -> AutomationEngine:
    """One engine on the session's local cloud, with a state folder of its own."""
    return AutomationEngine(local_cloud.settings(tmp_path_factory.mktemp("shapes-state")))


def lifecycle(engine: AutomationEngine, node: str, program: shapes.ProgramFn) -> dict[str, Any]:
    """Deploy, preview (0 changes), read the cloud back (no drift), destroy; the outputs of the
    deploy."""
    spec = StackSpec(PROJECT, unique("dev"), node, program)
    up = engine.run(Operation.UP, spec, Listener())
    assert up.changes.create > 0 and up.changes.changed == up.changes.create
    try:
        preview = engine.run(Operation.PREVIEW, spec, Listener())
        assert preview.changes.changed == 0, preview.resource_changes
        assert preview.changes.same == up.changes.create
        drift = engine.run(Operation.DRIFT, spec, Listener())
        assert drift.changes.changed == 0, drift
    finally:
        down = engine.run(Operation.DESTROY, spec, Listener())
    assert down.changes.delete == up.changes.create
    engine.remove(spec)
    return {key: value.value for key, value in up.outputs.items()}


def test_s3_folder_shape_deploys_previews_clean_and_destroys(
    engine: AutomationEngine, local_cloud: LocalCloud, tmp_path: Path
) -> None:
    """aws-py-s3-folder's shape on the local cloud: the objects are in the bucket as uploaded,
    with the policy, the website endpoint is AWS's, and all of it goes with destroy."""
    site = tmp_path / "www"
    site.mkdir()
    (site / "index.html").write_text("<h1>hello from the local cloud</h1>")
    (site / "favicon.png").write_bytes(bytes(range(256)))
    seen: dict[str, Any] = {}
    spec = StackSpec(PROJECT, unique("dev"), "s3folder", shapes.s3_folder(site))
    up = engine.run(Operation.UP, spec, Listener())
    try:
        bucket = up.outputs["bucket"].value
        s3 = local_cloud.client("s3")
        body = s3.get_object(Bucket=bucket, Key="index.html")
        seen["index"] = (body["Body"].read(), body["ContentType"])
        seen["png"] = s3.get_object(Bucket=bucket, Key="favicon.png")["Body"].read()
        seen["policy"] = s3.get_bucket_policy(Bucket=bucket)["Policy"]
        assert up.outputs["url"].value == f"{bucket}.s3-website-eu-west-1.amazonaws.com"
        preview = engine.run(Operation.PREVIEW, spec, Listener())
        assert preview.changes.changed == 0, preview.resource_changes
        assert engine.run(Operation.DRIFT, spec, Listener()).changes.changed == 0
    finally:
        engine.run(Operation.DESTROY, spec, Listener())
    assert seen["index"] == (b"<h1>hello from the local cloud</h1>", "text/html")
    assert seen["png"] == bytes(range(256))
    assert f"arn:aws:s3:::{bucket}/*" in seen["policy"]
    assert bucket not in [b["Name"] for b in local_cloud.client("s3").list_buckets()["Buckets"]]


def test_fargate_shape_with_get_vpc_and_a_listener_without_protocol(
    engine: AutomationEngine,
) -> None:
    """aws-py-fargate's shape: getVpc/getSubnets find the default VPC, and a listener without
    `protocol` deploys with pulumi-aws's default for an application load balancer, HTTP."""
    outputs = lifecycle(engine, "fargate", shapes.fargate())
    assert outputs["listener_protocol"] == "HTTP"
    assert outputs["vpc_id"].startswith("vpc-") and outputs["subnet_count"] >= 2


def test_wordpress_fargate_rds_shape(engine: AutomationEngine) -> None:
    """aws-py-wordpress-fargate-rds's shape: its own VPC with an inline route, MySQL 5.7 on RDS
    (served by the data plane), WordPress on Fargate behind a listener without protocol."""
    outputs = lifecycle(engine, "wordpress", shapes.wordpress())
    assert outputs["listener_protocol"] == "HTTP"
    assert str(outputs["db_host"]).startswith("127.")


def test_stepfunctions_shape_with_a_lambda_code_archive(
    engine: AutomationEngine, local_cloud: LocalCloud, tmp_path: Path
) -> None:
    """aws-py-stepfunctions's shape: the Lambda function holds the folder's code as a zip."""
    code = tmp_path / "step_hello"
    code.mkdir()
    (code / "hello.py").write_text("def handler(event, context):\n    return 'hello'\n")
    names: dict[str, str] = {}

    def program() -> dict[str, Any]:
        exports = shapes.stepfunctions(code)()
        exports["function"].apply(lambda name: names.setdefault("function", name))
        return exports

    outputs = lifecycle(engine, "stepfunctions", program)
    assert outputs["machine"].startswith("arn:aws:states:")
    lambdas = local_cloud.client("lambda").list_functions()["Functions"]
    assert outputs["function"] not in [f["FunctionName"] for f in lambdas]


def test_cache_and_registry_stack(engine: AutomationEngine) -> None:
    """The other types teams use, in one stack of the project's own: an ElastiCache subnet
    group, replication group and cluster (no data plane: nothing answers on their endpoints),
    an ECR repository with a lifecycle policy, a BucketV2 (pulumi-aws 7's deprecated alias) with
    a BucketObjectv2, and the deprecated getSubnetIds."""
    outputs = lifecycle(engine, "cache", shapes.cache_and_registry())
    assert outputs["repository_url"].endswith(".amazonaws.com/" + outputs["repository"])
    assert outputs["subnet_ids"] and outputs["primary"]


def test_secrets_manager_shape(engine: AutomationEngine) -> None:
    """aws-py-secrets-manager's shape."""
    outputs = lifecycle(engine, "secrets", shapes.secrets_manager())
    assert outputs["secret_id"].startswith("arn:aws:secretsmanager:")


def _mysql(**overrides: Any) -> shapes.ProgramFn:
    def program() -> dict[str, Any]:
        import pulumi_aws as aws

        args: dict[str, Any] = {
            "engine": "mysql",
            "engine_version": "8.0",
            "instance_class": "db.t4g.micro",
            "allocated_storage": 20,
            "username": "admin",
            "password": "not-a-real-password",
            "skip_final_snapshot": True,
            **overrides,
        }
        return {"address": aws.rds.Instance("refused-db", **args).address}

    return program


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"engine_version": "8.0.99"}, "Cannot find version 8.0.99 for mysql"),
        ({"engine_version": "9.99"}, "Cannot find version 9.99 for mysql"),
        (
            {"instance_class": "db.foo.huge"},
            "RDS does not support creating a DB instance with the following combination: "
            "DBInstanceClass=db.foo.huge, Engine=mysql",
        ),
        (
            {"allocated_storage": 5},
            "Invalid storage size for engine name mysql and storage type gp2: 5",
        ),
    ],
    ids=["version-8.0.99", "version-9.99", "class-db.foo.huge", "storage-5GiB"],
)
def test_rds_inputs_aws_refuses_fail_as_aws_says_naming_the_stack(
    engine: AutomationEngine, local_cloud: LocalCloud, overrides: dict[str, Any], message: str
) -> None:
    """An RDS MySQL instance AWS would refuse is refused on the local cloud too, with AWS's code
    and message, and the error names the stack; no instance is created."""
    spec = StackSpec(PROJECT, unique("dev"), "refused", _mysql(**overrides))
    before = {
        db["DBInstanceIdentifier"]
        for db in local_cloud.client("rds").describe_db_instances()["DBInstances"]
    }
    try:
        with pytest.raises(StackError) as failed:
            engine.run(Operation.UP, spec, Listener())
    finally:
        engine.run(Operation.DESTROY, spec, Listener())
        engine.remove(spec)
    text = str(failed.value)
    assert "api error InvalidParameterCombination: " + message in text, text
    assert "operation error RDS: CreateDBInstance" in text
    assert spec.label in text or spec.environment in text, text
    after = {
        db["DBInstanceIdentifier"]
        for db in local_cloud.client("rds").describe_db_instances()["DBInstances"]
    }
    assert after == before
