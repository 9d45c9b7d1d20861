"""The networking stack: a VPC with public and private subnets per AZ, NAT, security groups.

Subnet layout: the VPC is cut into 16 equal blocks; public subnet i takes block i and private
subnet i takes block 8 + i, so changing `az_count` never moves an existing subnet.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pydantic import BaseModel, Field, field_validator

from programs.common import BaseArgs, Cidr, Port, tags

STACK = "networking"
MAX_AZS = 6
_SLOT_BITS = 4  # 16 blocks: 8 public slots, 8 private slots
_PRIVATE_OFFSET = 8
ANYWHERE = "0.0.0.0/0"


class NetworkingArgs(BaseArgs, frozen=True):
    """What the networking program needs."""

    vpc_cidr: Cidr
    az_count: int = Field(ge=2, le=MAX_AZS)
    nat_gateway: bool
    migration_cidrs: list[Cidr] = Field(default_factory=list)
    app_port: Port
    db_port: Port

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_size(cls, value: str) -> str:
        prefix = ipaddress.IPv4Network(value).prefixlen
        # /24 cut into 16 blocks gives /28 subnets, the smallest AWS allows.
        if not 16 <= prefix <= 24:
            raise ValueError(f"VPC CIDR {value} must be between /16 and /24, got /{prefix}")
        return value


class NetworkingOutputs(BaseModel):
    """The networking stack's exports, resolved."""

    vpc_id: str
    vpc_cidr: str
    public_subnet_ids: list[str]
    private_subnet_ids: list[str]
    alb_security_group_id: str
    app_security_group_id: str
    db_security_group_id: str


def subnet_cidrs(vpc_cidr: str, az_count: int) -> tuple[list[str], list[str]]:
    """The (public, private) subnet CIDR blocks for `az_count` AZs inside `vpc_cidr`."""
    blocks = list(ipaddress.IPv4Network(vpc_cidr).subnets(prefixlen_diff=_SLOT_BITS))
    public = [str(blocks[i]) for i in range(az_count)]
    private = [str(blocks[_PRIVATE_OFFSET + i]) for i in range(az_count)]
    return public, private


def networking(args: NetworkingArgs) -> dict[str, Any]:
    """Declare the VPC, subnets, routing, optional NAT and security groups; return the exports.

    Raises:
        ValueError: the region has fewer usable availability zones than `az_count`.
    """
    # Imported here: the graph reads this module's argument and output models on every run,
    # and a run that skips the stack (nothing changed) never loads Pulumi's SDK.
    import pulumi
    import pulumi_aws as aws

    base_tags = tags(args.project, args.environment, STACK)

    def named(suffix: str) -> dict[str, str]:
        return {**base_tags, "Name": args.name(suffix)}

    # Local and Wavelength zones need opting in and lack services (NAT, RDS): leave them out.
    zones = aws.get_availability_zones(
        state="available",
        filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
    ).names
    if len(zones) < args.az_count:
        raise ValueError(
            f"az_count is {args.az_count} but the region has {len(zones)} usable availability "
            f"zones ({', '.join(zones)})"
        )
    zones = zones[: args.az_count]

    vpc = aws.ec2.Vpc(
        "vpc",
        cidr_block=args.vpc_cidr,
        enable_dns_support=True,
        enable_dns_hostnames=True,
        tags=named("vpc"),
    )
    igw = aws.ec2.InternetGateway("igw", vpc_id=vpc.id, tags=named("igw"))

    def tier(kind: str, cidrs: list[str]) -> tuple[list[aws.ec2.Subnet], aws.ec2.RouteTable]:
        """One subnet per AZ, all associated with one route table of their own."""
        table = aws.ec2.RouteTable(kind, vpc_id=vpc.id, tags=named(kind))
        subnets = []
        for zone, cidr in zip(zones, cidrs, strict=True):
            subnet = aws.ec2.Subnet(
                f"{kind}-{zone}",
                vpc_id=vpc.id,
                cidr_block=cidr,
                availability_zone=zone,
                # Nothing launched here gets a public address unless it asks (the ALB does).
                map_public_ip_on_launch=False,
                tags=named(f"{kind}-{zone}"),
            )
            aws.ec2.RouteTableAssociation(
                f"{kind}-{zone}", route_table_id=table.id, subnet_id=subnet.id
            )
            subnets.append(subnet)
        return subnets, table

    public_cidrs, private_cidrs = subnet_cidrs(args.vpc_cidr, args.az_count)
    public_subnets, public_rt = tier("public", public_cidrs)
    # One private table: with at most one NAT gateway, every AZ routes the same way.
    private_subnets, private_rt = tier("private", private_cidrs)
    aws.ec2.Route(
        "public-default",
        route_table_id=public_rt.id,
        destination_cidr_block=ANYWHERE,
        gateway_id=igw.id,
    )
    if args.nat_gateway:
        eip = aws.ec2.Eip(
            "nat", domain="vpc", tags=named("nat"), opts=pulumi.ResourceOptions(depends_on=[igw])
        )
        nat = aws.ec2.NatGateway(
            "nat",
            allocation_id=eip.id,
            subnet_id=public_subnets[0].id,
            tags=named("nat"),
            opts=pulumi.ResourceOptions(depends_on=[igw]),
        )
        aws.ec2.Route(
            "private-default",
            route_table_id=private_rt.id,
            destination_cidr_block=ANYWHERE,
            nat_gateway_id=nat.id,
        )

    alb_sg, app_sg, db_sg = (
        aws.ec2.SecurityGroup(
            f"{role}-sg",
            vpc_id=vpc.id,
            description=description,
            tags=named(f"{role}-sg"),
        )
        for role, description in (
            ("alb", "Load balancer: HTTP and HTTPS from anywhere"),
            ("app", "App tasks: app port from the load balancer only"),
            ("db", "MySQL: from the app tasks and the migration allowlist only"),
        )
    )

    def rule(
        name: str,
        sg: aws.ec2.SecurityGroup,
        port: int,
        description: str,
        *,
        egress: bool = False,
        cidr: str | None = None,
        peer: aws.ec2.SecurityGroup | None = None,
    ) -> None:
        """One TCP port to or from one CIDR block or one peer security group."""
        kind = aws.vpc.SecurityGroupEgressRule if egress else aws.vpc.SecurityGroupIngressRule
        kind(
            name,
            security_group_id=sg.id,
            ip_protocol="tcp",
            from_port=port,
            to_port=port,
            cidr_ipv4=cidr,
            referenced_security_group_id=None if peer is None else peer.id,
            description=description,
            tags=named(name),
        )

    rule("alb-in-http", alb_sg, 80, "HTTP from anywhere", cidr=ANYWHERE)
    rule("alb-in-https", alb_sg, 443, "HTTPS from anywhere", cidr=ANYWHERE)
    rule("alb-out-app", alb_sg, args.app_port, "To the app tasks", egress=True, peer=app_sg)

    rule("app-in-alb", app_sg, args.app_port, "From the load balancer", peer=alb_sg)
    rule("app-out-db", app_sg, args.db_port, "To MySQL", egress=True, peer=db_sg)
    # Image pulls, Secrets Manager and CloudWatch Logs are HTTPS endpoints outside the VPC.
    rule(
        "app-out-https", app_sg, 443, "HTTPS to AWS APIs and registries", egress=True, cidr=ANYWHERE
    )

    rule("db-in-app", db_sg, args.db_port, "MySQL from the app tasks", peer=app_sg)
    for cidr in args.migration_cidrs:
        rule(
            f"db-in-migration-{cidr.replace('/', '-')}",
            db_sg,
            args.db_port,
            f"MySQL from the migration runner at {cidr}",
            cidr=cidr,
        )
    # No egress rules for the database: replies to allowed connections need none.

    return {
        "vpc_id": vpc.id,
        "vpc_cidr": vpc.cidr_block,
        # Lists of outputs, not one output of a list: a preview knows the subnets that stay.
        "public_subnet_ids": [s.id for s in public_subnets],
        "private_subnet_ids": [s.id for s in private_subnets],
        "alb_security_group_id": alb_sg.id,
        "app_security_group_id": app_sg.id,
        "db_security_group_id": db_sg.id,
    }
