"""EventBridge buses, rules and targets of the local cloud's aws provider (pulumi-aws's
`cloudwatch` module). Ids follow pulumi-aws: a bus's id is its name; a rule's its name, or
`<bus>/<name>` on a bus other than "default"; a target's `<rule>-<target id>`, or
`<bus>-<rule>-<target id>` on another bus."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, json_text

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

EVENT_BUS = "aws:cloudwatch/eventBus:EventBus"
EVENT_RULE = "aws:cloudwatch/eventRule:EventRule"
EVENT_TARGET = "aws:cloudwatch/eventTarget:EventTarget"
DEFAULT_BUS = "default"
_GONE = ("ResourceNotFoundException",)
_TAGGING = Tagging(
    "list_tags_for_resource",
    "tag_resource",
    "untag_resource",
    key="ResourceARN",
    field="Tags",
    keys="TagKeys",
    item=KEY_VALUE,
)


def _bus_create(events: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {"Name": str(inputs["name"])}
    if inputs.get("description"):
        kwargs["Description"] = str(inputs["description"])
    if input_tags(inputs):
        kwargs["Tags"] = _TAGGING.wire(input_tags(inputs))
    events.create_event_bus(**kwargs)
    return str(inputs["name"])


BUS = Shape(
    token=EVENT_BUS,
    service="events",
    inputs=("name", "description", "tags"),
    create=_bus_create,
    describe=lambda events, name, state: events.describe_event_bus(Name=name),
    gone=_GONE,
    outputs=lambda bus, ctx: {"arn": bus["Arn"]},
    observed=lambda bus, state: {"name": bus["Name"], "description": bus.get("Description", "")},
    # No update: moto 5.2.5 has no UpdateEventBus, so a new description makes a new bus.
    delete=lambda events, name, state: events.delete_event_bus(Name=name),
    tagging=_TAGGING,
    computed=("arn",),
)


def _rule_key(id: str) -> tuple[str, str]:
    bus, _, name = id.rpartition("/")
    return bus or DEFAULT_BUS, name


def _rule_put(events: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    bus = str(inputs.get("eventBusName") or DEFAULT_BUS)
    kwargs: dict[str, Any] = {"Name": str(inputs["name"]), "EventBusName": bus}
    for key, api in (
        ("eventPattern", "EventPattern"),
        ("scheduleExpression", "ScheduleExpression"),
        ("description", "Description"),
        ("roleArn", "RoleArn"),
    ):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    enabled = inputs.get("isEnabled", True) is not False
    kwargs["State"] = str(inputs.get("state") or ("ENABLED" if enabled else "DISABLED"))
    if ctx is not None and input_tags(inputs):
        kwargs["Tags"] = _TAGGING.wire(input_tags(inputs))
    events.put_rule(**kwargs)
    name = str(inputs["name"])
    return name if bus == DEFAULT_BUS else f"{bus}/{name}"


def _rule_describe(events: Any, id: str, state: Props) -> Answer:
    bus, name = _rule_key(id)
    return dict(events.describe_rule(Name=name, EventBusName=bus))


def _rule_observed(rule: Answer, state: Props) -> Props:
    return {
        "name": rule["Name"],
        "eventPattern": json_text(rule["EventPattern"], state.get("eventPattern"))
        if rule.get("EventPattern")
        else "",
        "scheduleExpression": rule.get("ScheduleExpression", ""),
        "description": rule.get("Description", ""),
        "roleArn": rule.get("RoleArn", ""),
        "state": rule.get("State"),
    }


RULE = Shape(
    token=EVENT_RULE,
    service="events",
    inputs=(
        "name",
        "namePrefix",
        "eventBusName",
        "eventPattern",
        "scheduleExpression",
        "description",
        "roleArn",
        "isEnabled",
        "state",
        "forceDestroy",
        "tags",
    ),
    create=_rule_put,
    describe=_rule_describe,
    gone=_GONE,
    outputs=lambda rule, ctx: {"arn": rule["Arn"]},
    observed=_rule_observed,
    update=lambda events, id, state, inputs, changed: _rule_put(events, inputs),
    delete=lambda events, id, state: events.delete_rule(
        Name=_rule_key(id)[1], EventBusName=_rule_key(id)[0], Force=bool(state.get("forceDestroy"))
    ),
    tagging=_TAGGING,
    computed=("arn",),
)


def _target(inputs: Props) -> dict[str, Any]:
    target: dict[str, Any] = {"Id": str(inputs["targetId"]), "Arn": str(inputs["arn"])}
    for key, api in (("input", "Input"), ("inputPath", "InputPath"), ("roleArn", "RoleArn")):
        if inputs.get(key):
            target[api] = str(inputs[key])
    return target


def _target_put(events: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    bus = str(inputs.get("eventBusName") or DEFAULT_BUS)
    rule = str(inputs["rule"])
    answer = events.put_targets(Rule=rule, EventBusName=bus, Targets=[_target(inputs)])
    if answer.get("FailedEntryCount"):
        failed = answer["FailedEntries"][0]
        raise RuntimeError(f"PutTargets: {failed.get('ErrorCode')}: {failed.get('ErrorMessage')}")
    prefix = "" if bus == DEFAULT_BUS else f"{bus}-"
    return f"{prefix}{rule}-{inputs['targetId']}"


def _target_describe(events: Any, id: str, state: Props) -> Answer | None:
    bus = str(state.get("eventBusName") or DEFAULT_BUS)
    listed = events.list_targets_by_rule(Rule=str(state["rule"]), EventBusName=bus)["Targets"]
    return next((dict(t) for t in listed if t["Id"] == state["targetId"]), None)


TARGET = Shape(
    token=EVENT_TARGET,
    service="events",
    inputs=(
        "rule",
        "arn",
        "targetId",
        "eventBusName",
        "input",
        "inputPath",
        "roleArn",
        "forceDestroy",
    ),
    create=_target_put,
    describe=_target_describe,
    gone=_GONE,
    outputs=lambda target, ctx: {},
    observed=lambda target, state: {
        "arn": target["Arn"],
        "targetId": target["Id"],
        "input": target.get("Input", ""),
        "inputPath": target.get("InputPath", ""),
        "roleArn": target.get("RoleArn", ""),
    },
    update=lambda events, id, state, inputs, changed: _target_put(events, inputs),
    delete=lambda events, id, state: events.remove_targets(
        Rule=str(state["rule"]),
        EventBusName=str(state.get("eventBusName") or DEFAULT_BUS),
        Ids=[str(state["targetId"])],
        Force=bool(state.get("forceDestroy")),
    ),
)


def register(aws: Registry) -> None:
    """Add the EventBridge bus, rule and target types."""
    aws.add(
        BUS.type(force_new={"name"}, auto_name="name", auto_name_max=256),
        RULE.type(
            force_new={"name", "namePrefix", "eventBusName"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=64,
            defaults={"eventBusName": DEFAULT_BUS, "forceDestroy": False},
        ),
        TARGET.type(
            force_new={"rule", "targetId", "eventBusName"},
            auto_name="targetId",
            auto_name_max=64,
            defaults={"eventBusName": DEFAULT_BUS, "forceDestroy": False},
        ),
    )
