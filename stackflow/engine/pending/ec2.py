"""EC2 and VPC resources, which have no physical name: found by what identifies them (a subnet by
its VPC and CIDR, a VPC by its CIDR and tags, a rule by its group, protocol, ports and peer).

Ids are pulumi-aws's: the resource's own id (vpc-, subnet-, igw-, rtb-, rtbassoc-, eipalloc-,
nat-, sg-, sgr-), and for a route "r-" + its table's id + the CRC-32 of its destination.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

from stackflow.engine.pending.cloud import CloudClients
from stackflow.engine.pending.model import Candidate, Lookup, Props, tag_filters, text


def _ec2(clients: CloudClients) -> Any:
    return clients.client("ec2")


def _filters(**by: str | None) -> list[dict[str, Any]]:
    """EC2 filters for the given values (a missing value filters nothing)."""
    return [{"Name": k.replace("_", "-"), "Values": [v]} for k, v in by.items() if v is not None]


def vpc(clients: CloudClients, inputs: Props) -> list[Candidate]:
    cidr = text(inputs, "cidrBlock")
    if cidr is None:
        return []  # an IPAM-allocated block: nothing to tell it by
    found = _ec2(clients).describe_vpcs(Filters=_filters(cidr=cidr) + tag_filters(inputs))["Vpcs"]
    return [Candidate(v["VpcId"]) for v in found if not v.get("IsDefault")]


def subnet(clients: CloudClients, inputs: Props) -> list[Candidate]:
    vpc_id, cidr = text(inputs, "vpcId"), text(inputs, "cidrBlock")
    if vpc_id is None or cidr is None:
        return []
    found = _ec2(clients).describe_subnets(Filters=_filters(vpc_id=vpc_id, cidr_block=cidr))
    return [Candidate(s["SubnetId"]) for s in found["Subnets"]]


def internet_gateway(clients: CloudClients, inputs: Props) -> list[Candidate]:
    vpc_id = text(inputs, "vpcId")
    by = [{"Name": "attachment.vpc-id", "Values": [vpc_id]}] if vpc_id else []
    by += tag_filters(inputs)
    if not by:
        return []  # neither attached nor tagged: any gateway would match
    found = _ec2(clients).describe_internet_gateways(Filters=by)["InternetGateways"]
    return [Candidate(g["InternetGatewayId"]) for g in found]


def route_table(clients: CloudClients, inputs: Props) -> list[Candidate]:
    vpc_id = text(inputs, "vpcId")
    if vpc_id is None:
        return []
    found = _ec2(clients).describe_route_tables(
        Filters=_filters(vpc_id=vpc_id) + tag_filters(inputs)
    )
    return [
        Candidate(t["RouteTableId"])
        for t in found["RouteTables"]
        if not any(a.get("Main") for a in t.get("Associations", []))  # the VPC's own, not made
    ]


def route_table_association(clients: CloudClients, inputs: Props) -> list[Candidate]:
    table = text(inputs, "routeTableId")
    subnet_id, gateway = text(inputs, "subnetId"), text(inputs, "gatewayId")
    if table is None or (subnet_id is None and gateway is None):
        return []
    found = _ec2(clients).describe_route_tables(RouteTableIds=[table])["RouteTables"]
    return [
        Candidate(a["RouteTableAssociationId"])
        for t in found
        for a in t.get("Associations", [])
        if (subnet_id is None or a.get("SubnetId") == subnet_id)
        and (gateway is None or a.get("GatewayId") == gateway)
        and a.get("AssociationState", {}).get("State", "associated") == "associated"
    ]


_ROUTE_TARGETS = {
    "gatewayId": "GatewayId",
    "natGatewayId": "NatGatewayId",
    "networkInterfaceId": "NetworkInterfaceId",
    "vpcPeeringConnectionId": "VpcPeeringConnectionId",
    "transitGatewayId": "TransitGatewayId",
}


def route(clients: CloudClients, inputs: Props) -> list[Candidate]:
    table, destination = text(inputs, "routeTableId"), text(inputs, "destinationCidrBlock")
    if table is None or destination is None:
        return []
    found = _ec2(clients).describe_route_tables(RouteTableIds=[table])["RouteTables"]
    targets = {api: text(inputs, key) for key, api in _ROUTE_TARGETS.items() if text(inputs, key)}
    return [
        Candidate(f"r-{table}{zlib.crc32(destination.encode())}")  # pulumi-aws's route id
        for t in found
        for r in t.get("Routes", [])
        if r.get("DestinationCidrBlock") == destination
        and all(r.get(api) == value for api, value in targets.items())
    ]


def eip(clients: CloudClients, inputs: Props) -> list[Candidate]:
    by = tag_filters(inputs)
    if not by:
        return []  # untagged addresses are all alike
    by += _filters(domain=text(inputs, "domain") or "vpc")
    found = _ec2(clients).describe_addresses(Filters=by)["Addresses"]
    return [Candidate(a["AllocationId"]) for a in found if a.get("AllocationId")]


def nat_gateway(clients: CloudClients, inputs: Props) -> list[Candidate]:
    subnet_id = text(inputs, "subnetId")
    if subnet_id is None:
        return []
    allocation = text(inputs, "allocationId")
    found = _ec2(clients).describe_nat_gateways(
        Filter=_filters(subnet_id=subnet_id) + tag_filters(inputs)
    )["NatGateways"]
    return [
        Candidate(n["NatGatewayId"])
        for n in found
        if n.get("State") not in ("deleting", "deleted", "failed")
        and (
            allocation is None
            or any(a.get("AllocationId") == allocation for a in n.get("NatGatewayAddresses", []))
        )
    ]


def security_group(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    by = _filters(group_name=name, vpc_id=text(inputs, "vpcId"))
    found = _ec2(clients).describe_security_groups(Filters=by)["SecurityGroups"]
    return [Candidate(g["GroupId"]) for g in found]


def _rule_lookup(egress: bool) -> Lookup:
    def rule(clients: CloudClients, inputs: Props) -> list[Candidate]:
        group = text(inputs, "securityGroupId")
        if group is None:
            return []
        found = _ec2(clients).describe_security_group_rules(Filters=_filters(group_id=group))
        return [
            Candidate(r["SecurityGroupRuleId"])
            for r in found["SecurityGroupRules"]
            if bool(r.get("IsEgress")) == egress and _same_rule(r, inputs)
        ]

    return rule


def _same_rule(rule: Mapping[str, Any], inputs: Props) -> bool:
    """Whether AWS's rule is the one the inputs declare (protocol, ports, CIDR or peer group)."""
    protocol = str(inputs.get("ipProtocol", "")).lower()
    if str(rule.get("IpProtocol", "")).lower() != ("-1" if protocol == "all" else protocol):
        return False
    for key, api in (("fromPort", "FromPort"), ("toPort", "ToPort")):
        wanted = inputs.get(key)
        if wanted is not None and protocol not in ("-1", "all") and int(wanted) != rule.get(api):
            return False
    peer = (rule.get("ReferencedGroupInfo") or {}).get("GroupId")
    return (
        text(inputs, "cidrIpv4") == rule.get("CidrIpv4")
        and text(inputs, "cidrIpv6") == rule.get("CidrIpv6")
        and text(inputs, "prefixListId") == rule.get("PrefixListId")
        and text(inputs, "referencedSecurityGroupId") == peer
    )  # AWS refuses a second rule of the same group, protocol, ports and peer: that is enough


LOOKUPS: dict[str, Lookup] = {
    "aws:ec2/vpc:Vpc": vpc,
    "aws:ec2/subnet:Subnet": subnet,
    "aws:ec2/internetGateway:InternetGateway": internet_gateway,
    "aws:ec2/routeTable:RouteTable": route_table,
    "aws:ec2/routeTableAssociation:RouteTableAssociation": route_table_association,
    "aws:ec2/route:Route": route,
    "aws:ec2/eip:Eip": eip,
    "aws:ec2/natGateway:NatGateway": nat_gateway,
    "aws:ec2/securityGroup:SecurityGroup": security_group,
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _rule_lookup(egress=False),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": _rule_lookup(egress=True),
}
