"""The EC2 lookups of the local cloud's aws provider: availability zones, the region, a VPC and
subnets, each in pulumi-aws's result shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.errors import NoMatchingResource
from stackflow.localcloud.registry import Props, Registry, tags_of
from stackflow.localcloud.resources._ec2_common import ec2, vpc_attributes, vpc_computed

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

_ZONE_FIELDS = {"state": "State", "opt-in-status": "OptInStatus", "zone-name": "ZoneName"}


def get_availability_zones(ctx: CloudContext, args: Props) -> Props:
    """aws:index/getAvailabilityZones: the region's zones, filtered as the arguments say."""
    zones = ec2(ctx).describe_availability_zones()["AvailabilityZones"]
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
    vpcs = ec2(ctx).describe_vpcs(Filters=_filters(args, extra), **kwargs)["Vpcs"]
    if not vpcs:
        raise NoMatchingResource("no matching EC2 VPC found")
    if len(vpcs) > 1:
        raise NoMatchingResource(
            "multiple EC2 VPCs matched; use additional constraints to reduce matches to a "
            "single EC2 VPC"
        )
    vpc = vpcs[0]
    vpc_id = str(vpc["VpcId"])
    computed = vpc_computed(ctx, vpc_id)
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
        **vpc_attributes(ctx, vpc_id),
    }


def _subnet_ids(ctx: CloudContext, filters: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for page in ec2(ctx).get_paginator("describe_subnets").paginate(Filters=filters):
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
    """Add the EC2 lookups to the aws provider."""
    aws.function("aws:index/getAvailabilityZones:getAvailabilityZones")(get_availability_zones)
    aws.function("aws:index/getRegion:getRegion")(get_region)
    aws.function("aws:ec2/getVpc:getVpc")(get_vpc)
    aws.function("aws:ec2/getSubnets:getSubnets")(get_subnets)
    aws.function("aws:ec2/getSubnetIds:getSubnetIds")(get_subnet_ids)
