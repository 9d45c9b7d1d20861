"""Programs of the project's own with the resource types and inputs of five published
pulumi/examples Python programs (written here, not copied), plus a cache-and-registry stack: what a
team brings to a rehearsal on the local cloud (moto on loopback, not AWS). Each function's
docstring names the example whose shape it has; the README lists them with their types.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ProgramFn = Callable[[], dict[str, Any]]


def _assume_role(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    )


def _open_group(name: str, vpc_id: Any, port: int, description: str) -> Any:
    import pulumi_aws as aws

    return aws.ec2.SecurityGroup(
        name,
        vpc_id=vpc_id,
        description=description,
        ingress=[
            {"protocol": "tcp", "from_port": port, "to_port": port, "cidr_blocks": ["0.0.0.0/0"]}
        ],
        egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"]}],
    )


def s3_folder(site: Path) -> ProgramFn:
    """aws-py-s3-folder's shape: every file of `site` (absolute paths) as a public website."""

    def program() -> dict[str, Any]:
        import mimetypes

        import pulumi
        import pulumi_aws as aws

        bucket = aws.s3.Bucket("site-bucket")
        website = aws.s3.BucketWebsiteConfiguration(
            "site", bucket=bucket.bucket, index_document={"suffix": "index.html"}
        )
        access = aws.s3.BucketPublicAccessBlock(
            "site-access", bucket=bucket.id, block_public_acls=False
        )
        for path in sorted(site.iterdir()):
            aws.s3.BucketObject(
                path.name,
                bucket=bucket.id,
                source=pulumi.FileAsset(str(path)),
                content_type=mimetypes.guess_type(str(path))[0],
            )
        policy = pulumi.Output.json_dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": "*",
                        "Action": ["s3:GetObject"],
                        "Resource": [pulumi.Output.format("arn:aws:s3:::{0}/*", bucket.id)],
                    }
                ],
            }
        )
        aws.s3.BucketPolicy(
            "site-policy",
            bucket=bucket.id,
            policy=policy,
            opts=pulumi.ResourceOptions(depends_on=[access]),
        )
        return {"bucket": bucket.id, "url": website.website_endpoint}

    return program


def _fargate_service(
    name: str,
    vpc_id: Any,
    subnet_ids: Any,
    group_ids: list[Any],
    image: str,
    environment: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An ECS Fargate service behind an application load balancer, as both examples build it."""
    import pulumi
    import pulumi_aws as aws

    cluster = aws.ecs.Cluster(f"{name}-cluster")
    balancer = aws.lb.LoadBalancer(f"{name}-lb", security_groups=group_ids, subnets=subnet_ids)
    target = aws.lb.TargetGroup(
        f"{name}-tg",
        port=80,
        protocol="HTTP",
        target_type="ip",
        vpc_id=vpc_id,
        health_check={"healthy_threshold": 2, "interval": 5, "timeout": 4, "matcher": "200-399"},
    )
    listener = aws.lb.Listener(  # no protocol: pulumi-aws's default (HTTP) applies
        f"{name}-web",
        load_balancer_arn=balancer.arn,
        port=80,
        default_actions=[{"type": "forward", "target_group_arn": target.arn}],
    )
    role = aws.iam.Role(f"{name}-exec", assume_role_policy=_assume_role("ecs-tasks.amazonaws.com"))
    aws.iam.RolePolicyAttachment(
        f"{name}-exec-policy",
        role=role.name,
        policy_arn="arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy",
    )
    container = {
        "name": f"{name}-app",
        "image": image,
        "portMappings": [{"containerPort": 80, "hostPort": 80, "protocol": "tcp"}],
        "environment": environment or [],
    }
    task = aws.ecs.TaskDefinition(
        f"{name}-task",
        family=f"{name}-family",
        cpu="256",
        memory="512",
        network_mode="awsvpc",
        requires_compatibilities=["FARGATE"],
        execution_role_arn=role.arn,
        container_definitions=pulumi.Output.json_dumps([container]),
    )
    aws.ecs.Service(
        f"{name}-svc",
        cluster=cluster.arn,
        desired_count=2,
        launch_type="FARGATE",
        task_definition=task.arn,
        network_configuration={
            "assign_public_ip": True,
            "subnets": subnet_ids,
            "security_groups": group_ids,
        },
        load_balancers=[
            {"target_group_arn": target.arn, "container_name": f"{name}-app", "container_port": 80}
        ],
        opts=pulumi.ResourceOptions(depends_on=[listener]),
    )
    return {"url": balancer.dns_name, "listener_protocol": listener.protocol}


def fargate() -> ProgramFn:
    """aws-py-fargate's shape: nginx on Fargate in the default VPC."""

    def program() -> dict[str, Any]:
        import pulumi_aws as aws

        vpc = aws.ec2.get_vpc(default=True)
        subnets = aws.ec2.get_subnets(filters=[{"name": "vpc-id", "values": [vpc.id]}])
        group = _open_group("web-group", vpc.id, 80, "HTTP in")
        exports = _fargate_service("web", vpc.id, subnets.ids, [group.id], "nginx")
        return {**exports, "vpc_id": vpc.id, "subnet_count": len(subnets.ids)}

    return program


def wordpress() -> ProgramFn:
    """aws-py-wordpress-fargate-rds's shape: a VPC of its own, MySQL 5.7 on RDS, WordPress."""

    def program() -> dict[str, Any]:
        import pulumi
        import pulumi_aws as aws
        import pulumi_random as random

        vpc = aws.ec2.Vpc(
            "wp-vpc",
            cidr_block="10.100.0.0/16",
            instance_tenancy="default",
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": "wp-vpc"},
        )
        gateway = aws.ec2.InternetGateway("wp-igw", vpc_id=vpc.id)
        table = aws.ec2.RouteTable(
            "wp-rt",
            vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}],
        )
        zones = aws.get_availability_zones().names[:2]
        subnets = []
        for index, zone in enumerate(zones):
            subnet = aws.ec2.Subnet(
                f"wp-subnet-{zone}",
                vpc_id=vpc.id,
                cidr_block=f"10.100.{index}.0/24",
                availability_zone=zone,
                map_public_ip_on_launch=True,
                assign_ipv6_address_on_creation=False,
            )
            aws.ec2.RouteTableAssociation(
                f"wp-rta-{zone}", route_table_id=table.id, subnet_id=subnet.id
            )
            subnets.append(subnet.id)
        db_group = _open_group("wp-db-group", vpc.id, 3306, "MySQL in")
        web_group = _open_group("wp-web-group", vpc.id, 80, "HTTP in")
        password = random.RandomPassword(
            "wp-password", length=16, special=True, override_special="_%@"
        )
        subnet_group = aws.rds.SubnetGroup("wp-db-subnets", subnet_ids=subnets)
        db = aws.rds.Instance(
            "wp-db",
            db_name="lampdb",
            allocated_storage=20,
            engine="mysql",
            engine_version="5.7",
            instance_class="db.t3.micro",
            storage_type="gp2",
            db_subnet_group_name=subnet_group.id,
            username="admin",
            password=password.result,
            vpc_security_group_ids=[db_group.id],
            skip_final_snapshot=True,
            publicly_accessible=False,
        )
        environment = [
            {"name": "WORDPRESS_DB_HOST", "value": pulumi.Output.format("{0}:3306", db.address)},
            {"name": "WORDPRESS_DB_NAME", "value": db.db_name},
            {"name": "WORDPRESS_DB_USER", "value": db.username},
        ]
        exports = _fargate_service("wp", vpc.id, subnets, [web_group.id], "wordpress", environment)
        return {**exports, "db_host": db.address}

    return program


def stepfunctions(code: Path) -> ProgramFn:
    """aws-py-stepfunctions's shape: a Lambda function (the folder `code`) and a state machine."""

    def program() -> dict[str, Any]:
        import pulumi
        import pulumi_aws as aws

        lambda_role = aws.iam.Role(
            "hello-role", assume_role_policy=_assume_role("lambda.amazonaws.com")
        )
        aws.iam.RolePolicy(
            "hello-logs",
            role=lambda_role.id,
            policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                            "Resource": "arn:aws:logs:*:*:*",
                        }
                    ],
                }
            ),
        )
        states_role = aws.iam.Role(
            "states-role", assume_role_policy=_assume_role("states.amazonaws.com")
        )
        aws.iam.RolePolicy(
            "states-invoke",
            role=states_role.id,
            policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": "*"}
                    ],
                }
            ),
        )
        function = aws.lambda_.Function(
            "hello",
            role=lambda_role.arn,
            runtime="python3.12",
            handler="hello.handler",
            code=pulumi.AssetArchive({".": pulumi.FileArchive(str(code))}),
        )
        machine = aws.sfn.StateMachine(
            "hello-machine",
            role_arn=states_role.arn,
            definition=function.arn.apply(
                lambda arn: json.dumps(
                    {
                        "StartAt": "Hello",
                        "States": {"Hello": {"Type": "Task", "Resource": arn, "End": True}},
                    }
                )
            ),
        )
        return {"function": function.name, "machine": machine.id}

    return program


def secrets_manager() -> ProgramFn:
    """aws-py-secrets-manager's shape: a secret and its value."""

    def program() -> dict[str, Any]:
        import pulumi_aws as aws

        secret = aws.secretsmanager.Secret("app-secret")
        aws.secretsmanager.SecretVersion(
            "app-secret-value", secret_id=secret.id, secret_string="not-a-real-secret"
        )
        return {"secret_id": secret.id}

    return program


def cache_and_registry() -> ProgramFn:
    """A cache stack and an image registry in the default VPC (not a published example)."""

    def program() -> dict[str, Any]:
        import pulumi
        import pulumi_aws as aws

        vpc = aws.ec2.get_vpc(default=True)
        # getSubnetIds left pulumi-aws's SDK in v6; older programs still invoke it by token.
        found = pulumi.runtime.invoke("aws:ec2/getSubnetIds:getSubnetIds", {"vpcId": vpc.id})
        ids = list(found.value["ids"])
        latest = aws.ec2.get_subnets(filters=[{"name": "vpc-id", "values": [vpc.id]}])
        assert ids == sorted(latest.ids)
        group = aws.elasticache.SubnetGroup("cache-subnets", subnet_ids=ids)
        replicas = aws.elasticache.ReplicationGroup(
            "cache",
            description="sessions",
            node_type="cache.t4g.micro",
            num_cache_clusters=2,
            engine="redis",
            engine_version="7.1",
            port=6379,
            subnet_group_name=group.name,
            tags={"stack": "cache"},
        )
        aws.elasticache.Cluster(
            "memcached",
            engine="memcached",
            node_type="cache.t4g.micro",
            num_cache_nodes=1,
            port=11211,
            subnet_group_name=group.name,
        )
        repository = aws.ecr.Repository("app-images", image_tag_mutability="MUTABLE")
        aws.ecr.LifecyclePolicy(
            "app-images-expiry",
            repository=repository.name,
            policy=json.dumps(
                {
                    "rules": [
                        {
                            "rulePriority": 1,
                            "description": "untagged go",
                            "selection": {
                                "tagStatus": "untagged",
                                "countType": "imageCountMoreThan",
                                "countNumber": 1,
                            },
                            "action": {"type": "expire"},
                        }
                    ]
                }
            ),
        )
        bucket = aws.s3.BucketV2("artifacts", force_destroy=True)
        aws.s3.BucketObjectv2("release", bucket=bucket.id, key="release.txt", content="v1")
        return {
            "repository": repository.name,
            "repository_url": repository.repository_url,
            "subnet_ids": ids,
            "primary": replicas.primary_endpoint_address,
        }

    return program
