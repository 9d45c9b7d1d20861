"""`aws.getPartition` and `aws.getArn`, answered here as pulumi-aws answers them: locally, from
the provider's region and the ARN given, with no AWS call. Programs build ARNs and policies from
them, so an empty answer would break the program rather than show what is unserved."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackflow.localcloud.registry import Props, Registry

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

GET_PARTITION = "aws:index/getPartition:getPartition"
GET_ARN = "aws:index/getArn:getArn"
# region prefix -> (partition, DNS suffix), as AWS's partitions table has them; else "aws".
_PARTITIONS = (
    ("cn-", "aws-cn", "amazonaws.com.cn"),
    ("us-gov-", "aws-us-gov", "amazonaws.com"),
    ("us-iso-", "aws-iso", "c2s.ic.gov"),
    ("us-isob-", "aws-iso-b", "sc2s.sgov.gov"),
)


def partition_of(region: str) -> tuple[str, str]:
    """(partition, DNS suffix) of `region`: ("aws", "amazonaws.com") for most."""
    for prefix, partition, suffix in _PARTITIONS:
        if region.startswith(prefix):
            return partition, suffix
    return "aws", "amazonaws.com"


def get_partition(ctx: CloudContext, args: Props) -> Props:
    """aws:index/getPartition: the provider region's partition and its DNS names."""
    partition, suffix = partition_of(ctx.region)
    return {
        "id": partition,
        "partition": partition,
        "dnsSuffix": suffix,
        "reverseDnsPrefix": ".".join(reversed(suffix.split("."))),
    }


def get_arn(ctx: CloudContext, args: Props) -> Props:
    """aws:index/getArn: the parts of the ARN given (`arn:partition:service:region:account:
    resource`, the resource keeping any further colons).

    Raises:
        ValueError: not an ARN, naming it, as pulumi-aws refuses it.
    """
    arn = str(args.get("arn") or "")
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or not parts[1] or not parts[2]:
        raise ValueError(f"invalid ARN ({arn!r}): expected arn:partition:service:region:...")
    _, partition, service, region, account, resource = parts
    return {
        "id": arn,
        "arn": arn,
        "partition": partition,
        "service": service,
        "region": region,
        "account": account,
        "resource": resource,
    }


def register(aws: Registry) -> None:
    """Add getPartition and getArn."""
    aws.function(GET_PARTITION)(get_partition)
    aws.function(GET_ARN)(get_arn)
