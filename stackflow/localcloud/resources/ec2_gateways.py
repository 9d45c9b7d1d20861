"""Gateways and addresses of the local cloud's aws provider: internet gateways, elastic IPs and
NAT gateways (ids: the gateway's id, the address's allocation id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, ResourceType
from stackflow.localcloud.resources._declared import found
from stackflow.localcloud.resources._ec2_common import (
    GONE,
    TAGS_COMPUTED,
    arn,
    ec2,
    observed_tags,
    retag,
    tag_spec,
    tagged,
)
from stackflow.localcloud.resources._shared import unless_gone

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext


def _retag_only(
    ctx: CloudContext, resource_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    """The update of a type whose only in-place change is its tags."""
    return retag(ctx, resource_id, inputs)


# --- internet gateway --------------------------------------------------------------------------


def _igw_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    client = ec2(ctx)
    igw_id = client.create_internet_gateway(TagSpecifications=tag_spec("internet-gateway", inputs))[
        "InternetGateway"
    ]["InternetGatewayId"]
    if inputs.get("vpcId"):
        client.attach_internet_gateway(InternetGatewayId=igw_id, VpcId=inputs["vpcId"])
    return igw_id, {
        "arn": arn(ctx, "internet-gateway", igw_id),
        "ownerId": ctx.account_id,
        **tagged(inputs),
    }


def _igw_describe(ctx: CloudContext, igw_id: str) -> dict[str, Any]:
    return dict(
        ec2(ctx).describe_internet_gateways(InternetGatewayIds=[igw_id])["InternetGateways"][0]
    )


def _igw_read(ctx: CloudContext, igw_id: str, state: Props) -> Props | None:
    igw = found(GONE, lambda: _igw_describe(ctx, igw_id))
    if igw is None:
        return None
    attached = [a["VpcId"] for a in igw.get("Attachments", []) if a.get("VpcId")]
    observed: Props = {**observed_tags(igw.get("Tags"))}
    if attached or state.get("vpcId"):
        observed["vpcId"] = attached[0] if attached else ""
    return observed


def _igw_update(
    ctx: CloudContext, igw_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    client = ec2(ctx)
    if "vpcId" in changed:
        if state.get("vpcId"):
            client.detach_internet_gateway(InternetGatewayId=igw_id, VpcId=state["vpcId"])
        if inputs.get("vpcId"):
            client.attach_internet_gateway(InternetGatewayId=igw_id, VpcId=inputs["vpcId"])
    return retag(ctx, igw_id, inputs)


def _igw_delete(ctx: CloudContext, igw_id: str, state: Props) -> None:
    client = ec2(ctx)
    with unless_gone(GONE):
        for attachment in _igw_describe(ctx, igw_id).get("Attachments", []):
            client.detach_internet_gateway(InternetGatewayId=igw_id, VpcId=attachment["VpcId"])
        client.delete_internet_gateway(InternetGatewayId=igw_id)


# --- elastic IP and NAT gateway ----------------------------------------------------------------


def _eip_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    answer = ec2(ctx).allocate_address(
        Domain=inputs.get("domain") or "vpc", TagSpecifications=tag_spec("elastic-ip", inputs)
    )
    allocation_id = answer["AllocationId"]
    return allocation_id, {
        "allocationId": allocation_id,
        "publicIp": answer.get("PublicIp", ""),
        "domain": answer.get("Domain", "vpc"),
        "arn": arn(ctx, "elastic-ip", allocation_id),
        **tagged(inputs),
    }


def _eip_read(ctx: CloudContext, allocation_id: str, state: Props) -> Props | None:
    client = ec2(ctx)
    addresses = found(
        GONE, lambda: client.describe_addresses(AllocationIds=[allocation_id])["Addresses"]
    )
    if not addresses:
        return None
    return {"publicIp": addresses[0].get("PublicIp", ""), **observed_tags(addresses[0].get("Tags"))}


def _eip_delete(ctx: CloudContext, allocation_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).release_address(AllocationId=allocation_id)


def _nat_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    nat = ec2(ctx).create_nat_gateway(
        AllocationId=inputs["allocationId"],
        SubnetId=inputs["subnetId"],
        ConnectivityType=inputs.get("connectivityType") or "public",
        TagSpecifications=tag_spec("natgateway", inputs),
    )["NatGateway"]
    addresses = nat.get("NatGatewayAddresses") or [{}]
    return nat["NatGatewayId"], {
        "connectivityType": nat.get("ConnectivityType", "public"),
        "publicIp": addresses[0].get("PublicIp", ""),
        "privateIp": addresses[0].get("PrivateIp", ""),
        "networkInterfaceId": addresses[0].get("NetworkInterfaceId", ""),
        **tagged(inputs),
    }


def _nat_read(ctx: CloudContext, nat_id: str, state: Props) -> Props | None:
    client = ec2(ctx)
    gateways = found(
        GONE, lambda: client.describe_nat_gateways(NatGatewayIds=[nat_id])["NatGateways"]
    )
    if not gateways or gateways[0].get("State") in ("deleted", "deleting"):
        return None
    return {"subnetId": gateways[0]["SubnetId"], **observed_tags(gateways[0].get("Tags"))}


def _nat_delete(ctx: CloudContext, nat_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).delete_nat_gateway(NatGatewayId=nat_id)


def register(aws: Registry) -> None:
    """Add the internet gateway, elastic IP and NAT gateway types to the aws provider."""
    aws.add(
        ResourceType(
            token="aws:ec2/internetGateway:InternetGateway",
            create=_igw_create,
            read=_igw_read,
            update=_igw_update,
            delete=_igw_delete,
            computed=("arn", "ownerId", *TAGS_COMPUTED),
        ),
        ResourceType(
            token="aws:ec2/eip:Eip",
            create=_eip_create,
            read=_eip_read,
            update=_retag_only,
            delete=_eip_delete,
            force_new=frozenset({"domain", "publicIpv4Pool", "networkBorderGroup"}),
            computed=("allocationId", "publicIp", "arn", *TAGS_COMPUTED),
        ),
        ResourceType(
            token="aws:ec2/natGateway:NatGateway",
            create=_nat_create,
            read=_nat_read,
            update=_retag_only,
            delete=_nat_delete,
            force_new=frozenset({"allocationId", "subnetId", "connectivityType", "privateIp"}),
            computed=("publicIp", "privateIp", "networkInterfaceId", *TAGS_COMPUTED),
        ),
    )
