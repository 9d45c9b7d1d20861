"""VPCs and subnets of the local cloud's aws provider (ids: the VPC's and the subnet's id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, ResourceType
from stackflow.localcloud.resources._declared import found
from stackflow.localcloud.resources._ec2_common import (
    GONE,
    TAGS_COMPUTED,
    VPC_ATTRIBUTES,
    arn,
    attribute_key,
    ec2,
    observed_tags,
    retag,
    tag_spec,
    tagged,
    vpc_attributes,
    vpc_computed,
)
from stackflow.localcloud.resources._shared import unless_gone

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

# --- VPC ---------------------------------------------------------------------------------------


def _vpc_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    client = ec2(ctx)
    vpc = client.create_vpc(
        CidrBlock=inputs["cidrBlock"],
        InstanceTenancy=inputs.get("instanceTenancy") or "default",
        TagSpecifications=tag_spec("vpc", inputs),
    )["Vpc"]
    vpc_id = vpc["VpcId"]
    for attribute in VPC_ATTRIBUTES:
        if attribute in inputs and inputs[attribute] is not None:
            value = {"Value": bool(inputs[attribute])}
            client.modify_vpc_attribute(VpcId=vpc_id, **{attribute_key(attribute): value})
    return vpc_id, {**vpc_computed(ctx, vpc_id), **tagged(inputs)}


def _vpc_read(ctx: CloudContext, vpc_id: str, state: Props) -> Props | None:
    vpc = found(GONE, lambda: ec2(ctx).describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0])
    if vpc is None:
        return None
    return {
        "cidrBlock": vpc["CidrBlock"],
        **observed_tags(vpc.get("Tags")),
        **vpc_attributes(ctx, vpc_id),
        **vpc_computed(ctx, vpc_id),
    }


def _vpc_update(
    ctx: CloudContext, vpc_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    for attribute in VPC_ATTRIBUTES:
        if attribute in changed:
            value = {"Value": bool(inputs.get(attribute))}
            ec2(ctx).modify_vpc_attribute(VpcId=vpc_id, **{attribute_key(attribute): value})
    return retag(ctx, vpc_id, inputs)


def _vpc_delete(ctx: CloudContext, vpc_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).delete_vpc(VpcId=vpc_id)


# --- subnet ------------------------------------------------------------------------------------


def _subnet_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    client = ec2(ctx)
    args: dict[str, Any] = {
        "VpcId": inputs["vpcId"],
        "CidrBlock": inputs["cidrBlock"],
        "TagSpecifications": tag_spec("subnet", inputs),
    }
    if inputs.get("availabilityZone"):
        args["AvailabilityZone"] = inputs["availabilityZone"]
    subnet = client.create_subnet(**args)["Subnet"]
    subnet_id = subnet["SubnetId"]
    if inputs.get("mapPublicIpOnLaunch") is not None:
        client.modify_subnet_attribute(
            SubnetId=subnet_id, MapPublicIpOnLaunch={"Value": bool(inputs["mapPublicIpOnLaunch"])}
        )
    return subnet_id, {
        "arn": arn(ctx, "subnet", subnet_id),
        "ownerId": ctx.account_id,
        "availabilityZone": subnet["AvailabilityZone"],
        "availabilityZoneId": subnet.get("AvailabilityZoneId", ""),
        **tagged(inputs),
    }


def _subnet_read(ctx: CloudContext, subnet_id: str, state: Props) -> Props | None:
    subnet = found(GONE, lambda: ec2(ctx).describe_subnets(SubnetIds=[subnet_id])["Subnets"][0])
    if subnet is None:
        return None
    return {
        "vpcId": subnet["VpcId"],
        "cidrBlock": subnet["CidrBlock"],
        "availabilityZone": subnet["AvailabilityZone"],
        "availabilityZoneId": subnet.get("AvailabilityZoneId", ""),
        "mapPublicIpOnLaunch": bool(subnet.get("MapPublicIpOnLaunch", False)),
        **observed_tags(subnet.get("Tags")),
    }


def _subnet_update(
    ctx: CloudContext, subnet_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    if "mapPublicIpOnLaunch" in changed:
        ec2(ctx).modify_subnet_attribute(
            SubnetId=subnet_id,
            MapPublicIpOnLaunch={"Value": bool(inputs.get("mapPublicIpOnLaunch"))},
        )
    return retag(ctx, subnet_id, inputs)


def _subnet_delete(ctx: CloudContext, subnet_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).delete_subnet(SubnetId=subnet_id)


def register(aws: Registry) -> None:
    """Add the VPC and subnet types to the aws provider."""
    aws.add(
        ResourceType(
            token="aws:ec2/vpc:Vpc",
            create=_vpc_create,
            read=_vpc_read,
            update=_vpc_update,
            delete=_vpc_delete,
            force_new=frozenset({"cidrBlock", "instanceTenancy", "ipv4IpamPoolId"}),
            computed=(
                "arn",
                "ownerId",
                "mainRouteTableId",
                "defaultRouteTableId",
                "defaultSecurityGroupId",
                "defaultNetworkAclId",
                "dhcpOptionsId",
                *TAGS_COMPUTED,
            ),
            defaults={"enableDnsSupport": True, "instanceTenancy": "default"},
        ),
        ResourceType(
            token="aws:ec2/subnet:Subnet",
            create=_subnet_create,
            read=_subnet_read,
            update=_subnet_update,
            delete=_subnet_delete,
            force_new=frozenset(
                {"vpcId", "cidrBlock", "availabilityZone", "availabilityZoneId", "outpostArn"}
            ),
            computed=("arn", "ownerId", "availabilityZoneId", *TAGS_COMPUTED),
            defaults={"mapPublicIpOnLaunch": False, "assignIpv6AddressOnCreation": False},
        ),
    )
