"""SQS queues and queue policies of the local cloud's aws provider. Ids follow pulumi-aws: a
queue's id is its URL, a queue policy's the queue's URL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, json_text

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

QUEUE = "aws:sqs/queue:Queue"
QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
_GONE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
# input -> SQS attribute, for the attributes kept as numbers, flags and documents.
_NUMBERS = {
    "delaySeconds": "DelaySeconds",
    "maxMessageSize": "MaximumMessageSize",
    "messageRetentionSeconds": "MessageRetentionPeriod",
    "receiveWaitTimeSeconds": "ReceiveMessageWaitTimeSeconds",
    "visibilityTimeoutSeconds": "VisibilityTimeout",
    "kmsDataKeyReusePeriodSeconds": "KmsDataKeyReusePeriodSeconds",
}
_FLAGS = {
    "fifoQueue": "FifoQueue",
    "contentBasedDeduplication": "ContentBasedDeduplication",
    "sqsManagedSseEnabled": "SqsManagedSseEnabled",
}
_TEXTS = {
    "kmsMasterKeyId": "KmsMasterKeyId",
    "deduplicationScope": "DeduplicationScope",
    "fifoThroughputLimit": "FifoThroughputLimit",
}
_DOCUMENTS = {
    "policy": "Policy",
    "redrivePolicy": "RedrivePolicy",
    "redriveAllowPolicy": "RedriveAllowPolicy",
}


def _attributes(inputs: Props, keys: frozenset[str] | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, name in {**_NUMBERS, **_TEXTS, **_DOCUMENTS}.items():
        if inputs.get(key) not in (None, "") and (keys is None or key in keys):
            value = inputs[key]
            out[name] = str(int(value)) if key in _NUMBERS else str(value)
    for key, name in _FLAGS.items():
        if (keys is None and inputs.get(key)) or (keys is not None and key in keys):
            out[name] = "true" if inputs.get(key) else "false"
    return out


def _create(sqs: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {"QueueName": str(inputs["name"]), "Attributes": _attributes(inputs)}
    if input_tags(inputs):
        kwargs["tags"] = input_tags(inputs)
    return str(sqs.create_queue(**kwargs)["QueueUrl"])


def _describe(sqs: Any, url: str, state: Props) -> Answer:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return {**attributes, "QueueUrl": url}


def _observed(attributes: Answer, state: Props) -> Props:
    observed: Props = {"name": str(attributes["QueueArn"]).rsplit(":", 1)[-1]}
    for key, name in _NUMBERS.items():
        if name in attributes:
            observed[key] = int(attributes[name])
    for key, name in _FLAGS.items():
        observed[key] = str(attributes.get(name, "false")).lower() == "true"
    for key, name in _DOCUMENTS.items():
        observed[key] = json_text(attributes[name], state.get(key)) if name in attributes else ""
    return observed


QUEUE_SHAPE = Shape(
    token=QUEUE,
    service="sqs",
    inputs=(
        "name",
        "namePrefix",
        *_NUMBERS,
        *_FLAGS,
        *_TEXTS,
        *_DOCUMENTS,
        "tags",
    ),
    create=_create,
    describe=_describe,
    gone=_GONE,
    outputs=lambda attributes, ctx: {"arn": attributes["QueueArn"], "url": attributes["QueueUrl"]},
    observed=_observed,
    update=lambda sqs, url, state, inputs, changed: sqs.set_queue_attributes(
        QueueUrl=url, Attributes=_attributes(inputs, changed)
    ),
    delete=lambda sqs, url, state: sqs.delete_queue(QueueUrl=url),
    tagging=Tagging(
        "list_queue_tags",
        "tag_queue",
        "untag_queue",
        key="QueueUrl",
        by="id",
        field="Tags",
        keys="TagKeys",
    ),
    computed=("arn", "url"),
)


def _policy_set(sqs: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    url = str(inputs["queueUrl"])
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": str(inputs["policy"])})
    return url


def _policy_describe(sqs: Any, url: str, state: Props) -> Answer | None:
    answer = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
    policy = answer.get("Attributes", {}).get("Policy")
    return {"Policy": policy, "QueueUrl": url} if policy else None


POLICY_SHAPE = Shape(
    token=QUEUE_POLICY,
    service="sqs",
    inputs=("queueUrl", "policy"),
    create=_policy_set,
    describe=_policy_describe,
    gone=_GONE,
    outputs=lambda found, ctx: {},
    observed=lambda found, state: {
        "queueUrl": found["QueueUrl"],
        "policy": json_text(found["Policy"], state.get("policy")),
    },
    update=lambda sqs, url, state, inputs, changed: _policy_set(sqs, inputs),
    delete=lambda sqs, url, state: sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"Policy": ""}
    ),
)


def register(aws: Registry) -> None:
    """Add the SQS queue and queue policy types."""
    aws.add(
        QUEUE_SHAPE.type(
            force_new={"name", "namePrefix", "fifoQueue"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=80,
            defaults={
                "delaySeconds": 0,
                "maxMessageSize": 262144,
                "messageRetentionSeconds": 345600,
                "receiveWaitTimeSeconds": 0,
                "visibilityTimeoutSeconds": 30,
                "fifoQueue": False,
                "contentBasedDeduplication": False,
            },
        ),
        POLICY_SHAPE.type(force_new={"queueUrl"}),
    )
