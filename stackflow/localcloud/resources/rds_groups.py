"""RDS DB subnet groups and DB parameter groups of the local cloud (id = the group's name).

Each entry behaves as pulumi-aws 7 (the Terraform AWS provider 6 underneath) does: the same ids,
the same inputs forcing replacement, the same API calls. Create, read and update return every
attribute they read back (`keep_observed`), so that create and read agree on the keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, ResourceType
from stackflow.localcloud.resources._declared import RDS_TAGGING, first
from stackflow.localcloud.resources._shared import (
    MANAGED_BY_PULUMI,
    keep_observed,
    refuse_unserved,
    unless_gone,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

# AWS accepts at most 20 parameters per ModifyDBParameterGroup call.
PARAMETERS_PER_CALL = 20

SUBNET_GROUP = "aws:rds/subnetGroup:SubnetGroup"
PARAMETER_GROUP = "aws:rds/parameterGroup:ParameterGroup"
_GONE = {"subnet": ("DBSubnetGroupNotFoundFault",), "parameter": ("DBParameterGroupNotFound",)}


def _strings(value: Any) -> list[str]:
    return [str(item) for item in value]


def _group_view(ctx: CloudContext, arn: str, view: Props) -> Props:
    """A group's `view` with its ARN and tags as the cloud holds them."""
    tags = RDS_TAGGING.read(ctx.client("rds"), arn)
    return {**view, "arn": arn, "tags": tags, "tagsAll": tags}


def _find(ctx: CloudContext, group: str, name: str) -> dict[str, Any] | None:
    """The `group` ("subnet", "parameter") group named `name`; None if it is gone (moto answers
    an unknown parameter group with an empty list where AWS refuses: both mean gone)."""
    describe = getattr(ctx.client("rds"), f"describe_db_{group}_groups")
    kind = f"DB{group.title()}Group"
    return first(_GONE[group], lambda: describe(**{f"{kind}Name": name}), f"{kind}s")


def _retag_if_changed(ctx: CloudContext, arn: str, inputs: Props, changed: frozenset[str]) -> None:
    if "tags" in changed:
        RDS_TAGGING.sync(ctx.client("rds"), arn, inputs)


# --- aws:rds/subnetGroup:SubnetGroup ------------------------------------------------------------

_SUBNET_GROUP_INPUTS = ("name", "namePrefix", "description", "subnetIds", "tags")


def _subnet_group_view(ctx: CloudContext, group: Mapping[str, Any]) -> Props:
    view = {
        "name": group["DBSubnetGroupName"],
        "description": group.get("DBSubnetGroupDescription"),
        "subnetIds": [s["SubnetIdentifier"] for s in group.get("Subnets", [])],
        "vpcId": group.get("VpcId"),
        "supportedNetworkTypes": group.get("SupportedNetworkTypes"),
    }
    return _group_view(ctx, str(group["DBSubnetGroupArn"]), view)


def _create_subnet_group(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, SUBNET_GROUP, inputs, _SUBNET_GROUP_INPUTS)
    group = ctx.client("rds").create_db_subnet_group(
        DBSubnetGroupName=str(inputs["name"]),
        DBSubnetGroupDescription=str(inputs.get("description") or MANAGED_BY_PULUMI),
        SubnetIds=_strings(inputs.get("subnetIds") or []),
        Tags=RDS_TAGGING.wire(inputs.get("tags") or {}),
    )["DBSubnetGroup"]
    view = _subnet_group_view(ctx, group)
    return str(group["DBSubnetGroupName"]), keep_observed(view, inputs)


def _read_subnet_group(ctx: CloudContext, id: str, state: Props) -> Props | None:
    group = _find(ctx, "subnet", id)
    return None if group is None else keep_observed(_subnet_group_view(ctx, group), state)


def _update_subnet_group(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, SUBNET_GROUP, inputs, _SUBNET_GROUP_INPUTS)
    client = ctx.client("rds")
    description = str(inputs.get("description") or MANAGED_BY_PULUMI)
    subnet_ids = _strings(inputs.get("subnetIds") or [])
    if {"description", "subnetIds"} & changed:
        client.modify_db_subnet_group(
            DBSubnetGroupName=id, DBSubnetGroupDescription=description, SubnetIds=subnet_ids
        )
        # moto 5.2.5 drops the group from its index on ModifyDBSubnetGroup; AWS keeps it.
        if _find(ctx, "subnet", id) is None:
            client.create_db_subnet_group(
                DBSubnetGroupName=id,
                DBSubnetGroupDescription=description,
                SubnetIds=subnet_ids,
                Tags=RDS_TAGGING.wire(state.get("tags") or {}),
            )
    group = client.describe_db_subnet_groups(DBSubnetGroupName=id)["DBSubnetGroups"][0]
    _retag_if_changed(ctx, str(group["DBSubnetGroupArn"]), inputs, changed)
    return keep_observed(_subnet_group_view(ctx, group), inputs)


def _delete_subnet_group(ctx: CloudContext, id: str, state: Props) -> None:
    with unless_gone(_GONE["subnet"]):
        ctx.client("rds").delete_db_subnet_group(DBSubnetGroupName=id)


# --- aws:rds/parameterGroup:ParameterGroup ------------------------------------------------------

_PARAMETER_GROUP_INPUTS = (
    "name",
    "namePrefix",
    "family",
    "description",
    "parameters",
    "skipDestroy",
    "tags",
)


def _observed_parameters(ctx: CloudContext, name: str) -> dict[str, dict[str, Any]]:
    """The group's parameters by name (AWS lists hundreds of engine defaults too)."""
    paginator = ctx.client("rds").get_paginator("describe_db_parameters")
    found: dict[str, dict[str, Any]] = {}
    for page in paginator.paginate(DBParameterGroupName=name):
        for parameter in page.get("Parameters", []):
            found[str(parameter["ParameterName"])] = parameter
    return found


def _parameters_view(
    ctx: CloudContext, name: str, listed: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The parameters `listed` (the inputs or the state) as the cloud holds them, in their order,
    each with the keys it was listed with; one the cloud no longer holds is left out."""
    observed = _observed_parameters(ctx, name)
    view: list[dict[str, Any]] = []
    for item in listed:
        found = observed.get(str(item["name"]))
        if found is None or found.get("ParameterValue") is None:
            continue
        entry = {**item, "value": str(found["ParameterValue"])}
        if "applyMethod" in item and found.get("ApplyMethod"):
            entry["applyMethod"] = str(found["ApplyMethod"]).lower()
        view.append(entry)
    return view


def _parameter_group_view(
    ctx: CloudContext, group: Mapping[str, Any], parameters: list[dict[str, Any]]
) -> Props:
    view = {
        "name": group["DBParameterGroupName"],
        "family": group.get("DBParameterGroupFamily"),
        "description": group.get("Description"),
        "parameters": parameters,
    }
    return _group_view(ctx, str(group["DBParameterGroupArn"]), view)


def _modify_parameters(ctx: CloudContext, name: str, parameters: list[Mapping[str, Any]]) -> None:
    for start in range(0, len(parameters), PARAMETERS_PER_CALL):
        ctx.client("rds").modify_db_parameter_group(
            DBParameterGroupName=name,
            Parameters=[
                {
                    "ParameterName": str(p["name"]),
                    "ParameterValue": str(p["value"]),
                    # pulumi-aws's default apply method
                    "ApplyMethod": str(p.get("applyMethod") or "immediate"),
                }
                for p in parameters[start : start + PARAMETERS_PER_CALL]
            ],
        )


def _create_parameter_group(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, PARAMETER_GROUP, inputs, _PARAMETER_GROUP_INPUTS)
    group = ctx.client("rds").create_db_parameter_group(
        DBParameterGroupName=str(inputs["name"]),
        DBParameterGroupFamily=str(inputs["family"]),
        Description=str(inputs.get("description") or MANAGED_BY_PULUMI),
        Tags=RDS_TAGGING.wire(inputs.get("tags") or {}),
    )["DBParameterGroup"]
    name = str(group["DBParameterGroupName"])
    listed = list(inputs.get("parameters") or [])
    if listed:
        _modify_parameters(ctx, name, listed)
    view = _parameter_group_view(ctx, group, _parameters_view(ctx, name, listed))
    return name, keep_observed(view, inputs)


def _read_parameter_group(ctx: CloudContext, id: str, state: Props) -> Props | None:
    group = _find(ctx, "parameter", id)
    if group is None:
        return None
    parameters = _parameters_view(ctx, id, state.get("parameters") or [])
    return keep_observed(_parameter_group_view(ctx, group, parameters), state)


def _update_parameter_group(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, PARAMETER_GROUP, inputs, _PARAMETER_GROUP_INPUTS)
    listed = list(inputs.get("parameters") or [])
    if "parameters" in changed:
        old = {str(p["name"]): p for p in state.get("parameters") or []}
        _modify_parameters(ctx, id, [p for p in listed if old.get(str(p["name"])) != p])
        # A parameter no longer listed would be reset with ResetDBParameterGroup, which moto
        # 5.2.5 lacks (it answers 500); read reports only the listed ones, so none shows.
    # First DescribeDBParameters: it refuses a vanished group in the cloud's own words.
    parameters = _parameters_view(ctx, id, listed)
    rds = ctx.client("rds")
    group = rds.describe_db_parameter_groups(DBParameterGroupName=id)["DBParameterGroups"][0]
    _retag_if_changed(ctx, str(group["DBParameterGroupArn"]), inputs, changed)
    return keep_observed(_parameter_group_view(ctx, group, parameters), inputs)


def _delete_parameter_group(ctx: CloudContext, id: str, state: Props) -> None:
    if state.get("skipDestroy"):
        return  # pulumi-aws leaves the group in the cloud and only forgets it
    with unless_gone(_GONE["parameter"]):
        ctx.client("rds").delete_db_parameter_group(DBParameterGroupName=id)


def register(aws: Registry) -> None:
    """Add the RDS subnet and parameter group types to the local cloud's `aws` provider."""
    aws.add(
        ResourceType(
            token=SUBNET_GROUP,
            create=_create_subnet_group,
            read=_read_subnet_group,
            update=_update_subnet_group,
            delete=_delete_subnet_group,
            force_new=frozenset({"name", "namePrefix", "region"}),
            computed=("arn", "vpcId", "supportedNetworkTypes", "tagsAll"),
            auto_name="name",
            name_prefix="namePrefix",
            drift_inputs=frozenset({"tags"}),
            delete_before_replace=True,
            defaults={"description": MANAGED_BY_PULUMI},
        ),
        ResourceType(
            token=PARAMETER_GROUP,
            create=_create_parameter_group,
            read=_read_parameter_group,
            update=_update_parameter_group,
            delete=_delete_parameter_group,
            force_new=frozenset({"name", "namePrefix", "family", "description", "region"}),
            computed=("arn", "tagsAll"),
            auto_name="name",
            name_prefix="namePrefix",
            drift_inputs=frozenset({"tags"}),
            delete_before_replace=True,
            defaults={"description": MANAGED_BY_PULUMI, "skipDestroy": False},
        ),
    )
