"""The app stack: an ECS Fargate service behind an application load balancer.

The container reads its database password from Secrets Manager at start (ECS `secrets`); the
password itself never appears in this program, its arguments or the task definition.

Values from other stacks reach the container through `AppArgs.container_env`, one generic input:
a stack added to the graph hands its outputs to the app by naming them in the app node's inputs
builder (graph/nodes.py), without an edit here.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, Field, model_validator

from programs.common import (
    LB_NAME_MAX,
    BaseArgs,
    Id,
    Ids,
    Port,
    Unknown,
    as_text,
    given,
    given_all,
    tags,
)

STACK = "app"
CONTAINER = "app"
LISTENER_PORT = 80
EXECUTION_POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
# What the program itself puts in the container's environment and secrets: never overridden.
RESERVED_ENV = frozenset({"DB_HOST", "DB_PORT", "DB_NAME", "DB_USER", "DB_PASSWORD"})


class AppArgs(BaseArgs, frozen=True):
    """What the app program needs (`| Unknown`: from another stack, which a preview may not
    know yet)."""

    region: str = Field(min_length=1)
    vpc_id: Id | Unknown
    public_subnet_ids: Ids
    private_subnet_ids: Ids
    alb_security_group_id: Id | Unknown
    app_security_group_id: Id | Unknown
    tasks_in_public_subnets: bool
    db_host: Id | Unknown
    db_port: Port | Unknown
    db_name: Id | Unknown
    db_user: Id | Unknown
    db_password_secret_arn: Id | Unknown
    image: str = Field(min_length=1)
    cpu: int = Field(ge=256)
    memory_mb: int = Field(ge=512)
    desired_count: int = Field(ge=0)
    port: Port
    health_check_path: str = Field(pattern=r"^/\S*$")
    log_retention_days: int = Field(ge=1)
    # Values from other stacks, added to the container's environment (sorted by name). Plain
    # values only: a secret goes to ECS `secrets` by ARN, as the database password does.
    container_env: dict[
        Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str | Unknown
    ] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _keeps_its_own_variables(self) -> AppArgs:
        taken = sorted(RESERVED_ENV & set(self.container_env))
        if taken:
            raise ValueError(f"container_env may not set {', '.join(taken)} (the program sets it)")
        return self


class AppOutputs(BaseModel):
    """The app stack's exports, resolved."""

    url: str
    cluster_name: str
    service_name: str
    load_balancer_dns: str


def _assume_role_policy(account_id: str) -> str:
    # The account condition stops another account's ECS from assuming the role (confused deputy).
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ecs-tasks.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                    "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
                }
            ],
        }
    )


def app(args: AppArgs) -> dict[str, Any]:
    """Declare the cluster, roles, task definition, load balancer and service; return the exports."""
    # Imported here: the graph reads this module's argument and output models on every run,
    # and a run that skips the stack (nothing changed) never loads Pulumi's SDK.
    import pulumi
    import pulumi_aws as aws

    base_tags = tags(args.project, args.environment, STACK)
    account_id = aws.get_caller_identity().account_id

    cluster = aws.ecs.Cluster("cluster", name=args.name("cluster"), tags=base_tags)
    log_group = aws.cloudwatch.LogGroup(
        "app-logs",
        name=f"/ecs/{args.name('app')}",
        retention_in_days=args.log_retention_days,
        tags=base_tags,
    )

    # IAM role names are global to the account: Pulumi's auto-naming keeps regions apart.
    execution_role = aws.iam.Role(
        "execution-role",
        description=f"ECS pulls the image, writes logs, reads the DB secret ({args.environment})",
        assume_role_policy=_assume_role_policy(account_id),
        tags=base_tags,
    )
    aws.iam.RolePolicyAttachment(
        "execution-role-ecs", role=execution_role.id, policy_arn=EXECUTION_POLICY_ARN
    )
    aws.iam.RolePolicy(
        "execution-role-db-secret",
        role=execution_role.id,
        policy=pulumi.Output.json_dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "secretsmanager:GetSecretValue",
                        "Resource": given(args.db_password_secret_arn),
                    }
                ],
            }
        ),
    )
    # The app itself calls no AWS API, so its task role grants nothing.
    task_role = aws.iam.Role(
        "task-role",
        description=f"The app's own AWS identity; no permissions ({args.environment})",
        assume_role_policy=_assume_role_policy(account_id),
        tags=base_tags,
    )

    container_definitions = pulumi.Output.json_dumps(
        [
            {
                "name": CONTAINER,
                "image": args.image,
                "essential": True,
                "portMappings": [{"containerPort": args.port, "protocol": "tcp"}],
                "environment": [
                    {"name": "DB_HOST", "value": given(args.db_host)},
                    {"name": "DB_PORT", "value": as_text(args.db_port)},
                    {"name": "DB_NAME", "value": given(args.db_name)},
                    {"name": "DB_USER", "value": given(args.db_user)},
                    *(
                        {"name": name, "value": given(value)}
                        for name, value in sorted(args.container_env.items())
                    ),
                ],
                "secrets": [
                    {"name": "DB_PASSWORD", "valueFrom": given(args.db_password_secret_arn)}
                ],
                "logConfiguration": {
                    "logDriver": "awslogs",
                    "options": {
                        "awslogs-group": log_group.name,
                        "awslogs-region": args.region,
                        "awslogs-stream-prefix": CONTAINER,
                    },
                },
            }
        ]
    )
    task_definition = aws.ecs.TaskDefinition(
        "app",
        family=args.name("app"),
        requires_compatibilities=["FARGATE"],
        network_mode="awsvpc",
        cpu=str(args.cpu),
        memory=str(args.memory_mb),
        execution_role_arn=execution_role.arn,
        task_role_arn=task_role.arn,
        container_definitions=container_definitions,
        tags=base_tags,
    )

    load_balancer = aws.lb.LoadBalancer(
        "alb",
        name=args.name("alb", LB_NAME_MAX),
        load_balancer_type="application",
        internal=False,
        subnets=given_all(args.public_subnet_ids),
        security_groups=[given(args.alb_security_group_id)],
        drop_invalid_header_fields=True,
        tags=base_tags,
    )
    target_group = aws.lb.TargetGroup(
        "app",
        # The port is in the name: a new port replaces the group, and the new one must coexist.
        name=args.name(f"app-{args.port}", LB_NAME_MAX),
        vpc_id=given(args.vpc_id),
        target_type="ip",
        protocol="HTTP",
        port=args.port,
        health_check={
            "enabled": True,
            "path": args.health_check_path,
            "protocol": "HTTP",
            "port": "traffic-port",
            "matcher": "200-399",
            "interval": 15,
            "healthy_threshold": 2,
            "unhealthy_threshold": 3,
        },
        tags=base_tags,
    )
    listener = aws.lb.Listener(
        "http",
        load_balancer_arn=load_balancer.arn,
        port=LISTENER_PORT,
        protocol="HTTP",
        default_actions=[{"type": "forward", "target_group_arn": target_group.arn}],
        tags=base_tags,
    )

    service = aws.ecs.Service(
        "app",
        name=args.name("app"),
        cluster=cluster.arn,
        task_definition=task_definition.arn,
        desired_count=args.desired_count,
        launch_type="FARGATE",
        network_configuration={
            "subnets": given_all(
                args.public_subnet_ids if args.tasks_in_public_subnets else args.private_subnet_ids
            ),
            "security_groups": [given(args.app_security_group_id)],
            # Without a NAT gateway a task needs a public address to reach the registry.
            "assign_public_ip": args.tasks_in_public_subnets,
        },
        load_balancers=[
            {
                "target_group_arn": target_group.arn,
                "container_name": CONTAINER,
                "container_port": args.port,
            }
        ],
        health_check_grace_period_seconds=60,
        deployment_circuit_breaker={"enable": True, "rollback": True},
        propagate_tags="SERVICE",
        tags=base_tags,
        # The target group must be attached to a load balancer before a service can use it.
        opts=pulumi.ResourceOptions(depends_on=[listener]),
    )

    return {
        "url": pulumi.Output.concat("http://", load_balancer.dns_name),
        "cluster_name": cluster.name,
        "service_name": service.name,
        "load_balancer_dns": load_balancer.dns_name,
    }
