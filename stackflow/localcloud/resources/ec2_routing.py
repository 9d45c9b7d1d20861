"""Routing and gateways of the local cloud's aws provider: internet gateways, route tables, their
subnet associations and routes, elastic IPs and NAT gateways.

Ids follow pulumi-aws: each resource's own id, a route's "r-" + its table + a hash of its
destination.
"""

from __future__ import annotations

import zlib
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
from stackflow.localcloud.resources._shared import same_members, unless_gone

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


# --- route table, association, route -----------------------------------------------------------


# A route table's inline `routes` block: wire key -> CreateRoute parameter.
_INLINE_ROUTE = {
    "cidrBlock": "DestinationCidrBlock",
    "ipv6CidrBlock": "DestinationIpv6CidrBlock",
    "destinationPrefixListId": "DestinationPrefixListId",
    "gatewayId": "GatewayId",
    "natGatewayId": "NatGatewayId",
    "networkInterfaceId": "NetworkInterfaceId",
    "transitGatewayId": "TransitGatewayId",
    "vpcPeeringConnectionId": "VpcPeeringConnectionId",
    "vpcEndpointId": "VpcEndpointId",
    "egressOnlyGatewayId": "EgressOnlyInternetGatewayId",
    "carrierGatewayId": "CarrierGatewayId",
    "localGatewayId": "LocalGatewayId",
    "coreNetworkArn": "CoreNetworkArn",
}


def _inline_routes(ctx: CloudContext, table_id: str, routes: list[Any], add: bool) -> None:
    """Create (add) or delete the inline routes of a table."""
    client = ec2(ctx)
    for route in routes:
        params = {api: str(route[key]) for key, api in _INLINE_ROUTE.items() if route.get(key)}
        if add:
            client.create_route(RouteTableId=table_id, **params)
            continue
        destination = {k: v for k, v in params.items() if k.startswith("Destination")}
        with unless_gone(GONE):
            client.delete_route(RouteTableId=table_id, **destination)


def _observed_routes(table: dict[str, Any], current: Any) -> list[Any]:
    """The table's routes made by CreateRoute, in the shape of the state's `routes`."""
    observed = [
        {key: route[api] for key, api in _INLINE_ROUTE.items() if route.get(api)}
        for route in table.get("Routes", [])
        if route.get("Origin") == "CreateRoute"
    ]
    return list(same_members(observed, current))


def _rt_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    table = ec2(ctx).create_route_table(
        VpcId=inputs["vpcId"], TagSpecifications=tag_spec("route-table", inputs)
    )["RouteTable"]
    table_id = table["RouteTableId"]
    _inline_routes(ctx, table_id, list(inputs.get("routes") or []), add=True)
    return table_id, {
        "arn": arn(ctx, "route-table", table_id),
        "ownerId": ctx.account_id,
        **tagged(inputs),
    }


def _rt_describe(ctx: CloudContext, table_id: str) -> dict[str, Any] | None:
    client = ec2(ctx)
    tables = found(
        GONE, lambda: client.describe_route_tables(RouteTableIds=[table_id])["RouteTables"]
    )
    return tables[0] if tables else None


def _rt_read(ctx: CloudContext, table_id: str, state: Props) -> Props | None:
    table = _rt_describe(ctx, table_id)
    if table is None:
        return None
    observed: Props = {"vpcId": table["VpcId"], **observed_tags(table.get("Tags"))}
    if state.get("routes") is not None:
        observed["routes"] = _observed_routes(table, state.get("routes"))
    return observed


def _rt_update(
    ctx: CloudContext, table_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    if "routes" in changed:
        # As pulumi-aws: routes no longer listed go, new ones come (same destination: replaced).
        _inline_routes(ctx, table_id, list(state.get("routes") or []), add=False)
        _inline_routes(ctx, table_id, list(inputs.get("routes") or []), add=True)
    return retag(ctx, table_id, inputs)


def _rt_delete(ctx: CloudContext, table_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).delete_route_table(RouteTableId=table_id)


def _assoc_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    answer = ec2(ctx).associate_route_table(
        RouteTableId=inputs["routeTableId"], SubnetId=inputs["subnetId"]
    )
    return answer["AssociationId"], {}


def _assoc_find(ctx: CloudContext, association_id: str) -> dict[str, Any] | None:
    tables = ec2(ctx).describe_route_tables(
        Filters=[{"Name": "association.route-table-association-id", "Values": [association_id]}]
    )["RouteTables"]
    for table in tables:
        for association in table.get("Associations", []):
            if association.get("RouteTableAssociationId") == association_id:
                return {"routeTableId": table["RouteTableId"], **association}
    return None


def _assoc_read(ctx: CloudContext, association_id: str, state: Props) -> Props | None:
    association = _assoc_find(ctx, association_id)
    if association is None:
        return None
    observed: Props = {"routeTableId": association["routeTableId"]}
    if association.get("SubnetId"):
        observed["subnetId"] = association["SubnetId"]
    return observed


def _assoc_delete(ctx: CloudContext, association_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).disassociate_route_table(AssociationId=association_id)


_ROUTE_TARGETS = {
    "gatewayId": "GatewayId",
    "natGatewayId": "NatGatewayId",
    "networkInterfaceId": "NetworkInterfaceId",
    "vpcPeeringConnectionId": "VpcPeeringConnectionId",
    "transitGatewayId": "TransitGatewayId",
}


def _route_id(table_id: str, destination: str) -> str:
    # pulumi-aws's route ids: "r-" + table id + a hash of the destination
    return f"r-{table_id}{zlib.crc32(destination.encode())}"


def _route_targets(inputs: Props) -> dict[str, str]:
    return {aws: str(inputs[key]) for key, aws in _ROUTE_TARGETS.items() if inputs.get(key)}


def _route_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    table_id, destination = inputs["routeTableId"], inputs["destinationCidrBlock"]
    ec2(ctx).create_route(
        RouteTableId=table_id, DestinationCidrBlock=destination, **_route_targets(inputs)
    )
    return _route_id(table_id, destination), {"origin": "CreateRoute", "state": "active"}


def _route_read(ctx: CloudContext, route_id: str, state: Props) -> Props | None:
    table = _rt_describe(ctx, str(state.get("routeTableId", "")))
    if table is None:
        return None
    for route in table.get("Routes", []):
        if route.get("DestinationCidrBlock") == state.get("destinationCidrBlock"):
            observed: Props = {}
            for key, aws in _ROUTE_TARGETS.items():
                if route.get(aws) or state.get(key):
                    observed[key] = route.get(aws, "")
            return observed
    return None


def _route_update(
    ctx: CloudContext, route_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    ec2(ctx).replace_route(
        RouteTableId=inputs["routeTableId"],
        DestinationCidrBlock=inputs["destinationCidrBlock"],
        **_route_targets(inputs),
    )
    return {}


def _route_delete(ctx: CloudContext, route_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).delete_route(
            RouteTableId=state["routeTableId"], DestinationCidrBlock=state["destinationCidrBlock"]
        )


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
    """Add the gateway and routing types to the aws provider."""
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
            token="aws:ec2/routeTable:RouteTable",
            create=_rt_create,
            read=_rt_read,
            update=_rt_update,
            delete=_rt_delete,
            force_new=frozenset({"vpcId"}),
            computed=("arn", "ownerId", *TAGS_COMPUTED),
        ),
        ResourceType(
            token="aws:ec2/routeTableAssociation:RouteTableAssociation",
            create=_assoc_create,
            read=_assoc_read,
            delete=_assoc_delete,  # no update: a new table means a new association id
        ),
        ResourceType(
            token="aws:ec2/route:Route",
            create=_route_create,
            read=_route_read,
            update=_route_update,
            delete=_route_delete,
            force_new=frozenset(
                {"routeTableId", "destinationCidrBlock", "destinationIpv6CidrBlock"}
            ),
            computed=("origin", "state"),
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
