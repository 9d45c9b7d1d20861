"""Security groups and their rules of the local cloud's aws provider: a group with inline
`ingress`/`egress` blocks, and the standalone `aws:vpc` ingress and egress rules (ids: the
group's id, the rule's id)."""

from __future__ import annotations

import json
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
from stackflow.localcloud.resources._shared import plain_number, unless_gone

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext


def _rules_call(client: Any, verb: str, egress: bool) -> Any:
    """The client's `<verb>_security_group_<egress|ingress>` call ("authorize", "revoke")."""
    return getattr(client, f"{verb}_security_group_{'egress' if egress else 'ingress'}")


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
    client = ec2(ctx)
    group = client.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    existing = group.get("IpPermissionsEgress" if egress else "IpPermissions") or []
    if existing:
        _rules_call(client, "revoke", egress)(GroupId=group_id, IpPermissions=existing)
    if rules:
        permissions = [_rule_permission(r, group_id) for r in rules]
        _rules_call(client, "authorize", egress)(GroupId=group_id, IpPermissions=permissions)


def _sg_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    client = ec2(ctx)
    args: dict[str, Any] = {
        "GroupName": inputs["name"],
        "Description": inputs.get("description") or "Managed by Pulumi",
        "TagSpecifications": tag_spec("security-group", inputs),
    }
    if inputs.get("vpcId"):
        args["VpcId"] = inputs["vpcId"]
    group_id = client.create_security_group(**args)["GroupId"]
    # As pulumi-aws does: the default allow-all egress goes, so only declared rules remain.
    group = client.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    if group.get("IpPermissionsEgress"):
        client.revoke_security_group_egress(
            GroupId=group_id, IpPermissions=group["IpPermissionsEgress"]
        )
    for key, egress in (("ingress", False), ("egress", True)):
        if inputs.get(key):
            _sync_rules(ctx, group_id, egress, list(inputs[key]))
    return group_id, {
        "arn": arn(ctx, "security-group", group_id),
        "ownerId": group.get("OwnerId", ctx.account_id),
        "description": args["Description"],
        **tagged(inputs),
    }


def _sg_read(ctx: CloudContext, group_id: str, state: Props) -> Props | None:
    client = ec2(ctx)
    group = found(
        GONE, lambda: client.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    )
    if group is None:
        return None
    observed: Props = {
        "name": group["GroupName"],
        "description": group.get("Description", ""),
        **observed_tags(group.get("Tags")),
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
    return retag(ctx, group_id, inputs)


def _sg_delete(ctx: CloudContext, group_id: str, state: Props) -> None:
    with unless_gone(GONE):
        ec2(ctx).delete_security_group(GroupId=group_id)


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
        client = ec2(ctx)
        answer = _rules_call(client, "authorize", egress)(
            GroupId=inputs["securityGroupId"],
            IpPermissions=[_permission(inputs)],
            TagSpecifications=tag_spec("security-group-rule", inputs),
        )
        rule_id = answer["SecurityGroupRules"][0]["SecurityGroupRuleId"]
        return rule_id, {
            "arn": arn(ctx, "security-group-rule", rule_id),
            "securityGroupRuleId": rule_id,
            **tagged(inputs),
        }

    def read(ctx: CloudContext, rule_id: str, state: Props) -> Props | None:
        client = ec2(ctx)
        rules = found(
            GONE,
            lambda: client.describe_security_group_rules(SecurityGroupRuleIds=[rule_id])[
                "SecurityGroupRules"
            ],
        )
        if not rules:
            return None
        rule = rules[0]
        observed: Props = {
            "securityGroupId": rule["GroupId"],
            "ipProtocol": rule["IpProtocol"],
            **observed_tags(rule.get("Tags")),
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
        return retag(ctx, rule_id, inputs)

    def delete(ctx: CloudContext, rule_id: str, state: Props) -> None:
        client = ec2(ctx)
        with unless_gone(GONE):
            _rules_call(client, "revoke", egress)(
                GroupId=state["securityGroupId"], SecurityGroupRuleIds=[rule_id]
            )

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


def register(aws: Registry) -> None:
    """Add the security group and rule types to the aws provider."""
    aws.add(
        ResourceType(
            token="aws:ec2/securityGroup:SecurityGroup",
            create=_sg_create,
            read=_sg_read,
            update=_sg_update,
            delete=_sg_delete,
            force_new=frozenset({"name", "namePrefix", "description", "vpcId"}),
            computed=("arn", "ownerId", *TAGS_COMPUTED),
            auto_name="name",
            name_prefix="namePrefix",
            defaults={"description": "Managed by Pulumi", "revokeRulesOnDelete": False},
        ),
        _rule_kind(egress=False),
        _rule_kind(egress=True),
    )
