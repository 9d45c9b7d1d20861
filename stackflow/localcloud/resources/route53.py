"""Route 53 hosted zones, records and `getZone` of the local cloud's aws provider. Ids follow
pulumi-aws: a zone's id is its zone id (no `/hostedzone/`), a record's `<zone>_<name>_<type>`
(and `_<set identifier>` when it has one). Names are compared as Route 53 compares them: lower
case, the trailing dot left out, a relative record name completed with the zone's."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import same_members
from stackflow.localcloud.resources.arns import partition_of

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

ZONE = "aws:route53/zone:Zone"
RECORD = "aws:route53/record:Record"
GET_ZONE = "aws:route53/getZone:getZone"
DEFAULT_COMMENT = "Managed by Pulumi"  # pulumi-aws's default for a zone's comment
_ZONE_GONE = ("NoSuchHostedZone",)
_TAGGING = Tagging(
    "list_tags_for_resource",
    "change_tags_for_resource",
    "change_tags_for_resource",
    key="ResourceId",
    by="id",
    field="AddTags",
    keys="RemoveTagKeys",
    item=KEY_VALUE,
    answer="ResourceTagSet.Tags",
    fixed=(("ResourceType", "hostedzone"),),
)


def plain_name(name: str) -> str:
    """A DNS name as Route 53 compares it: lower case, no trailing dot, `\\052` as `*`."""
    return name.replace("\\052", "*").rstrip(".").lower()


def record_name(name: str, zone: str) -> str:
    """`name` completed with the zone's name when it is relative ("www" -> "www.example.com")."""
    plain, zone = plain_name(name), plain_name(zone)
    if not plain:
        return zone
    return plain if plain == zone or plain.endswith(f".{zone}") else f"{plain}.{zone}"


def _same_name(observed: str, current: Any) -> str:
    """The state's spelling of a name when it means the same as the cloud's."""
    if isinstance(current, str) and plain_name(current) == plain_name(observed):
        return current
    return plain_name(observed)


# --- zone ----------------------------------------------------------------------------------


def _zone_id(raw: str) -> str:
    return raw.rsplit("/", 1)[-1]


def _zone_create(route53: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "Name": str(inputs["name"]),
        "CallerReference": uuid.uuid4().hex,
        "HostedZoneConfig": {"Comment": str(inputs.get("comment") or "")},
    }
    vpcs = list(inputs.get("vpcs") or [])
    if vpcs:
        kwargs["VPC"] = _vpc(vpcs[0], ctx.region)
        kwargs["HostedZoneConfig"]["PrivateZone"] = True
    if inputs.get("delegationSetId"):
        kwargs["DelegationSetId"] = str(inputs["delegationSetId"])
    zone_id = _zone_id(str(route53.create_hosted_zone(**kwargs)["HostedZone"]["Id"]))
    for vpc in vpcs[1:]:
        route53.associate_vpc_with_hosted_zone(HostedZoneId=zone_id, VPC=_vpc(vpc, ctx.region))
    return zone_id


def _vpc(vpc: Mapping[str, Any], region: str) -> dict[str, str]:
    """A zone's VPC in Route 53's words (its region the provider's when not given)."""
    return {"VPCId": str(vpc["vpcId"]), "VPCRegion": str(vpc.get("vpcRegion") or region)}


def _zone_describe(route53: Any, zone_id: str, state: Props) -> Answer:
    return dict(route53.get_hosted_zone(Id=zone_id))


def _zone_outputs(answer: Answer, ctx: CloudContext) -> Props:
    zone_id = _zone_id(str(answer["HostedZone"]["Id"]))
    servers = sorted((answer.get("DelegationSet") or {}).get("NameServers") or [])
    return {
        "zoneId": zone_id,
        "arn": f"arn:{partition_of(ctx.region)[0]}:route53:::hostedzone/{zone_id}",
        "nameServers": servers,
        "primaryNameServer": servers[0] if servers else "",
    }


def _zone_observed(answer: Answer, state: Props) -> Props:
    zone = answer["HostedZone"]
    vpcs = [{"vpcId": v["VPCId"], "vpcRegion": v["VPCRegion"]} for v in answer.get("VPCs") or []]
    return {
        "name": _same_name(str(zone["Name"]), state.get("name")),
        "comment": (zone.get("Config") or {}).get("Comment", ""),
        "vpcs": same_members(vpcs, state.get("vpcs")),
    }


def _zone_update(
    route53: Any, zone_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    if "comment" in changed:
        route53.update_hosted_zone_comment(Id=zone_id, Comment=str(inputs.get("comment") or ""))
    if "vpcs" in changed:
        region = str(route53.meta.region_name)
        old = {str(v["vpcId"]): v for v in state.get("vpcs") or []}
        new = {str(v["vpcId"]): v for v in inputs.get("vpcs") or []}
        for vpc_id in sorted(set(new) - set(old)):
            vpc = _vpc(new[vpc_id], region)
            route53.associate_vpc_with_hosted_zone(HostedZoneId=zone_id, VPC=vpc)
        for vpc_id in sorted(set(old) - set(new)):
            vpc = _vpc(old[vpc_id], region)
            route53.disassociate_vpc_from_hosted_zone(HostedZoneId=zone_id, VPC=vpc)


def _zone_delete(route53: Any, zone_id: str, state: Props) -> None:
    if state.get("forceDestroy"):  # its records go first, as pulumi-aws does
        zone = route53.get_hosted_zone(Id=zone_id)["HostedZone"]
        apex = plain_name(str(zone["Name"]))
        changes = [
            {"Action": "DELETE", "ResourceRecordSet": found}
            for found in _record_sets(route53, zone_id)
            if not (found["Type"] in ("NS", "SOA") and plain_name(found["Name"]) == apex)
        ]
        if changes:
            route53.change_resource_record_sets(
                HostedZoneId=zone_id, ChangeBatch={"Changes": changes}
            )
    route53.delete_hosted_zone(Id=zone_id)


ZONE_SHAPE = Shape(
    token=ZONE,
    service="route53",
    inputs=("name", "comment", "delegationSetId", "forceDestroy", "vpcs", "tags"),
    create=_zone_create,
    describe=_zone_describe,
    gone=_ZONE_GONE,
    outputs=_zone_outputs,
    observed=_zone_observed,
    update=_zone_update,
    delete=_zone_delete,
    tagging=_TAGGING,
    tags_after_create=True,
    computed=("zoneId", "arn", "nameServers", "primaryNameServer"),
)


# --- record --------------------------------------------------------------------------------


def _record_sets(route53: Any, zone_id: str) -> list[dict[str, Any]]:
    pages = route53.get_paginator("list_resource_record_sets").paginate(HostedZoneId=zone_id)
    return [dict(found) for page in pages for found in page["ResourceRecordSets"]]


def _zone_name(route53: Any, zone_id: str) -> str:
    return str(route53.get_hosted_zone(Id=zone_id)["HostedZone"]["Name"])


def _record_set(inputs: Props, zone: str) -> dict[str, Any]:
    """The ResourceRecordSet that `inputs` declare, in Route 53's words."""
    found: dict[str, Any] = {
        "Name": record_name(str(inputs["name"]), zone),
        "Type": str(inputs["type"]),
    }
    aliases = list(inputs.get("aliases") or [])
    if aliases:
        alias = aliases[0]
        found["AliasTarget"] = {
            "HostedZoneId": str(alias["zoneId"]),
            "DNSName": str(alias["name"]),
            "EvaluateTargetHealth": bool(alias.get("evaluateTargetHealth")),
        }
    else:
        found["TTL"] = int(inputs.get("ttl") or 0)
        found["ResourceRecords"] = [{"Value": str(v)} for v in inputs.get("records") or []]
    if inputs.get("setIdentifier"):
        found["SetIdentifier"] = str(inputs["setIdentifier"])
    weighted = list(inputs.get("weightedRoutingPolicies") or [])
    if weighted:
        found["Weight"] = int(weighted[0]["weight"])
    if inputs.get("healthCheckId"):
        found["HealthCheckId"] = str(inputs["healthCheckId"])
    return found


def _record_id(inputs: Props) -> str:
    parts = [str(inputs["zoneId"]), plain_name(str(inputs["name"])), str(inputs["type"])]
    return "_".join(
        [*parts, str(inputs["setIdentifier"])] if inputs.get("setIdentifier") else parts
    )


def _find_record(route53: Any, known: Props) -> dict[str, Any] | None:
    """The record set `known` (inputs or state) names, as Route 53 lists it; None if gone."""
    zone_id = str(known["zoneId"])
    zone = _zone_name(route53, zone_id)
    name = record_name(str(known["name"]), zone)
    for found in _record_sets(route53, zone_id):
        if (
            plain_name(found["Name"]) == name
            and found["Type"] == known["type"]
            and found.get("SetIdentifier", "") == (known.get("setIdentifier") or "")
        ):
            return found
    return None


def _record_create(route53: Any, inputs: Props, ctx: CloudContext) -> str:
    zone_id = str(inputs["zoneId"])
    action = "UPSERT" if inputs.get("allowOverwrite") else "CREATE"
    change = {
        "Action": action,
        "ResourceRecordSet": _record_set(inputs, _zone_name(route53, zone_id)),
    }
    route53.change_resource_record_sets(HostedZoneId=zone_id, ChangeBatch={"Changes": [change]})
    return _record_id(inputs)


def _record_describe(route53: Any, record_id: str, state: Props) -> Answer | None:
    found = _find_record(route53, state)
    if found is None:
        return None
    return {
        **found,
        "ZoneId": state["zoneId"],
        "ZoneName": _zone_name(route53, str(state["zoneId"])),
    }


def _record_observed(found: Answer, state: Props) -> Props:
    cloud, current = plain_name(str(found["Name"])), state.get("name")
    # The program's spelling (relative, or with a trailing dot) when it names the same record.
    same = isinstance(current, str) and record_name(current, str(found["ZoneName"])) == cloud
    observed: Props = {
        "name": current if same else cloud,
        "type": found["Type"],
        "zoneId": found["ZoneId"],
        "setIdentifier": found.get("SetIdentifier", ""),
        "healthCheckId": found.get("HealthCheckId", ""),
    }
    alias = found.get("AliasTarget")
    if alias:
        current = (state.get("aliases") or [{}])[0]
        observed["aliases"] = [
            {
                "name": _same_name(str(alias["DNSName"]), current.get("name")),
                "zoneId": alias["HostedZoneId"],
                "evaluateTargetHealth": bool(alias.get("EvaluateTargetHealth")),
            }
        ]
    else:
        values = [str(r["Value"]) for r in found.get("ResourceRecords") or []]
        observed["records"] = same_members(values, state.get("records"))
        observed["ttl"] = found.get("TTL")
    if "Weight" in found:
        observed["weightedRoutingPolicies"] = [{"weight": found["Weight"]}]
    return observed


def _record_update(
    route53: Any, record_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    # As pulumi-aws does: the old record set goes and the new one comes in one change batch.
    zone_id = str(inputs["zoneId"])
    changes = [
        {"Action": "CREATE", "ResourceRecordSet": _record_set(inputs, _zone_name(route53, zone_id))}
    ]
    old = _find_record(route53, state)
    if old is not None:
        changes.insert(0, {"Action": "DELETE", "ResourceRecordSet": old})
    route53.change_resource_record_sets(HostedZoneId=zone_id, ChangeBatch={"Changes": changes})


def _record_delete(route53: Any, record_id: str, state: Props) -> None:
    found = _find_record(route53, state)
    if found is not None:  # Route 53 deletes a record set only as it is now
        route53.change_resource_record_sets(
            HostedZoneId=str(state["zoneId"]),
            ChangeBatch={"Changes": [{"Action": "DELETE", "ResourceRecordSet": found}]},
        )


RECORD_SHAPE = Shape(
    token=RECORD,
    service="route53",
    inputs=(
        "zoneId",
        "name",
        "type",
        "ttl",
        "records",
        "aliases",
        "allowOverwrite",
        "setIdentifier",
        "weightedRoutingPolicies",
        "healthCheckId",
    ),
    create=_record_create,
    describe=_record_describe,
    gone=_ZONE_GONE,
    outputs=lambda found, ctx: {"fqdn": plain_name(str(found["Name"]))},
    observed=_record_observed,
    update=_record_update,
    delete=_record_delete,
    computed=("fqdn",),
)


# --- getZone -------------------------------------------------------------------------------


def get_zone(ctx: CloudContext, args: Props) -> Props:
    """aws:route53/getZone: the hosted zone of `zoneId`, or the one `name` names (public unless
    `privateZone`; with `vpcId` and `tags` as further filters).

    Raises:
        LookupError: no zone, or more than one, matches; as pulumi-aws says it.
    """
    route53 = ctx.client("route53")
    if args.get("zoneId"):
        matches = [_zone_id(str(args["zoneId"]))]
    else:
        wanted = plain_name(str(args.get("name") or ""))
        private = bool(args.get("privateZone"))
        pages = route53.get_paginator("list_hosted_zones").paginate()
        matches = [
            _zone_id(str(zone["Id"]))
            for page in pages
            for zone in page["HostedZones"]
            if plain_name(str(zone["Name"])) == wanted
            and bool((zone.get("Config") or {}).get("PrivateZone")) == private
        ]
    found = [_zone_view(route53, zone_id, ctx) for zone_id in matches]
    found = [zone for zone in found if _matches(zone, args)]
    if len(found) != 1:
        which = "no matching" if not found else "multiple"
        raise LookupError(f"{which} Route 53 Hosted Zone found")
    return found[0]


def _zone_view(route53: Any, zone_id: str, ctx: CloudContext) -> Props:
    answer = route53.get_hosted_zone(Id=zone_id)
    zone = answer["HostedZone"]
    vpcs = [str(v["VPCId"]) for v in answer.get("VPCs") or []]
    return {
        **_zone_outputs(answer, ctx),
        "id": zone_id,
        "name": plain_name(str(zone["Name"])),
        "callerReference": zone.get("CallerReference", ""),
        "comment": (zone.get("Config") or {}).get("Comment", ""),
        "privateZone": bool((zone.get("Config") or {}).get("PrivateZone")),
        "resourceRecordSetCount": int(zone.get("ResourceRecordSetCount") or 0),
        "tags": _TAGGING.read(route53, zone_id),
        "vpcId": vpcs[0] if vpcs else "",
        "linkedServiceDescription": "",
        "linkedServicePrincipal": "",
    }


def _matches(zone: Props, args: Props) -> bool:
    if args.get("vpcId") and zone["vpcId"] != args["vpcId"]:
        return False
    wanted = {str(k): str(v) for k, v in (args.get("tags") or {}).items()}
    return all(zone["tags"].get(k) == v for k, v in wanted.items())


def register(aws: Registry) -> None:
    """Add the Route 53 zone and record types and getZone."""
    aws.add(
        ZONE_SHAPE.type(
            force_new={"name", "delegationSetId"},
            defaults={"comment": DEFAULT_COMMENT, "forceDestroy": False},
        ),
        RECORD_SHAPE.type(force_new={"zoneId", "name"}),
    )
    aws.function(GET_ZONE)(get_zone)
