"""EC2 and VPC: the networking stack's resource types, and the availability-zone lookup.

Force-new inputs follow pulumi-aws's registry pages ("changing this forces a new resource").
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from botocore.exceptions import ClientError

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.errors import NoMatchingResource
from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._shared import error_code, plain_number, same_members

_GONE = (
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


def _gone(exc: ClientError) -> bool:
    return error_code(exc) in _GONE


def _ec2(ctx: CloudContext) -> Any:
    return ctx.client("ec2")


def _tag_spec(kind: str, inputs: Props) -> list[dict[str, Any]]:
    tags = inputs.get("tags") or {}
    return [{"ResourceType": kind, "Tags": tag_list(tags)}] if tags else []


def _tagged(inputs: Props) -> Props:
    return {"tagsAll": dict(inputs.get("tags") or {})}


def _observed_tags(items: list[dict[str, Any]] | None) -> Props:
    tags = tags_of(items)
    return {"tags": tags, "tagsAll": dict(tags)}


def _retag(ctx: CloudContext, resource_id: str, old: Props, new: Props) -> Props:
    """Make the resource's tags exactly `new["tags"]`, whatever the cloud holds now."""
    wanted = dict(new.get("tags") or {})
    current = tags_of(
        _ec2(ctx).describe_tags(Filters=[{"Name": "resource-id", "Values": [resource_id]}])["Tags"]
    )
    stale = [k for k in current if k not in wanted]
    if stale:
        _ec2(ctx).delete_tags(Resources=[resource_id], Tags=[{"Key": k} for k in stale])
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changed:
        _ec2(ctx).create_tags(Resources=[resource_id], Tags=tag_list(changed))
    return {"tagsAll": wanted}


def _arn(ctx: CloudContext, kind: str, resource_id: str) -> str:
    return f"arn:aws:ec2:{ctx.region}:{ctx.account_id}:{kind}/{resource_id}"


# --- VPC ---------------------------------------------------------------------------------------


def _vpc_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    ec2 = _ec2(ctx)
    vpc = ec2.create_vpc(
        CidrBlock=inputs["cidrBlock"],
        InstanceTenancy=inputs.get("instanceTenancy") or "default",
        TagSpecifications=_tag_spec("vpc", inputs),
    )["Vpc"]
    vpc_id = vpc["VpcId"]
    for attribute in ("enableDnsSupport", "enableDnsHostnames"):
        if attribute in inputs and inputs[attribute] is not None:
            key = attribute[0].upper() + attribute[1:]
            ec2.modify_vpc_attribute(VpcId=vpc_id, **{key: {"Value": bool(inputs[attribute])}})
    return vpc_id, {**_vpc_computed(ctx, vpc_id), **_tagged(inputs)}


def _vpc_computed(ctx: CloudContext, vpc_id: str) -> Props:
    ec2 = _ec2(ctx)
    vpc = ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0]
    tables = ec2.describe_route_tables(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc_id]},
            {"Name": "association.main", "Values": ["true"]},
        ]
    )["RouteTables"]
    groups = ec2.describe_security_groups(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc_id]},
            {"Name": "group-name", "Values": ["default"]},
        ]
    )["SecurityGroups"]
    acls = ec2.describe_network_acls(
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "default", "Values": ["true"]}]
    )["NetworkAcls"]
    main_table = tables[0]["RouteTableId"] if tables else ""
    return {
        "arn": _arn(ctx, "vpc", vpc_id),
        "ownerId": vpc.get("OwnerId", ctx.account_id),
        "instanceTenancy": vpc.get("InstanceTenancy", "default"),
        "mainRouteTableId": main_table,
        "defaultRouteTableId": main_table,
        "defaultSecurityGroupId": groups[0]["GroupId"] if groups else "",
        "defaultNetworkAclId": acls[0]["NetworkAclId"] if acls else "",
        "dhcpOptionsId": vpc.get("DhcpOptionsId", ""),
    }


def _vpc_read(ctx: CloudContext, vpc_id: str, state: Props) -> Props | None:
    ec2 = _ec2(ctx)
    try:
        vpc = ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0]
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    observed: Props = {"cidrBlock": vpc["CidrBlock"], **_observed_tags(vpc.get("Tags"))}
    for attribute in ("enableDnsSupport", "enableDnsHostnames"):
        key = attribute[0].upper() + attribute[1:]
        answer = ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute=attribute)
        observed[attribute] = bool(answer[key]["Value"])
    observed.update(_vpc_computed(ctx, vpc_id))
    return observed


def _vpc_update(
    ctx: CloudContext, vpc_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    for attribute in ("enableDnsSupport", "enableDnsHostnames"):
        if attribute in changed:
            key = attribute[0].upper() + attribute[1:]
            _ec2(ctx).modify_vpc_attribute(
                VpcId=vpc_id, **{key: {"Value": bool(inputs.get(attribute))}}
            )
    return _retag(ctx, vpc_id, state, inputs)


def _vpc_delete(ctx: CloudContext, vpc_id: str, state: Props) -> None:
    try:
        _ec2(ctx).delete_vpc(VpcId=vpc_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- internet gateway ----------------------------------------------------------------------------


def _igw_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    ec2 = _ec2(ctx)
    igw_id = ec2.create_internet_gateway(TagSpecifications=_tag_spec("internet-gateway", inputs))[
        "InternetGateway"
    ]["InternetGatewayId"]
    if inputs.get("vpcId"):
        ec2.attach_internet_gateway(InternetGatewayId=igw_id, VpcId=inputs["vpcId"])
    return igw_id, {
        "arn": _arn(ctx, "internet-gateway", igw_id),
        "ownerId": ctx.account_id,
        **_tagged(inputs),
    }


def _igw_read(ctx: CloudContext, igw_id: str, state: Props) -> Props | None:
    try:
        igw = _ec2(ctx).describe_internet_gateways(InternetGatewayIds=[igw_id])["InternetGateways"][
            0
        ]
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    attached = [a["VpcId"] for a in igw.get("Attachments", []) if a.get("VpcId")]
    observed: Props = {**_observed_tags(igw.get("Tags"))}
    if attached or state.get("vpcId"):
        observed["vpcId"] = attached[0] if attached else ""
    return observed


def _igw_update(
    ctx: CloudContext, igw_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    ec2 = _ec2(ctx)
    if "vpcId" in changed:
        if state.get("vpcId"):
            ec2.detach_internet_gateway(InternetGatewayId=igw_id, VpcId=state["vpcId"])
        if inputs.get("vpcId"):
            ec2.attach_internet_gateway(InternetGatewayId=igw_id, VpcId=inputs["vpcId"])
    return _retag(ctx, igw_id, state, inputs)


def _igw_delete(ctx: CloudContext, igw_id: str, state: Props) -> None:
    ec2 = _ec2(ctx)
    try:
        igw = ec2.describe_internet_gateways(InternetGatewayIds=[igw_id])["InternetGateways"][0]
        for attachment in igw.get("Attachments", []):
            ec2.detach_internet_gateway(InternetGatewayId=igw_id, VpcId=attachment["VpcId"])
        ec2.delete_internet_gateway(InternetGatewayId=igw_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- subnet ----------------------------------------------------------------------------------------


def _subnet_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    ec2 = _ec2(ctx)
    args: dict[str, Any] = {
        "VpcId": inputs["vpcId"],
        "CidrBlock": inputs["cidrBlock"],
        "TagSpecifications": _tag_spec("subnet", inputs),
    }
    if inputs.get("availabilityZone"):
        args["AvailabilityZone"] = inputs["availabilityZone"]
    subnet = ec2.create_subnet(**args)["Subnet"]
    subnet_id = subnet["SubnetId"]
    if inputs.get("mapPublicIpOnLaunch") is not None:
        ec2.modify_subnet_attribute(
            SubnetId=subnet_id, MapPublicIpOnLaunch={"Value": bool(inputs["mapPublicIpOnLaunch"])}
        )
    return subnet_id, {
        "arn": _arn(ctx, "subnet", subnet_id),
        "ownerId": ctx.account_id,
        "availabilityZone": subnet["AvailabilityZone"],
        "availabilityZoneId": subnet.get("AvailabilityZoneId", ""),
        **_tagged(inputs),
    }


def _subnet_read(ctx: CloudContext, subnet_id: str, state: Props) -> Props | None:
    try:
        subnet = _ec2(ctx).describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    return {
        "vpcId": subnet["VpcId"],
        "cidrBlock": subnet["CidrBlock"],
        "availabilityZone": subnet["AvailabilityZone"],
        "availabilityZoneId": subnet.get("AvailabilityZoneId", ""),
        "mapPublicIpOnLaunch": bool(subnet.get("MapPublicIpOnLaunch", False)),
        **_observed_tags(subnet.get("Tags")),
    }


def _subnet_update(
    ctx: CloudContext, subnet_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    if "mapPublicIpOnLaunch" in changed:
        _ec2(ctx).modify_subnet_attribute(
            SubnetId=subnet_id,
            MapPublicIpOnLaunch={"Value": bool(inputs.get("mapPublicIpOnLaunch"))},
        )
    return _retag(ctx, subnet_id, state, inputs)


def _subnet_delete(ctx: CloudContext, subnet_id: str, state: Props) -> None:
    try:
        _ec2(ctx).delete_subnet(SubnetId=subnet_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- route table, association, route --------------------------------------------------------------


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
    ec2 = _ec2(ctx)
    for route in routes:
        params = {api: str(route[key]) for key, api in _INLINE_ROUTE.items() if route.get(key)}
        if add:
            ec2.create_route(RouteTableId=table_id, **params)
            continue
        destination = {k: v for k, v in params.items() if k.startswith("Destination")}
        try:
            ec2.delete_route(RouteTableId=table_id, **destination)
        except ClientError as exc:
            if not _gone(exc):
                raise


def _observed_routes(table: dict[str, Any], current: Any) -> list[Any]:
    """The table's routes made by CreateRoute, in the shape of the state's `routes`."""
    observed = [
        {key: route[api] for key, api in _INLINE_ROUTE.items() if route.get(api)}
        for route in table.get("Routes", [])
        if route.get("Origin") == "CreateRoute"
    ]
    return list(same_members(observed, current))


def _rt_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    table = _ec2(ctx).create_route_table(
        VpcId=inputs["vpcId"], TagSpecifications=_tag_spec("route-table", inputs)
    )["RouteTable"]
    table_id = table["RouteTableId"]
    _inline_routes(ctx, table_id, list(inputs.get("routes") or []), add=True)
    return table_id, {
        "arn": _arn(ctx, "route-table", table_id),
        "ownerId": ctx.account_id,
        **_tagged(inputs),
    }


def _rt_describe(ctx: CloudContext, table_id: str) -> dict[str, Any] | None:
    try:
        tables = _ec2(ctx).describe_route_tables(RouteTableIds=[table_id])["RouteTables"]
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    return tables[0] if tables else None


def _rt_read(ctx: CloudContext, table_id: str, state: Props) -> Props | None:
    table = _rt_describe(ctx, table_id)
    if table is None:
        return None
    observed: Props = {"vpcId": table["VpcId"], **_observed_tags(table.get("Tags"))}
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
    return _retag(ctx, table_id, state, inputs)


def _rt_delete(ctx: CloudContext, table_id: str, state: Props) -> None:
    try:
        _ec2(ctx).delete_route_table(RouteTableId=table_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


def _assoc_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    answer = _ec2(ctx).associate_route_table(
        RouteTableId=inputs["routeTableId"], SubnetId=inputs["subnetId"]
    )
    return answer["AssociationId"], {}


def _assoc_find(ctx: CloudContext, association_id: str) -> dict[str, Any] | None:
    tables = _ec2(ctx).describe_route_tables(
        Filters=[{"Name": "association.route-table-association-id", "Values": [association_id]}]
    )["RouteTables"]
    for table in tables:
        for association in table.get("Associations", []):
            if association.get("RouteTableAssociationId") == association_id:
                return {"routeTableId": table["RouteTableId"], **association}
    return None


def _assoc_read(ctx: CloudContext, association_id: str, state: Props) -> Props | None:
    found = _assoc_find(ctx, association_id)
    if found is None:
        return None
    observed: Props = {"routeTableId": found["routeTableId"]}
    if found.get("SubnetId"):
        observed["subnetId"] = found["SubnetId"]
    return observed


def _assoc_delete(ctx: CloudContext, association_id: str, state: Props) -> None:
    try:
        _ec2(ctx).disassociate_route_table(AssociationId=association_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


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
    _ec2(ctx).create_route(
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
    _ec2(ctx).replace_route(
        RouteTableId=inputs["routeTableId"],
        DestinationCidrBlock=inputs["destinationCidrBlock"],
        **_route_targets(inputs),
    )
    return {}


def _route_delete(ctx: CloudContext, route_id: str, state: Props) -> None:
    try:
        _ec2(ctx).delete_route(
            RouteTableId=state["routeTableId"], DestinationCidrBlock=state["destinationCidrBlock"]
        )
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- elastic IP and NAT gateway ---------------------------------------------------------------------


def _eip_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    answer = _ec2(ctx).allocate_address(
        Domain=inputs.get("domain") or "vpc", TagSpecifications=_tag_spec("elastic-ip", inputs)
    )
    allocation_id = answer["AllocationId"]
    return allocation_id, {
        "allocationId": allocation_id,
        "publicIp": answer.get("PublicIp", ""),
        "domain": answer.get("Domain", "vpc"),
        "arn": _arn(ctx, "elastic-ip", allocation_id),
        **_tagged(inputs),
    }


def _eip_read(ctx: CloudContext, allocation_id: str, state: Props) -> Props | None:
    try:
        found = _ec2(ctx).describe_addresses(AllocationIds=[allocation_id])["Addresses"]
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    if not found:
        return None
    return {"publicIp": found[0].get("PublicIp", ""), **_observed_tags(found[0].get("Tags"))}


def _eip_update(
    ctx: CloudContext, allocation_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    return _retag(ctx, allocation_id, state, inputs)


def _eip_delete(ctx: CloudContext, allocation_id: str, state: Props) -> None:
    try:
        _ec2(ctx).release_address(AllocationId=allocation_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


def _nat_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    nat = _ec2(ctx).create_nat_gateway(
        AllocationId=inputs["allocationId"],
        SubnetId=inputs["subnetId"],
        ConnectivityType=inputs.get("connectivityType") or "public",
        TagSpecifications=_tag_spec("natgateway", inputs),
    )["NatGateway"]
    addresses = nat.get("NatGatewayAddresses") or [{}]
    return nat["NatGatewayId"], {
        "connectivityType": nat.get("ConnectivityType", "public"),
        "publicIp": addresses[0].get("PublicIp", ""),
        "privateIp": addresses[0].get("PrivateIp", ""),
        "networkInterfaceId": addresses[0].get("NetworkInterfaceId", ""),
        **_tagged(inputs),
    }


def _nat_read(ctx: CloudContext, nat_id: str, state: Props) -> Props | None:
    try:
        found = _ec2(ctx).describe_nat_gateways(NatGatewayIds=[nat_id])["NatGateways"]
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    if not found or found[0].get("State") in ("deleted", "deleting"):
        return None
    return {"subnetId": found[0]["SubnetId"], **_observed_tags(found[0].get("Tags"))}


def _nat_update(
    ctx: CloudContext, nat_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    return _retag(ctx, nat_id, state, inputs)


def _nat_delete(ctx: CloudContext, nat_id: str, state: Props) -> None:
    try:
        _ec2(ctx).delete_nat_gateway(NatGatewayId=nat_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- security groups and their rules ----------------------------------------------------------------


def _rule_permission(rule: Props, group_id: str) -> dict[str, Any]:
    """An inline ingress/egress block as AWS's IpPermission."""
    protocol = str(rule.get("protocol", "-1"))
    permission: dict[str, Any] = {"IpProtocol": "-1" if protocol in ("all", "-1") else protocol}
    if permission["IpProtocol"] != "-1":
        permission["FromPort"] = int(rule.get("fromPort") or 0)
        permission["ToPort"] = int(rule.get("toPort") or 0)
    described = {"Description": rule["description"]} if rule.get("description") else {}
    permission["IpRanges"] = [{"CidrIp": c, **described} for c in rule.get("cidrBlocks") or []]
    permission["Ipv6Ranges"] = [
        {"CidrIpv6": c, **described} for c in rule.get("ipv6CidrBlocks") or []
    ]
    permission["PrefixListIds"] = [
        {"PrefixListId": p, **described} for p in rule.get("prefixListIds") or []
    ]
    groups = list(rule.get("securityGroups") or []) + ([group_id] if rule.get("self") else [])
    permission["UserIdGroupPairs"] = [{"GroupId": g, **described} for g in groups]
    return permission


def _observed_rules(permissions: list[dict[str, Any]], group_id: str, current: Any) -> Any:
    """A group's rules of one direction in the shape of the state's inline block."""
    observed = []
    for permission in permissions:
        protocol = str(permission.get("IpProtocol", "-1"))
        groups = [p["GroupId"] for p in permission.get("UserIdGroupPairs", [])]
        ranges = [
            *permission.get("IpRanges", []),
            *permission.get("Ipv6Ranges", []),
            *permission.get("PrefixListIds", []),
            *permission.get("UserIdGroupPairs", []),
        ]
        rule: Props = {
            "protocol": protocol,
            "fromPort": int(permission.get("FromPort", 0)),
            "toPort": int(permission.get("ToPort", 0)),
            "cidrBlocks": [r["CidrIp"] for r in permission.get("IpRanges", [])],
            "ipv6CidrBlocks": [r["CidrIpv6"] for r in permission.get("Ipv6Ranges", [])],
            "prefixListIds": [r["PrefixListId"] for r in permission.get("PrefixListIds", [])],
            "securityGroups": [g for g in groups if g != group_id],
            "self": group_id in groups,
            "description": next((r["Description"] for r in ranges if r.get("Description")), ""),
        }
        observed.append(rule)
    if isinstance(current, list) and _rule_set(current) == _rule_set(observed):
        return current  # the block as the program wrote it ("all", keys left out)
    return observed


_RULE_DEFAULTS: Props = {
    "fromPort": 0,
    "toPort": 0,
    "cidrBlocks": [],
    "ipv6CidrBlocks": [],
    "prefixListIds": [],
    "securityGroups": [],
    "self": False,
    "description": "",
}


def _rule_set(rules: list[Any]) -> list[str]:
    """Inline rules as comparable text: defaults filled in, "all" as -1, lists as sets."""
    out = []
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        full = {**_RULE_DEFAULTS, **{k: v for k, v in rule.items() if v is not None}}
        full["protocol"] = "-1" if str(full.get("protocol")) in ("all", "-1") else full["protocol"]
        if full["protocol"] == "-1":
            full["fromPort"] = full["toPort"] = 0
        for key in ("cidrBlocks", "ipv6CidrBlocks", "prefixListIds", "securityGroups"):
            full[key] = sorted(full[key])
        out.append(json.dumps(plain_number(full), sort_keys=True))
    return sorted(out)


def _sync_rules(ctx: CloudContext, group_id: str, egress: bool, rules: list[Any]) -> None:
    """Make the group's rules of one direction exactly `rules`."""
    ec2 = _ec2(ctx)
    group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    existing = group.get("IpPermissionsEgress" if egress else "IpPermissions") or []
    revoke = ec2.revoke_security_group_egress if egress else ec2.revoke_security_group_ingress
    authorize = (
        ec2.authorize_security_group_egress if egress else ec2.authorize_security_group_ingress
    )
    if existing:
        revoke(GroupId=group_id, IpPermissions=existing)
    if rules:
        authorize(GroupId=group_id, IpPermissions=[_rule_permission(r, group_id) for r in rules])


def _sg_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    ec2 = _ec2(ctx)
    args: dict[str, Any] = {
        "GroupName": inputs["name"],
        "Description": inputs.get("description") or "Managed by Pulumi",
        "TagSpecifications": _tag_spec("security-group", inputs),
    }
    if inputs.get("vpcId"):
        args["VpcId"] = inputs["vpcId"]
    group_id = ec2.create_security_group(**args)["GroupId"]
    # As pulumi-aws does: the default allow-all egress goes, so only declared rules remain.
    group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    if group.get("IpPermissionsEgress"):
        ec2.revoke_security_group_egress(
            GroupId=group_id, IpPermissions=group["IpPermissionsEgress"]
        )
    for key, egress in (("ingress", False), ("egress", True)):
        if inputs.get(key):
            _sync_rules(ctx, group_id, egress, list(inputs[key]))
    return group_id, {
        "arn": _arn(ctx, "security-group", group_id),
        "ownerId": group.get("OwnerId", ctx.account_id),
        "description": args["Description"],
        **_tagged(inputs),
    }


def _sg_read(ctx: CloudContext, group_id: str, state: Props) -> Props | None:
    try:
        group = _ec2(ctx).describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    observed: Props = {
        "name": group["GroupName"],
        "description": group.get("Description", ""),
        **_observed_tags(group.get("Tags")),
    }
    if group.get("VpcId"):
        observed["vpcId"] = group["VpcId"]
    for key, field in (("ingress", "IpPermissions"), ("egress", "IpPermissionsEgress")):
        if state.get(key) is not None:
            observed[key] = _observed_rules(group.get(field) or [], group_id, state[key])
    return observed


def _sg_update(
    ctx: CloudContext, group_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    for key, egress in (("ingress", False), ("egress", True)):
        if key in changed:
            _sync_rules(ctx, group_id, egress, list(inputs.get(key) or []))
    return _retag(ctx, group_id, state, inputs)


def _sg_delete(ctx: CloudContext, group_id: str, state: Props) -> None:
    try:
        _ec2(ctx).delete_security_group(GroupId=group_id)
    except ClientError as exc:
        if not _gone(exc):
            raise


def _permission(inputs: Props) -> dict[str, Any]:
    permission: dict[str, Any] = {"IpProtocol": str(inputs["ipProtocol"])}
    if inputs.get("fromPort") is not None:
        permission["FromPort"] = int(inputs["fromPort"])
    if inputs.get("toPort") is not None:
        permission["ToPort"] = int(inputs["toPort"])
    description = {"Description": inputs["description"]} if inputs.get("description") else {}
    if inputs.get("cidrIpv4"):
        permission["IpRanges"] = [{"CidrIp": inputs["cidrIpv4"], **description}]
    if inputs.get("referencedSecurityGroupId"):
        permission["UserIdGroupPairs"] = [
            {"GroupId": inputs["referencedSecurityGroupId"], **description}
        ]
    return permission


def _rule_kind(egress: bool) -> ResourceType:
    direction = "egress" if egress else "ingress"
    token = f"aws:vpc/securityGroup{direction.title()}Rule:SecurityGroup{direction.title()}Rule"

    def create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
        ec2 = _ec2(ctx)
        authorize = (
            ec2.authorize_security_group_egress if egress else ec2.authorize_security_group_ingress
        )
        answer = authorize(
            GroupId=inputs["securityGroupId"],
            IpPermissions=[_permission(inputs)],
            TagSpecifications=_tag_spec("security-group-rule", inputs),
        )
        rule_id = answer["SecurityGroupRules"][0]["SecurityGroupRuleId"]
        return rule_id, {
            "arn": _arn(ctx, "security-group-rule", rule_id),
            "securityGroupRuleId": rule_id,
            **_tagged(inputs),
        }

    def read(ctx: CloudContext, rule_id: str, state: Props) -> Props | None:
        try:
            rules = _ec2(ctx).describe_security_group_rules(SecurityGroupRuleIds=[rule_id])[
                "SecurityGroupRules"
            ]
        except ClientError as exc:
            if _gone(exc):
                return None
            raise
        if not rules:
            return None
        rule = rules[0]
        observed: Props = {
            "securityGroupId": rule["GroupId"],
            "ipProtocol": rule["IpProtocol"],
            **_observed_tags(rule.get("Tags")),
        }
        if rule.get("FromPort") is not None:
            observed["fromPort"] = int(rule["FromPort"])
        if rule.get("ToPort") is not None:
            observed["toPort"] = int(rule["ToPort"])
        if rule.get("CidrIpv4"):
            observed["cidrIpv4"] = rule["CidrIpv4"]
        referenced = (rule.get("ReferencedGroupInfo") or {}).get("GroupId")
        if referenced:
            observed["referencedSecurityGroupId"] = referenced
        return observed

    def update(
        ctx: CloudContext, rule_id: str, state: Props, inputs: Props, changed: frozenset[str]
    ) -> Props:
        return _retag(ctx, rule_id, state, inputs)

    def delete(ctx: CloudContext, rule_id: str, state: Props) -> None:
        ec2 = _ec2(ctx)
        revoke = ec2.revoke_security_group_egress if egress else ec2.revoke_security_group_ingress
        try:
            revoke(GroupId=state["securityGroupId"], SecurityGroupRuleIds=[rule_id])
        except ClientError as exc:
            if not _gone(exc):
                raise

    return ResourceType(
        token=token,
        create=create,
        read=read,
        update=update,
        delete=delete,
        # AWS has no in-place change of a rule's peer or ports: pulumi-aws replaces it.
        force_new=frozenset(
            {
                "securityGroupId",
                "ipProtocol",
                "fromPort",
                "toPort",
                "cidrIpv4",
                "cidrIpv6",
                "referencedSecurityGroupId",
                "prefixListId",
                "description",
            }
        ),
        computed=("arn", "securityGroupRuleId", "tagsAll"),
    )


# --- functions ---------------------------------------------------------------------------------------


_ZONE_FIELDS = {"state": "State", "opt-in-status": "OptInStatus", "zone-name": "ZoneName"}


def get_availability_zones(ctx: CloudContext, args: Props) -> Props:
    """aws:index/getAvailabilityZones: the region's zones, filtered as the arguments say."""
    zones = ctx.client("ec2").describe_availability_zones()["AvailabilityZones"]
    wanted_state = args.get("state")
    if wanted_state:
        zones = [z for z in zones if z.get("State") == wanted_state]
    for item in args.get("filters") or []:
        field = _ZONE_FIELDS.get(str(item.get("name")))
        if field is None:
            continue
        # moto leaves OptInStatus out for regular zones, which AWS reports as not needing opt-in.
        zones = [
            z
            for z in zones
            if str(z.get(field, "opt-in-not-required" if field == "OptInStatus" else ""))
            in item.get("values", [])
        ]
    excluded = set(args.get("excludeNames") or [])
    zones = [z for z in zones if z["ZoneName"] not in excluded]
    return {
        **args,
        "id": ctx.region,
        "region": ctx.region,
        "names": [z["ZoneName"] for z in zones],
        "zoneIds": [z.get("ZoneId", "") for z in zones],
        "groupNames": sorted({z.get("GroupName", ctx.region) for z in zones}),
    }


def _filters(args: Props, extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A lookup's `filters` and `tags` (and fixed attributes) as EC2's Filters."""
    found = [
        {"Name": str(f["name"]), "Values": [str(v) for v in f.get("values") or []]}
        for f in args.get("filters") or []
    ]
    found += [{"Name": f"tag:{k}", "Values": [str(v)]} for k, v in (args.get("tags") or {}).items()]
    for name, value in (extra or {}).items():
        if value not in (None, ""):
            found.append({"Name": name, "Values": [str(value).lower() if value is True else value]})
    return found


def get_vpc(ctx: CloudContext, args: Props) -> Props:
    """aws:ec2/getVpc: the one VPC that matches, in pulumi-aws's result shape.

    Raises:
        NoMatchingResource: none or several match (pulumi-aws's words).
    """
    ec2 = _ec2(ctx)
    kwargs: dict[str, Any] = {}
    if args.get("id"):
        kwargs["VpcIds"] = [str(args["id"])]
    default = args.get("default")
    extra = {
        "cidr": args.get("cidrBlock"),
        "dhcp-options-id": args.get("dhcpOptionsId"),
        "state": args.get("state"),
        "is-default": "true" if default is True else ("false" if default is False else None),
    }
    vpcs = ec2.describe_vpcs(Filters=_filters(args, extra), **kwargs)["Vpcs"]
    if not vpcs:
        raise NoMatchingResource("no matching EC2 VPC found")
    if len(vpcs) > 1:
        raise NoMatchingResource(
            "multiple EC2 VPCs matched; use additional constraints to reduce matches to a "
            "single EC2 VPC"
        )
    vpc = vpcs[0]
    vpc_id = str(vpc["VpcId"])
    computed = _vpc_computed(ctx, vpc_id)
    attributes = {
        attribute: bool(
            ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute=attribute)[
                attribute[0].upper() + attribute[1:]
            ]["Value"]
        )
        for attribute in ("enableDnsSupport", "enableDnsHostnames")
    }
    return {
        **{k: v for k, v in args.items() if k in ("filters",)},
        "id": vpc_id,
        "arn": computed["arn"],
        "cidrBlock": vpc["CidrBlock"],
        "cidrBlockAssociations": [
            {
                "associationId": a.get("AssociationId", ""),
                "cidrBlock": a.get("CidrBlock", ""),
                "state": (a.get("CidrBlockState") or {}).get("State", ""),
            }
            for a in vpc.get("CidrBlockAssociationSet", [])
        ],
        "default": bool(vpc.get("IsDefault", False)),
        "dhcpOptionsId": vpc.get("DhcpOptionsId", ""),
        "enableNetworkAddressUsageMetrics": False,
        "instanceTenancy": vpc.get("InstanceTenancy", "default"),
        "ipv6AssociationId": "",
        "ipv6CidrBlock": "",
        "ipv6CidrBlockAssociations": [],
        "mainRouteTableId": computed["mainRouteTableId"],
        "ownerId": vpc.get("OwnerId", ctx.account_id),
        "region": ctx.region,
        "state": vpc.get("State", "available"),
        "tags": tags_of(vpc.get("Tags")),
        **attributes,
    }


def _subnet_ids(ctx: CloudContext, filters: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for page in _ec2(ctx).get_paginator("describe_subnets").paginate(Filters=filters):
        found += [str(s["SubnetId"]) for s in page["Subnets"]]
    return found


def get_subnets(ctx: CloudContext, args: Props) -> Props:
    """aws:ec2/getSubnets: the ids of the subnets that match (none is not an error)."""
    out: Props = {"id": ctx.region, "region": ctx.region, "ids": _subnet_ids(ctx, _filters(args))}
    for key in ("filters", "tags"):
        if args.get(key) is not None:
            out[key] = args[key]
    return out


def get_subnet_ids(ctx: CloudContext, args: Props) -> Props:
    """aws:ec2/getSubnetIds (deprecated, pulumi-aws < 6): the ids of a VPC's subnets that match.

    Raises:
        NoMatchingResource: none match (that function's words).
    """
    ids = _subnet_ids(ctx, _filters(args, {"vpc-id": args.get("vpcId")}))
    if not ids:
        raise NoMatchingResource("no matching subnet found for vpc with id " + str(args["vpcId"]))
    out: Props = {"id": str(args.get("vpcId")), "vpcId": args.get("vpcId"), "ids": sorted(ids)}
    for key in ("filters", "tags"):
        if args.get(key) is not None:
            out[key] = args[key]
    return out


def get_region(ctx: CloudContext, args: Props) -> Props:
    """aws:index/getRegion: the provider's region."""
    return {
        "id": ctx.region,
        "name": ctx.region,
        "region": ctx.region,
        "endpoint": f"ec2.{ctx.region}.amazonaws.com",
        "description": f"local cloud stand-in for {ctx.region}",
    }


def register(aws: Registry) -> None:
    """Add the networking types and the zone lookup to the aws provider."""
    tags_computed = ("tagsAll",)
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
                *tags_computed,
            ),
            defaults={"enableDnsSupport": True, "instanceTenancy": "default"},
        ),
        ResourceType(
            token="aws:ec2/internetGateway:InternetGateway",
            create=_igw_create,
            read=_igw_read,
            update=_igw_update,
            delete=_igw_delete,
            computed=("arn", "ownerId", *tags_computed),
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
            computed=("arn", "ownerId", "availabilityZoneId", *tags_computed),
            defaults={"mapPublicIpOnLaunch": False, "assignIpv6AddressOnCreation": False},
        ),
        ResourceType(
            token="aws:ec2/routeTable:RouteTable",
            create=_rt_create,
            read=_rt_read,
            update=_rt_update,
            delete=_rt_delete,
            force_new=frozenset({"vpcId"}),
            computed=("arn", "ownerId", *tags_computed),
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
            update=_eip_update,
            delete=_eip_delete,
            force_new=frozenset({"domain", "publicIpv4Pool", "networkBorderGroup"}),
            computed=("allocationId", "publicIp", "arn", *tags_computed),
        ),
        ResourceType(
            token="aws:ec2/natGateway:NatGateway",
            create=_nat_create,
            read=_nat_read,
            update=_nat_update,
            delete=_nat_delete,
            force_new=frozenset({"allocationId", "subnetId", "connectivityType", "privateIp"}),
            computed=("publicIp", "privateIp", "networkInterfaceId", *tags_computed),
        ),
        ResourceType(
            token="aws:ec2/securityGroup:SecurityGroup",
            create=_sg_create,
            read=_sg_read,
            update=_sg_update,
            delete=_sg_delete,
            force_new=frozenset({"name", "namePrefix", "description", "vpcId"}),
            computed=("arn", "ownerId", *tags_computed),
            auto_name="name",
            name_prefix="namePrefix",
            defaults={"description": "Managed by Pulumi", "revokeRulesOnDelete": False},
        ),
        _rule_kind(egress=False),
        _rule_kind(egress=True),
    )
    aws.function("aws:index/getAvailabilityZones:getAvailabilityZones")(get_availability_zones)
    aws.function("aws:index/getRegion:getRegion")(get_region)
    aws.function("aws:ec2/getVpc:getVpc")(get_vpc)
    aws.function("aws:ec2/getSubnets:getSubnets")(get_subnets)
    aws.function("aws:ec2/getSubnetIds:getSubnetIds")(get_subnet_ids)
