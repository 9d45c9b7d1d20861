"""Kinesis data streams of the local cloud's aws provider (id = the stream's ARN, as in
pulumi-aws)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

STREAM = "aws:kinesis/stream:Stream"
DEFAULT_RETENTION_HOURS = 24


def _mode(inputs: Props) -> str:
    return str((inputs.get("streamModeDetails") or {}).get("streamMode") or "PROVISIONED")


def _create(kinesis: Any, inputs: Props, ctx: CloudContext) -> str:
    name = str(inputs["name"])
    kwargs: dict[str, Any] = {
        "StreamName": name,
        "StreamModeDetails": {"StreamMode": _mode(inputs)},
    }
    if _mode(inputs) == "PROVISIONED":
        kwargs["ShardCount"] = int(inputs.get("shardCount") or 1)
    kinesis.create_stream(**kwargs)
    retention = int(inputs.get("retentionPeriod") or DEFAULT_RETENTION_HOURS)
    if retention > DEFAULT_RETENTION_HOURS:
        kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=retention)
    if input_tags(inputs):
        kinesis.add_tags_to_stream(StreamName=name, Tags=input_tags(inputs))
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    return str(summary["StreamARN"])


def _describe(kinesis: Any, arn: str, state: Props) -> Answer:
    return dict(kinesis.describe_stream_summary(StreamARN=arn)["StreamDescriptionSummary"])


def _observed(summary: Answer, state: Props) -> Props:
    mode = (summary.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED")
    observed: Props = {
        "name": summary["StreamName"],
        "retentionPeriod": summary.get("RetentionPeriodHours"),
        "encryptionType": summary.get("EncryptionType") or "NONE",
        "streamModeDetails": {"streamMode": mode},
    }
    if mode == "PROVISIONED":
        observed["shardCount"] = summary.get("OpenShardCount")
    return observed


def _update(kinesis: Any, arn: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    name = str(state["name"])
    if "shardCount" in changed and _mode(inputs) == "PROVISIONED":
        kinesis.update_shard_count(
            StreamName=name,
            TargetShardCount=int(inputs["shardCount"]),
            ScalingType="UNIFORM_SCALING",
        )
    if "retentionPeriod" in changed:
        old = int(state.get("retentionPeriod") or DEFAULT_RETENTION_HOURS)
        new = int(inputs.get("retentionPeriod") or DEFAULT_RETENTION_HOURS)
        call = (
            kinesis.increase_stream_retention_period
            if new > old
            else kinesis.decrease_stream_retention_period
        )
        call(StreamName=name, RetentionPeriodHours=new)


SHAPE = Shape(
    token=STREAM,
    service="kinesis",
    inputs=(
        "name",
        "shardCount",
        "retentionPeriod",
        "streamModeDetails",
        "encryptionType",
        "enforceConsumerDeletion",
        "tags",
    ),
    create=_create,
    describe=_describe,
    gone=("ResourceNotFoundException",),
    outputs=lambda summary, ctx: {"arn": summary["StreamARN"]},
    observed=_observed,
    update=_update,
    delete=lambda kinesis, arn, state: kinesis.delete_stream(
        StreamName=str(state["name"]),
        EnforceConsumerDeletion=bool(state.get("enforceConsumerDeletion")),
    ),
    tagging=Tagging(
        "list_tags_for_stream",
        "add_tags_to_stream",
        "remove_tags_from_stream",
        key="StreamName",
        by="name",
        field="Tags",
        keys="TagKeys",  # tags go in as a map and come back as a list of Key/Value
    ),
    computed=("arn",),
)


def register(aws: Registry) -> None:
    """Add the Kinesis stream type."""
    aws.add(
        SHAPE.type(
            force_new={"name"},
            auto_name="name",
            auto_name_max=128,
            defaults={
                "retentionPeriod": DEFAULT_RETENTION_HOURS,
                "encryptionType": "NONE",
                "enforceConsumerDeletion": False,
            },
        )
    )
