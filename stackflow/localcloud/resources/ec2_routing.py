"""Routing of the local cloud's aws provider: route tables (with inline routes), their subnet
associations, and routes.

Ids follow pulumi-aws: a table's and an association's own id, a route's "r-" + its table + a
hash of its destination.
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


def register(aws: Registry) -> None:
    """Add the route table, association and route types to the aws provider."""
    aws.add(
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
    )
