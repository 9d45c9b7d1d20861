"""CloudWatch metric alarms of the local cloud's aws provider (id = the alarm's name, as in
pulumi-aws)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, same_members

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

METRIC_ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
# input -> PutMetricAlarm parameter (and DescribeAlarms field), with the type AWS keeps.
_FIELDS: dict[str, tuple[str, type]] = {
    "comparisonOperator": ("ComparisonOperator", str),
    "evaluationPeriods": ("EvaluationPeriods", int),
    "metricName": ("MetricName", str),
    "namespace": ("Namespace", str),
    "period": ("Period", int),
    "statistic": ("Statistic", str),
    "extendedStatistic": ("ExtendedStatistic", str),
    "threshold": ("Threshold", float),
    "alarmDescription": ("AlarmDescription", str),
    "datapointsToAlarm": ("DatapointsToAlarm", int),
    "treatMissingData": ("TreatMissingData", str),
    "unit": ("Unit", str),
    "actionsEnabled": ("ActionsEnabled", bool),
    "evaluateLowSampleCountPercentiles": ("EvaluateLowSampleCountPercentile", str),
}
_LISTS = {
    "alarmActions": "AlarmActions",
    "okActions": "OKActions",
    "insufficientDataActions": "InsufficientDataActions",
}
_TAGGING = Tagging(
    "list_tags_for_resource",
    "tag_resource",
    "untag_resource",
    key="ResourceARN",
    field="Tags",
    keys="TagKeys",
    item=KEY_VALUE,
)


def _put(cloudwatch: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    kwargs: dict[str, Any] = {"AlarmName": str(inputs["name"])}
    for key, (api, kind) in _FIELDS.items():
        if inputs.get(key) not in (None, ""):
            kwargs[api] = kind(inputs[key])
    for key, api in _LISTS.items():
        kwargs[api] = [str(a) for a in inputs.get(key) or []]
    if inputs.get("dimensions"):
        kwargs["Dimensions"] = [
            {"Name": str(k), "Value": str(v)} for k, v in inputs["dimensions"].items()
        ]
    if ctx is not None and input_tags(inputs):
        kwargs["Tags"] = _TAGGING.wire(input_tags(inputs))
    cloudwatch.put_metric_alarm(**kwargs)
    return str(inputs["name"])


def _describe(cloudwatch: Any, name: str, state: Props) -> Answer | None:
    alarms = cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    return dict(alarms[0]) if alarms else None


def _observed(alarm: Answer, state: Props) -> Props:
    observed: Props = {"name": alarm["AlarmName"]}
    for key, (api, kind) in _FIELDS.items():
        if api in alarm:
            observed[key] = kind(alarm[api])
    for key, api in _LISTS.items():
        observed[key] = same_members(list(alarm.get(api) or []), state.get(key))
    dimensions = {d["Name"]: d["Value"] for d in alarm.get("Dimensions") or []}
    if dimensions or state.get("dimensions"):
        observed["dimensions"] = dimensions
    return observed


SHAPE = Shape(
    token=METRIC_ALARM,
    service="cloudwatch",
    inputs=("name", *_FIELDS, *_LISTS, "dimensions", "tags"),
    create=_put,
    describe=_describe,
    outputs=lambda alarm, ctx: {"arn": alarm["AlarmArn"]},
    observed=_observed,
    update=lambda cloudwatch, name, state, inputs, changed: _put(cloudwatch, inputs),
    delete=lambda cloudwatch, name, state: cloudwatch.delete_alarms(AlarmNames=[name]),
    gone=("ResourceNotFound",),
    tagging=_TAGGING,
    computed=("arn",),
)


def register(aws: Registry) -> None:
    """Add the CloudWatch metric alarm type."""
    aws.add(
        SHAPE.type(
            force_new={"name"},
            auto_name="name",
            auto_name_max=255,
            defaults={"actionsEnabled": True, "treatMissingData": "missing"},
        )
    )
