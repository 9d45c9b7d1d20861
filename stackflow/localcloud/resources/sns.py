"""SNS topics and subscriptions of the local cloud's aws provider. Ids follow pulumi-aws: a
topic's id and a subscription's are their ARNs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, json_text

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

TOPIC = "aws:sns/topic:Topic"
SUBSCRIPTION = "aws:sns/topicSubscription:TopicSubscription"
_GONE = ("NotFound", "NotFoundException")
# input -> topic attribute (SNS keeps every attribute as text).
_TOPIC_ATTRIBUTES = {
    "displayName": "DisplayName",
    "policy": "Policy",
    "deliveryPolicy": "DeliveryPolicy",
    "kmsMasterKeyId": "KmsMasterKeyId",
    "fifoTopic": "FifoTopic",
    "contentBasedDeduplication": "ContentBasedDeduplication",
    "signatureVersion": "SignatureVersion",
    "tracingConfig": "TracingConfig",
}
_CREATE_ONLY = ("FifoTopic",)  # SetTopicAttributes refuses it
_DOCUMENTS = ("policy", "deliveryPolicy")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _topic_create(sns: Any, inputs: Props, ctx: CloudContext) -> str:
    attributes = {
        name: _text(inputs[key])
        for key, name in _TOPIC_ATTRIBUTES.items()
        if inputs.get(key) not in (None, "", False)
    }
    kwargs: dict[str, Any] = {"Name": str(inputs["name"]), "Attributes": attributes}
    if input_tags(inputs):
        kwargs["Tags"] = _TOPIC_TAGGING.wire(input_tags(inputs))
    return str(sns.create_topic(**kwargs)["TopicArn"])


def _topic_observed(attributes: Answer, state: Props) -> Props:
    observed: Props = {"name": str(attributes["TopicArn"]).rsplit(":", 1)[-1]}
    for key, name in _TOPIC_ATTRIBUTES.items():
        value = attributes.get(name)
        if key in _DOCUMENTS and value:
            observed[key] = json_text(value, state.get(key))
        elif key in ("fifoTopic", "contentBasedDeduplication"):
            observed[key] = str(value).lower() == "true"
        elif value is not None:
            observed[key] = value
    return observed


def _topic_update(sns: Any, arn: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    for key, name in _TOPIC_ATTRIBUTES.items():
        if key in changed and name not in _CREATE_ONLY:
            value = inputs.get(key)
            sns.set_topic_attributes(
                TopicArn=arn, AttributeName=name, AttributeValue=_text(value) if value else ""
            )


_TOPIC_TAGGING = Tagging(
    "list_tags_for_resource",
    "tag_resource",
    "untag_resource",
    key="ResourceArn",
    field="Tags",
    keys="TagKeys",
    item=KEY_VALUE,
)

TOPIC_SHAPE = Shape(
    token=TOPIC,
    service="sns",
    inputs=("name", "namePrefix", *_TOPIC_ATTRIBUTES, "tags"),
    create=_topic_create,
    describe=lambda sns, arn, state: sns.get_topic_attributes(TopicArn=arn)["Attributes"],
    gone=_GONE,
    outputs=lambda attributes, ctx: {
        "arn": attributes["TopicArn"],
        "owner": attributes.get("Owner", ""),
        "beginningArchiveTime": "",
    },
    observed=_topic_observed,
    update=_topic_update,
    delete=lambda sns, arn, state: sns.delete_topic(TopicArn=arn),
    tagging=_TOPIC_TAGGING,
    computed=("arn", "owner", "beginningArchiveTime"),
)

# input -> subscription attribute, for those that can change in place.
_SUBSCRIPTION_ATTRIBUTES = {
    "filterPolicy": "FilterPolicy",
    "filterPolicyScope": "FilterPolicyScope",
    "rawMessageDelivery": "RawMessageDelivery",
    "redrivePolicy": "RedrivePolicy",
    "deliveryPolicy": "DeliveryPolicy",
    "subscriptionRoleArn": "SubscriptionRoleArn",
}


def _subscribe(sns: Any, inputs: Props, ctx: CloudContext) -> str:
    attributes = {
        name: _text(inputs[key])
        for key, name in _SUBSCRIPTION_ATTRIBUTES.items()
        if inputs.get(key) not in (None, "", False)
    }
    answer = sns.subscribe(
        TopicArn=str(inputs["topic"]),
        Protocol=str(inputs["protocol"]),
        Endpoint=str(inputs["endpoint"]),
        Attributes=attributes,
        ReturnSubscriptionArn=True,
    )
    return str(answer["SubscriptionArn"])


def _subscription_observed(attributes: Answer, state: Props) -> Props:
    observed: Props = {
        "topic": attributes.get("TopicArn"),
        "protocol": attributes.get("Protocol"),
        "endpoint": attributes.get("Endpoint"),
        "rawMessageDelivery": str(attributes.get("RawMessageDelivery")).lower() == "true",
    }
    for key in ("filterPolicy", "redrivePolicy", "deliveryPolicy"):
        value = attributes.get(_SUBSCRIPTION_ATTRIBUTES[key])
        observed[key] = json_text(value, state.get(key)) if value else ""
    return observed


def _subscription_update(
    sns: Any, arn: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    for key, name in _SUBSCRIPTION_ATTRIBUTES.items():
        if key in changed:
            value = inputs.get(key)
            sns.set_subscription_attributes(
                SubscriptionArn=arn,
                AttributeName=name,
                AttributeValue=_text(value) if value not in (None, "") else "",
            )


SUBSCRIPTION_SHAPE = Shape(
    token=SUBSCRIPTION,
    service="sns",
    inputs=(
        "topic",
        "protocol",
        "endpoint",
        "endpointAutoConfirms",
        "confirmationTimeoutInMinutes",
        *_SUBSCRIPTION_ATTRIBUTES,
    ),
    create=_subscribe,
    describe=lambda sns, arn, state: sns.get_subscription_attributes(SubscriptionArn=arn)[
        "Attributes"
    ],
    gone=_GONE,
    outputs=lambda attributes, ctx: {
        "arn": attributes["SubscriptionArn"],
        "ownerId": attributes.get("Owner", ""),
        "confirmationWasAuthenticated": str(attributes.get("ConfirmationWasAuthenticated")).lower()
        == "true",
        "pendingConfirmation": str(attributes.get("PendingConfirmation")).lower() == "true",
    },
    observed=_subscription_observed,
    update=_subscription_update,
    delete=lambda sns, arn, state: sns.unsubscribe(SubscriptionArn=arn),
    computed=("arn", "ownerId", "confirmationWasAuthenticated", "pendingConfirmation"),
)


def register(aws: Registry) -> None:
    """Add the SNS topic and subscription types."""
    aws.add(
        TOPIC_SHAPE.type(
            force_new={"name", "namePrefix", "fifoTopic"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=256,
            defaults={"fifoTopic": False, "contentBasedDeduplication": False},
        ),
        SUBSCRIPTION_SHAPE.type(
            force_new={"topic", "protocol", "endpoint"},
            defaults={
                "rawMessageDelivery": False,
                "endpointAutoConfirms": False,
                "confirmationTimeoutInMinutes": 1,
            },
        ),
    )
