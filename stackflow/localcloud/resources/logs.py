"""CloudWatch log groups of the local cloud's aws provider (id = the group's name, as in
pulumi-aws; its `arn` output has no trailing ":*")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props, Registry, ResourceType
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    observe,
    refuse_unserved,
    tag_changes,
    tag_outputs,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"

_LOG_GROUP_INPUTS = {
    "name",
    "namePrefix",
    "retentionInDays",
    "kmsKeyId",
    "logGroupClass",
    "skipDestroy",
    "deletionProtectionEnabled",
    "tags",
}


def _refuse(ctx: CloudContext, inputs: Props) -> None:
    refuse_unserved(ctx, LOG_GROUP, inputs, _LOG_GROUP_INPUTS)
    if inputs.get("deletionProtectionEnabled"):
        raise NotImplementedError(
            f"the local cloud's aws provider does not serve deletionProtectionEnabled=true of "
            f"{LOG_GROUP} yet (the local cloud has no log group deletion protection)"
        )


def _arn(name: str, ctx: CloudContext) -> str:
    return f"arn:aws:logs:{ctx.region}:{ctx.account_id}:log-group:{name}"


def _find(ctx: CloudContext, name: str) -> dict[str, Any] | None:
    paginator = ctx.client("logs").get_paginator("describe_log_groups")
    for page in paginator.paginate(logGroupNamePrefix=name):
        for group in page["logGroups"]:
            if group["logGroupName"] == name:
                return dict(group)
    return None


def _create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    _refuse(ctx, inputs)
    name = str(inputs["name"])
    kwargs: dict[str, Any] = {"logGroupName": name}
    if inputs.get("kmsKeyId"):
        kwargs["kmsKeyId"] = str(inputs["kmsKeyId"])
    if inputs.get("logGroupClass"):
        kwargs["logGroupClass"] = str(inputs["logGroupClass"])
    tags = input_tags(inputs)
    if tags:
        kwargs["tags"] = tags
    logs = ctx.client("logs")
    logs.create_log_group(**kwargs)
    if inputs.get("retentionInDays"):  # 0: never expire, AWS's default
        logs.put_retention_policy(logGroupName=name, retentionInDays=int(inputs["retentionInDays"]))
    group = _find(ctx, name)
    arn = str(group["arn"]).removesuffix(":*") if group else _arn(name, ctx)
    return name, {"arn": arn, "tagsAll": tags}


def _read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    group = _find(ctx, id)
    if group is None:
        return None
    arn = str(group["arn"]).removesuffix(":*")
    observed: Props = {
        "name": group["logGroupName"],
        "retentionInDays": int(group.get("retentionInDays") or 0),  # 0: never expire
        "kmsKeyId": group.get("kmsKeyId", ""),
        "logGroupClass": group.get("logGroupClass"),
    }
    tags = ctx.client("logs").list_tags_for_resource(resourceArn=arn).get("tags", {})
    return {**observe(state, observed), "arn": arn, **tag_outputs(state, tags)}


def _update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    _refuse(ctx, inputs)
    logs = ctx.client("logs")
    if "retentionInDays" in changed:
        if inputs.get("retentionInDays"):
            logs.put_retention_policy(
                logGroupName=id, retentionInDays=int(inputs["retentionInDays"])
            )
        else:
            logs.delete_retention_policy(logGroupName=id)
    if "kmsKeyId" in changed:
        if inputs.get("kmsKeyId"):
            logs.associate_kms_key(logGroupName=id, kmsKeyId=str(inputs["kmsKeyId"]))
        else:
            logs.disassociate_kms_key(logGroupName=id)
    arn = str(state.get("arn") or _arn(id, ctx))
    current = logs.list_tags_for_resource(resourceArn=arn).get("tags", {})
    upsert, remove = tag_changes(current, inputs)
    if remove:
        logs.untag_resource(resourceArn=arn, tagKeys=remove)
    if upsert:
        logs.tag_resource(resourceArn=arn, tags=upsert)
    return {"arn": arn, "tagsAll": input_tags(inputs)}


def _delete(ctx: CloudContext, id: str, state: Props) -> None:
    if state.get("skipDestroy"):
        return  # pulumi-aws keeps the group (and its logs) and forgets it
    try:
        ctx.client("logs").delete_log_group(logGroupName=id)
    except ClientError as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise


def register(aws: Registry) -> None:
    """Add the CloudWatch log group type to the aws registry."""
    aws.add(
        ResourceType(
            token=LOG_GROUP,
            create=_create,
            read=_read,
            update=_update,
            delete=_delete,
            force_new=frozenset({"name", "namePrefix", "logGroupClass", "region"}),
            computed=("arn", "tagsAll"),
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=512,
            drift_inputs=frozenset({"tags"}),
        )
    )
