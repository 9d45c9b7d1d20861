"""What the EC2 networking modules (`ec2_vpc`, `ec2_routing`, `ec2_security`, `ec2_lookups`)
share: AWS's not-found codes, tags in EC2's shape, ARNs, and a VPC's computed attributes.

Force-new inputs follow pulumi-aws's registry pages ("changing this forces a new resource").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, tags_of
from stackflow.localcloud.resources._declared import EC2_TAGGING
from stackflow.localcloud.resources._shared import input_tags

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

GONE = (
    "InvalidVpcID.NotFound",
    "InvalidSubnetID.NotFound",
    "InvalidInternetGatewayID.NotFound",
    "InvalidRouteTableID.NotFound",
    "InvalidRouteTableAssociationID.NotFound",
    "InvalidAssociationID.NotFound",
    "InvalidAllocationID.NotFound",
    "NatGatewayNotFound",
    "InvalidGroup.NotFound",
    "InvalidGroupId.Malformed",
    "InvalidSecurityGroupRuleId.NotFound",
    "InvalidRoute.NotFound",
    "InvalidPermission.NotFound",
)
# The networking types' own computed output besides those each names.
TAGS_COMPUTED = ("tagsAll",)
VPC_ATTRIBUTES = ("enableDnsSupport", "enableDnsHostnames")


def ec2(ctx: CloudContext) -> Any:
    """The EC2 client."""
    return ctx.client("ec2")


def tag_spec(kind: str, inputs: Props) -> list[dict[str, Any]]:
    """The `tags` input as a create call's TagSpecifications for resource type `kind`."""
    tags = input_tags(inputs)
    return [{"ResourceType": kind, "Tags": EC2_TAGGING.wire(tags)}] if tags else []


def tagged(inputs: Props) -> Props:
    """`tagsAll` as create and update return it: the `tags` input."""
    return {"tagsAll": input_tags(inputs)}


def observed_tags(items: list[dict[str, Any]] | None) -> Props:
    """`tags` and `tagsAll` as read from a describe answer's `Tags`."""
    tags = tags_of(items)
    return {"tags": tags, "tagsAll": dict(tags)}


def retag(ctx: CloudContext, resource_id: str, inputs: Props) -> Props:
    """Make the resource's tags exactly the `tags` input, whatever the cloud holds now; the
    `tagsAll` output."""
    client = ec2(ctx)
    listed = client.describe_tags(Filters=[{"Name": "resource-id", "Values": [resource_id]}])
    EC2_TAGGING.sync(client, resource_id, inputs, {"Tags": listed["Tags"]})
    return tagged(inputs)


def arn(ctx: CloudContext, kind: str, resource_id: str) -> str:
    """An EC2 resource's ARN."""
    return f"arn:aws:ec2:{ctx.region}:{ctx.account_id}:{kind}/{resource_id}"


def attribute_key(attribute: str) -> str:
    """A VPC attribute's key in Modify/DescribeVpcAttribute ("enableDnsSupport" ->
    "EnableDnsSupport")."""
    return attribute[0].upper() + attribute[1:]


def vpc_attributes(ctx: CloudContext, vpc_id: str) -> Props:
    """The VPC's DNS attributes, as pulumi-aws's inputs name them."""
    return {
        attribute: bool(
            ec2(ctx).describe_vpc_attribute(VpcId=vpc_id, Attribute=attribute)[
                attribute_key(attribute)
            ]["Value"]
        )
        for attribute in VPC_ATTRIBUTES
    }


def vpc_computed(ctx: CloudContext, vpc_id: str) -> Props:
    """What only the cloud knows of a VPC: its ARN, owner, main route table, default security
    group and network ACL."""
    client = ec2(ctx)
    vpc = client.describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0]
    tables = client.describe_route_tables(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc_id]},
            {"Name": "association.main", "Values": ["true"]},
        ]
    )["RouteTables"]
    groups = client.describe_security_groups(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc_id]},
            {"Name": "group-name", "Values": ["default"]},
        ]
    )["SecurityGroups"]
    acls = client.describe_network_acls(
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "default", "Values": ["true"]}]
    )["NetworkAcls"]
    main_table = tables[0]["RouteTableId"] if tables else ""
    return {
        "arn": arn(ctx, "vpc", vpc_id),
        "ownerId": vpc.get("OwnerId", ctx.account_id),
        "instanceTenancy": vpc.get("InstanceTenancy", "default"),
        "mainRouteTableId": main_table,
        "defaultRouteTableId": main_table,
        "defaultSecurityGroupId": groups[0]["GroupId"] if groups else "",
        "defaultNetworkAclId": acls[0]["NetworkAclId"] if acls else "",
        "dhcpOptionsId": vpc.get("DhcpOptionsId", ""),
    }
