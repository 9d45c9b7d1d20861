"""The programs tests/integration/test_served_families.py deploys on the local cloud, one per
group of served families; each takes a version (1, then 2: what changes updates in place)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Program = Callable[[int], dict[str, Any]]


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


def apis(code: Path) -> Program:
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


SCHEMA = """
type Query { tenant(id: ID!): Tenant }
type Tenant { id: ID! name: String }
schema { query: Query }
"""


def edge(owned: str) -> Program:
    """DNS, certificates, the CDN and GraphQL: a zone of its own with a record; in `owned` (a zone
    that exists already, found by name as a domain you own) a certificate's validation record and
    an alias to the distribution; the certificate made by a provider that assumes a role; an
    AppSync API named with a random string, and its key."""

    def program(version: int) -> dict[str, Any]:
        import pulumi
        import pulumi_aws as aws
        import pulumi_random as random

        tags = {"version": str(version)}
        zone = aws.route53.Zone(
            "internal",
            name=f"{pulumi.get_stack()}.internal.test",
            comment=f"v{version}",
            force_destroy=True,
            tags=tags,
        )
        api_record = aws.route53.Record(
            "api",
            zone_id=zone.zone_id,
            name="api",
            type="A",
            ttl=60 * version,
            records=["10.0.0.1"],
        )
        parent = aws.route53.get_zone(name=owned)
        account = aws.get_caller_identity().account_id
        deployer = aws.iam.Role(
            "edge-deployer",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )
        east = aws.Provider(  # a provider that works as another role, as teams deploy
            "east",
            region="us-east-1",
            assume_roles=[{"role_arn": deployer.arn, "session_name": "edge"}],
        )
        caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(provider=east))
        certificate = aws.acm.Certificate(
            "site",
            domain_name=f"www.{owned}",
            validation_method="DNS",
            tags=tags,
            opts=pulumi.ResourceOptions(provider=east),
        )
        option = certificate.domain_validation_options[0]
        proof = aws.route53.Record(
            "site-validation",
            zone_id=parent.zone_id,
            name=option.resource_record_name,
            type=option.resource_record_type,
            records=[option.resource_record_value],
            ttl=600,
        )
        validated = aws.acm.CertificateValidation(
            "site",
            certificate_arn=certificate.arn,
            validation_record_fqdns=[proof.fqdn],
            opts=pulumi.ResourceOptions(provider=east),
        )
        cdn = aws.cloudfront.Distribution(
            "cdn",
            enabled=True,
            comment=f"v{version}",
            aliases=[f"www.{owned}"],
            origins=[
                {
                    "origin_id": "site",
                    "domain_name": api_record.fqdn,
                    "custom_origin_config": {
                        "http_port": 80,
                        "https_port": 443,
                        "origin_protocol_policy": "http-only",
                        "origin_ssl_protocols": ["TLSv1.2"],
                    },
                }
            ],
            default_root_object="index.html",
            default_cache_behavior={
                "target_origin_id": "site",
                "viewer_protocol_policy": "redirect-to-https",
                "allowed_methods": ["GET", "HEAD", "OPTIONS"],
                "cached_methods": ["GET", "HEAD"],
                "forwarded_values": {"query_string": False, "cookies": {"forward": "none"}},
                "default_ttl": 600 * version,
                "max_ttl": 3600,
            },
            custom_error_responses=[
                {"error_code": 404, "response_code": 404, "response_page_path": "/404.html"}
            ],
            restrictions={"geo_restriction": {"restriction_type": "none"}},
            viewer_certificate={
                "acm_certificate_arn": validated.certificate_arn,
                "ssl_support_method": "sni-only",
            },
            wait_for_deployment=False,
            tags=tags,
        )
        aws.route53.Record(
            "www",
            zone_id=parent.zone_id,
            name="www",
            type="A",
            aliases=[
                {
                    "name": cdn.domain_name,
                    "zone_id": cdn.hosted_zone_id,
                    "evaluate_target_health": version == 2,
                }
            ],
        )
        suffix = random.RandomString("graph-suffix", length=8, special=False, upper=False)
        graph = aws.appsync.GraphQLApi(
            "graph",
            name=suffix.result.apply(lambda tail: f"graph-{tail}"),
            authentication_type="API_KEY",
            schema=SCHEMA,
            xray_enabled=version == 2,
            tags=tags,
        )
        key = aws.appsync.ApiKey("graph", api_id=graph.id, description=f"v{version}")
        return {
            "name_servers": zone.name_servers,
            "api": api_record.fqdn,
            "certificate": certificate.status,
            "cdn": cdn.domain_name,
            "graphql": graph.uris["GRAPHQL"],
            "graph_name": graph.name,
            "caller": caller.arn,
            "key": key.key,
        }

    return program
