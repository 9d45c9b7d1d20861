"""The families of AWS types the local cloud serves for rehearsals, through the real Pulumi
engine (CLI v3.259.0, Automation API) on the **local cloud** (moto on loopback behind the
project's own provider plugins, not AWS).

Two programs of the test's own group the families: messaging and data (DynamoDB, SQS, SNS,
EventBridge, Kinesis, KMS, CloudWatch, IAM users and policies, getPolicyDocument), and APIs and
compute (Lambda and what connects to it, API Gateway REST and v2, S3 access, EC2 instances and
getAmi, EKS). Each deploys, a preview right after changes nothing, reading the cloud back finds no
drift, a second version updates in place (tags, descriptions, settings: nothing replaced), and
the destroy leaves zero resources.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stackflow.engine import Listener, Operation, StackSpec
from stackflow.engine.automation import AutomationEngine
from stackflow.settings import get_settings
from tests.fixtures.localcloud import LocalCloud
from tests.realenv import unique

pytestmark = pytest.mark.integration

PROJECT = "families"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, local_cloud: LocalCloud) -> AutomationEngine:
    """One engine on the session's local cloud, with a state folder of its own."""
    settings = get_settings(
        cloud="local",
        state_dir=tmp_path_factory.mktemp("families-state"),
        localcloud={"dir": local_cloud.root, "port": local_cloud.port},
    )
    return AutomationEngine(settings)


def lifecycle(engine: AutomationEngine, node: str, program: Any) -> dict[str, Any]:
    """Deploy version 1, preview (0 changes), read back (no drift), deploy version 2 (updates in
    place only), destroy (everything); the outputs of version 2."""
    version = {"n": 1}
    spec = StackSpec(PROJECT, unique("dev"), node, lambda: program(version["n"]))
    up = engine.run(Operation.UP, spec, Listener())
    assert up.changes.create > 0 and up.changes.changed == up.changes.create
    try:
        preview = engine.run(Operation.PREVIEW, spec, Listener())
        assert preview.changes.changed == 0, preview.resource_changes
        drift = engine.run(Operation.DRIFT, spec, Listener())
        assert drift.changes.changed == 0, drift
        version["n"] = 2
        second = engine.run(Operation.UP, spec, Listener())
        assert second.changes.update > 0 and second.changes.replace == 0, second.resource_changes
        assert second.changes.create == 0 and second.changes.delete == 0
        again = engine.run(Operation.PREVIEW, spec, Listener())
        assert again.changes.changed == 0, again.resource_changes
    finally:
        down = engine.run(Operation.DESTROY, spec, Listener())
    assert down.changes.delete == up.changes.create
    engine.remove(spec)
    return {key: value.value for key, value in second.outputs.items()}


def _assume(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
            ],
        }
    )


def messaging(version: int) -> dict[str, Any]:
    import pulumi
    import pulumi_aws as aws

    tags = {"version": str(version)}
    table = aws.dynamodb.Table(
        "orders",
        attributes=[{"name": "id", "type": "S"}],
        hash_key="id",
        read_capacity=version,
        write_capacity=1,
        tags=tags,
    )
    queue = aws.sqs.Queue("jobs", visibility_timeout_seconds=30 * version, tags=tags)
    topic = aws.sns.Topic("events", display_name=f"events v{version}", tags=tags)
    aws.sns.TopicSubscription("to-jobs", topic=topic.arn, protocol="sqs", endpoint=queue.arn)
    document = aws.iam.get_policy_document_output(
        statements=[
            {
                "actions": ["sqs:SendMessage"],
                "resources": [queue.arn],
                "principals": [{"type": "Service", "identifiers": ["sns.amazonaws.com"]}],
            }
        ]
    )
    aws.sqs.QueuePolicy("jobs-policy", queue_url=queue.id, policy=document.json)
    bus = aws.cloudwatch.EventBus("bus", description="orders", tags=tags)
    rule = aws.cloudwatch.EventRule(
        "on-order",
        event_bus_name=bus.name,
        event_pattern=json.dumps({"source": ["shop.orders"]}),
        description=f"v{version}",
        tags=tags,
    )
    aws.cloudwatch.EventTarget(
        "to-topic",
        rule=rule.name,
        event_bus_name=bus.name,
        arn=topic.arn,
        input=f'{{"v": {version}}}',
    )
    aws.kinesis.Stream("clicks", shard_count=1, retention_period=24 * version, tags=tags)
    key = aws.kms.Key("data", description=f"data v{version}", tags=tags)
    aws.kms.Alias("data-alias", name=f"alias/{pulumi.get_stack()}-data", target_key_id=key.key_id)
    group = aws.cloudwatch.LogGroup("app", retention_in_days=7 * version, tags=tags)
    aws.cloudwatch.LogStream("app-stream", log_group_name=group.name)
    aws.cloudwatch.LogMetricFilter(
        "errors",
        log_group_name=group.name,
        pattern="ERROR" if version == 1 else "FATAL",
        metric_transformation={"name": "Errors", "namespace": "Shop", "value": "1"},
    )
    aws.cloudwatch.MetricAlarm(
        "busy",
        comparison_operator="GreaterThanOrEqualToThreshold",
        evaluation_periods=2,
        metric_name="CPUUtilization",
        namespace="AWS/EC2",
        period=120,
        statistic="Average",
        threshold=80 + version,
        tags=tags,
    )
    user = aws.iam.User("deployer", tags=tags)
    team = aws.iam.Group("deployers")
    aws.iam.GroupMembership("deployers-members", group=team.name, users=[user.name])
    key_pair = aws.iam.AccessKey(
        "deployer-key", user=user.name, status="Active" if version == 1 else "Inactive"
    )
    policy = aws.iam.Policy("read-orders", policy=document.json, tags=tags)
    aws.iam.UserPolicyAttachment("deployer-reads", user=user.name, policy_arn=policy.arn)
    aws.iam.GroupPolicyAttachment("deployers-read", group=team.name, policy_arn=policy.arn)
    return {
        "table": table.arn,
        "table_service": aws.get_arn_output(arn=table.arn).service,
        "partition": aws.get_partition().dns_suffix,
        "queue": queue.url,
        "document": document.json,
        "secret": key_pair.secret,
        "alias_target": key.arn,
    }


def test_messaging_and_data_families_deploy_update_in_place_and_destroy_on_the_local_cloud(
    engine: AutomationEngine, local_cloud: LocalCloud
) -> None:
    """DynamoDB, SQS, SNS, EventBridge, Kinesis, KMS, CloudWatch and IAM users and policies;
    getPolicyDocument, getArn and getPartition are computed as pulumi-aws computes them; the
    access key's secret is secret."""
    outputs = lifecycle(engine, "messaging", messaging)
    assert outputs["table"].startswith("arn:aws:dynamodb:")
    assert (outputs["table_service"], outputs["partition"]) == ("dynamodb", "amazonaws.com")
    statement = json.loads(outputs["document"])["Statement"][0]
    assert statement["Action"] == "sqs:SendMessage" and statement["Effect"] == "Allow"
    assert statement["Principal"] == {"Service": "sns.amazonaws.com"}
    tables = local_cloud.client("dynamodb").list_tables()["TableNames"]
    assert not [name for name in tables if name.startswith("orders-")], tables  # destroyed


def apis(code: Path) -> Any:
    def program(version: int) -> dict[str, Any]:
        import pulumi
        import pulumi_aws as aws

        tags = {"version": str(version)}
        role = aws.iam.Role("fn-role", assume_role_policy=_assume("lambda.amazonaws.com"))
        function = aws.lambda_.Function(
            "hello",
            role=role.arn,
            runtime="python3.12",
            handler="hello.handler",
            code=pulumi.AssetArchive({".": pulumi.FileArchive(str(code))}),
        )
        queue = aws.sqs.Queue("work")
        aws.lambda_.EventSourceMapping(
            "from-work",
            function_name=function.name,
            event_source_arn=queue.arn,
            batch_size=5 * version,
        )
        rest = aws.apigateway.RestApi("rest", description=f"v{version}")
        items = aws.apigateway.Resource(
            "items", rest_api=rest.id, parent_id=rest.root_resource_id, path_part="items"
        )
        method = aws.apigateway.Method(
            "get-items",
            rest_api=rest.id,
            resource_id=items.id,
            http_method="GET",
            authorization="NONE",
        )
        integration = aws.apigateway.Integration(
            "get-items",
            rest_api=rest.id,
            resource_id=items.id,
            http_method=method.http_method,
            type="AWS_PROXY",
            integration_http_method="POST",
            uri=function.invoke_arn,
            passthrough_behavior="WHEN_NO_MATCH" if version == 1 else "NEVER",
        )
        response = aws.apigateway.MethodResponse(
            "get-items-200",
            rest_api=rest.id,
            resource_id=items.id,
            http_method=method.http_method,
            status_code="200",
        )
        aws.apigateway.IntegrationResponse(
            "get-items-200",
            rest_api=rest.id,
            resource_id=items.id,
            http_method=method.http_method,
            status_code=response.status_code,
            opts=pulumi.ResourceOptions(depends_on=[integration]),
        )
        deployment = aws.apigateway.Deployment(
            "rest-deployment",
            rest_api=rest.id,
            opts=pulumi.ResourceOptions(depends_on=[integration]),
        )
        stage = aws.apigateway.Stage(
            "rest-stage",
            rest_api=rest.id,
            deployment=deployment.id,
            stage_name="live",
            description=f"v{version}",
            tags=tags,
        )
        aws.lambda_.Permission(
            "rest-invokes",
            action="lambda:InvokeFunction",
            function=function.name,
            principal="apigateway.amazonaws.com",
            source_arn=stage.execution_arn.apply(lambda arn: arn + "/*/*"),
        )
        http = aws.apigatewayv2.Api(
            "http", protocol_type="HTTP", description=f"v{version}", tags=tags
        )
        backend = aws.apigatewayv2.Integration(
            "http-backend",
            api_id=http.id,
            integration_type="AWS_PROXY",
            integration_method="POST",
            integration_uri=function.arn,
            description=f"v{version}",
        )
        route = aws.apigatewayv2.Route(
            "http-route",
            api_id=http.id,
            route_key="ANY /{proxy+}",
            target=backend.id.apply(lambda id: f"integrations/{id}"),
        )
        aws.apigatewayv2.Stage(
            "http-stage",
            api_id=http.id,
            auto_deploy=True,
            opts=pulumi.ResourceOptions(depends_on=[route]),
        )
        bucket = aws.s3.Bucket("public", tags=tags)
        ownership = aws.s3.BucketOwnershipControls(
            "public",
            bucket=bucket.bucket,
            rule={"object_ownership": "BucketOwnerPreferred" if version == 1 else "ObjectWriter"},
        )
        access = aws.s3.BucketPublicAccessBlock(
            "public", bucket=bucket.bucket, block_public_acls=False
        )
        aws.s3.BucketAcl(
            "public",
            bucket=bucket.bucket,
            acl="public-read",
            opts=pulumi.ResourceOptions(depends_on=[ownership, access]),
        )
        ami = aws.ec2.get_ami(
            most_recent=True,
            owners=["amazon"],
            filters=[{"name": "name", "values": ["amzn2-ami-hvm-*"]}],
        )
        instance = aws.ec2.Instance(
            "web", ami=ami.id, instance_type="t3.micro", tags={"Name": f"web v{version}"}
        )
        cluster_role = aws.iam.Role("eks-role", assume_role_policy=_assume("eks.amazonaws.com"))
        subnets = aws.ec2.get_subnets(filters=[{"name": "default-for-az", "values": ["true"]}]).ids
        cluster = aws.eks.Cluster(
            "eks", role_arn=cluster_role.arn, vpc_config={"subnet_ids": subnets[:2]}, tags=tags
        )
        node_role = aws.iam.Role("node-role", assume_role_policy=_assume("ec2.amazonaws.com"))
        aws.eks.NodeGroup(
            "nodes",
            cluster_name=cluster.name,
            node_role_arn=node_role.arn,
            subnet_ids=subnets[:2],
            scaling_config={"desired_size": version, "max_size": 2, "min_size": 1},
        )
        return {
            "invoke_url": stage.invoke_url,
            "http_endpoint": http.api_endpoint,
            "instance_state": instance.instance_state,
            "certificate": cluster.certificate_authority.apply(lambda c: c.data),
        }

    return program


def test_api_and_compute_families_deploy_update_in_place_and_destroy_on_the_local_cloud(
    engine: AutomationEngine, local_cloud: LocalCloud, tmp_path: Path
) -> None:
    """Lambda with an event source mapping and a permission, API Gateway REST and v2, S3
    ownership controls and ACL, an EC2 instance from getAmi, EKS's control plane."""
    code = tmp_path / "hello"
    code.mkdir()
    (code / "hello.py").write_text("def handler(event, context):\n    return 'hello'\n")
    outputs = lifecycle(engine, "apis", apis(code))
    assert outputs["invoke_url"].endswith("/live")
    assert outputs["http_endpoint"].startswith("https://")
    assert outputs["instance_state"] == "running" and outputs["certificate"]
    clusters = local_cloud.client("eks").list_clusters()["clusters"]
    assert not [name for name in clusters if name.startswith("eks-")], clusters  # destroyed
