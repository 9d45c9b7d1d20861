"""CloudWatch Logs of the local cloud's aws provider: log groups (id = the group's name, as in
pulumi-aws; its `arn` output has no trailing ":*"), log streams (id = the stream's name) and
metric filters (id = the filter's name)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, plain_number

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
LOG_STREAM = "aws:cloudwatch/logStream:LogStream"
METRIC_FILTER = "aws:cloudwatch/logMetricFilter:LogMetricFilter"
_GONE = ("ResourceNotFoundException",)


def _refuse_protection(inputs: Props) -> None:
    if inputs.get("deletionProtectionEnabled"):
        raise NotImplementedError(
            f"the local cloud's aws provider does not serve deletionProtectionEnabled=true of "
            f"{LOG_GROUP} yet (the local cloud has no log group deletion protection)"
        )


def _find(logs: Any, name: str) -> dict[str, Any] | None:
    for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=name):
        for group in page["logGroups"]:
            if group["logGroupName"] == name:
                return dict(group)
    return None


def _group_create(logs: Any, inputs: Props, ctx: CloudContext) -> str:
    _refuse_protection(inputs)
    name = str(inputs["name"])
    kwargs: dict[str, Any] = {"logGroupName": name}
    if inputs.get("kmsKeyId"):
        kwargs["kmsKeyId"] = str(inputs["kmsKeyId"])
    if inputs.get("logGroupClass"):
        kwargs["logGroupClass"] = str(inputs["logGroupClass"])
    if input_tags(inputs):
        kwargs["tags"] = input_tags(inputs)
    logs.create_log_group(**kwargs)
    if inputs.get("retentionInDays"):  # 0: never expire, AWS's default
        logs.put_retention_policy(logGroupName=name, retentionInDays=int(inputs["retentionInDays"]))
    return name


def _group_observed(group: Answer, state: Props) -> Props:
    return {
        "name": group["logGroupName"],
        "retentionInDays": int(group.get("retentionInDays") or 0),  # 0: never expire
        "kmsKeyId": group.get("kmsKeyId", ""),
        "logGroupClass": group.get("logGroupClass"),
    }


def _group_update(logs: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    _refuse_protection(inputs)
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


def _group_delete(logs: Any, id: str, state: Props) -> None:
    if not state.get("skipDestroy"):  # pulumi-aws keeps the group (and its logs) and forgets it
        logs.delete_log_group(logGroupName=id)


GROUP = Shape(
    token=LOG_GROUP,
    service="logs",
    inputs=(
        "name",
        "namePrefix",
        "retentionInDays",
        "kmsKeyId",
        "logGroupClass",
        "skipDestroy",
        "deletionProtectionEnabled",
        "tags",
    ),
    create=_group_create,
    describe=lambda logs, name, state: _find(logs, name),
    gone=_GONE,
    outputs=lambda group, ctx: {"arn": str(group["arn"]).removesuffix(":*")},
    observed=_group_observed,
    update=_group_update,
    delete=_group_delete,
    tagging=Tagging("list_tags_for_resource", "tag_resource", "untag_resource", key="resourceArn"),
    computed=("arn",),
)


def _stream_create(logs: Any, inputs: Props, ctx: CloudContext) -> str:
    logs.create_log_stream(logGroupName=inputs["logGroupName"], logStreamName=inputs["name"])
    return str(inputs["name"])


def _stream_describe(logs: Any, name: str, state: Props) -> Answer | None:
    answer = logs.describe_log_streams(
        logGroupName=str(state["logGroupName"]), logStreamNamePrefix=name
    )
    return next((s for s in answer["logStreams"] if s["logStreamName"] == name), None)


STREAM = Shape(
    token=LOG_STREAM,
    service="logs",
    inputs=("name", "logGroupName"),
    create=_stream_create,
    describe=_stream_describe,
    gone=_GONE,
    outputs=lambda stream, ctx: {"arn": stream["arn"]},
    observed=lambda stream, state: {"name": stream["logStreamName"]},
    delete=lambda logs, name, state: logs.delete_log_stream(
        logGroupName=state["logGroupName"], logStreamName=name
    ),
    computed=("arn",),
)


def _transformations(inputs: Props) -> list[dict[str, Any]]:
    given = inputs["metricTransformation"]
    out: dict[str, Any] = {
        "metricName": str(given["name"]),
        "metricNamespace": str(given["namespace"]),
        "metricValue": str(given["value"]),
    }
    if given.get("defaultValue") not in (None, ""):
        out["defaultValue"] = float(given["defaultValue"])
    if given.get("unit"):
        out["unit"] = str(given["unit"])
    return [out]


def _filter_put(logs: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    logs.put_metric_filter(
        logGroupName=str(inputs["logGroupName"]),
        filterName=str(inputs["name"]),
        filterPattern=str(inputs.get("pattern") or ""),
        metricTransformations=_transformations(inputs),
    )
    return str(inputs["name"])


def _filter_describe(logs: Any, name: str, state: Props) -> Answer | None:
    answer = logs.describe_metric_filters(
        logGroupName=str(state["logGroupName"]), filterNamePrefix=name
    )
    return next((f for f in answer["metricFilters"] if f["filterName"] == name), None)


def _filter_observed(found: Answer, state: Props) -> Props:
    (given,) = found.get("metricTransformations") or [{}]
    transformation = {
        "name": given.get("metricName"),
        "namespace": given.get("metricNamespace"),
        "value": given.get("metricValue"),
        **({"unit": given["unit"]} if given.get("unit") else {}),
    }
    return {
        "pattern": found.get("filterPattern", ""),
        "metricTransformation": plain_number(transformation),
    }


def _filter_replace(
    logs: Any, name: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    # PutMetricFilter replaces a filter of the same name on AWS; moto 5.2.5 adds a second one.
    logs.delete_metric_filter(logGroupName=state["logGroupName"], filterName=name)
    _filter_put(logs, inputs)


FILTER = Shape(
    token=METRIC_FILTER,
    service="logs",
    inputs=("name", "logGroupName", "pattern", "metricTransformation", "applyOnTransformedLogs"),
    create=_filter_put,
    describe=_filter_describe,
    gone=_GONE,
    outputs=lambda found, ctx: {},
    observed=_filter_observed,
    update=_filter_replace,
    delete=lambda logs, name, state: logs.delete_metric_filter(
        logGroupName=state["logGroupName"], filterName=name
    ),
)


def register(aws: Registry) -> None:
    """Add the CloudWatch Logs types to the aws registry."""
    aws.add(
        GROUP.type(
            force_new={"name", "namePrefix", "logGroupClass"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=512,
        ),
        STREAM.type(auto_name="name", auto_name_max=512),
        FILTER.type(force_new={"name", "logGroupName"}, auto_name="name", auto_name_max=512),
    )
