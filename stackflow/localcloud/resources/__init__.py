"""The resource types and functions the local cloud serves, one module per AWS service.

Each module has `register(registry)`; adding a type is one entry in one module (see registry.py
and `_declared.py`). `SERVICES` says which token prefixes each module serves, so a provider plugin
imports a module (and creates its boto3 client) only when a program first uses one of its types.
"""

from __future__ import annotations

import importlib
import threading

from stackflow.localcloud.registry import Registry

# module -> the token prefixes it serves (a Pulumi module, or one type's or function's token).
SERVICES: dict[str, dict[str, tuple[str, ...]]] = {
    "aws": {
        "ec2_vpc": ("aws:ec2/vpc:", "aws:ec2/subnet:"),
        "ec2_routing": ("aws:ec2/routeTable:", "aws:ec2/routeTableAssociation:", "aws:ec2/route:"),
        "ec2_gateways": ("aws:ec2/internetGateway:", "aws:ec2/eip:", "aws:ec2/natGateway:"),
        "ec2_security": ("aws:ec2/securityGroup:", "aws:vpc/"),
        "ec2_lookups": (
            "aws:ec2/getVpc:",
            "aws:ec2/getSubnets:",
            "aws:ec2/getSubnetIds:",
            "aws:index/getAvailabilityZones:",
            "aws:index/getRegion:",
        ),
        "ec2_instances": ("aws:ec2/instance:", "aws:ec2/keyPair:", "aws:ec2/getAmi:"),
        "rds_groups": ("aws:rds/subnetGroup:", "aws:rds/parameterGroup:"),
        "rds_instances": ("aws:rds/instance:",),
        "secretsmanager": ("aws:secretsmanager/",),
        "iam": ("aws:iam/", "aws:index/getCallerIdentity:"),
        "iam_users": (
            "aws:iam/user:",
            "aws:iam/group:",
            "aws:iam/groupMembership:",
            "aws:iam/accessKey:",
        ),
        "iam_policies": (
            "aws:iam/policy:",
            "aws:iam/userPolicyAttachment:",
            "aws:iam/groupPolicyAttachment:",
            "aws:iam/instanceProfile:",
        ),
        "iam_documents": ("aws:iam/getPolicyDocument:",),
        "arns": ("aws:index/getPartition:", "aws:index/getArn:"),
        "logs": ("aws:cloudwatch/log",),
        "events": ("aws:cloudwatch/event",),
        "cloudwatch": ("aws:cloudwatch/metricAlarm:",),
        "ecs": ("aws:ecs/cluster:",),
        "ecs_tasks": ("aws:ecs/taskDefinition:",),
        "ecs_services": ("aws:ecs/service:",),
        "elb": ("aws:lb/loadBalancer:",),
        "elb_target_groups": ("aws:lb/targetGroup:",),
        "elb_listeners": ("aws:lb/listener:",),
        "s3": ("aws:s3/bucket:", "aws:s3/bucketV2:", "aws:s3/bucketObject"),
        "s3_bucket_config": (
            "aws:s3/bucketPolicy:",
            "aws:s3/bucketPublicAccessBlock:",
            "aws:s3/bucketWebsiteConfiguration",
        ),
        "s3_access": ("aws:s3/bucketOwnershipControls:", "aws:s3/bucketAcl"),
        "ecr": ("aws:ecr/",),
        "elasticache": ("aws:elasticache/",),
        "lambda_": ("aws:lambda/",),
        "lambda_links": ("aws:lambda/",),
        "dynamodb": ("aws:dynamodb/",),
        "sqs": ("aws:sqs/",),
        "sns": ("aws:sns/",),
        "kinesis": ("aws:kinesis/",),
        "kms": ("aws:kms/",),
        "apigateway": ("aws:apigateway/",),
        "apigateway_methods": ("aws:apigateway/",),
        "apigatewayv2": ("aws:apigatewayv2/",),
        "eks": ("aws:eks/",),
        "route53": ("aws:route53/",),
        "acm": ("aws:acm/",),
        "cloudfront": ("aws:cloudfront/",),
        "appsync": ("aws:appsync/",),
        "sfn": ("aws:sfn/",),
    },
    "random": {"random": ("random:",)},
}
MODULES = {package: tuple(modules) for package, modules in SERVICES.items()}


def register_module(found: Registry, name: str) -> None:
    """Register the types and functions of one service module (`name`) in `found`."""
    importlib.import_module(f"stackflow.localcloud.resources.{name}").register(found)


def _known(package: str) -> dict[str, tuple[str, ...]]:
    if package not in SERVICES:
        raise ValueError(f"unknown provider package {package!r}; served: {', '.join(SERVICES)}")
    return SERVICES[package]


def registry(package: str) -> Registry:
    """Every type and function of `package` ("aws" or "random"), all modules loaded.

    Raises:
        ValueError: an unknown package, naming the served ones.
    """
    found = Registry(package)
    for name in _known(package):
        register_module(found, name)
    return found


def lazy_registry(package: str) -> Registry:
    """`package`'s registry that loads a service module the first time one of its tokens is
    looked up (what a provider plugin serves: a program using EC2 alone never loads RDS).

    Raises:
        ValueError: an unknown package, naming the served ones.
    """
    modules = _known(package)
    loaded: set[str] = set()
    lock = threading.Lock()  # the plugin serves requests on many threads at once

    def load(found: Registry, token: str | None) -> None:
        with lock:
            for name, prefixes in modules.items():
                if name not in loaded and (token is None or token.startswith(prefixes)):
                    register_module(found, name)
                    loaded.add(name)

    return Registry(package, loader=load)
