"""Target groups of the local cloud's aws provider (id = the target group's ARN, as in
pulumi-aws), with their health check and attributes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape
from stackflow.localcloud.resources._elb_common import ELB_TAGGING, Attributed

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

TARGET_GROUP = "aws:lb/targetGroup:TargetGroup"

# pulumi-aws inputs that are target group attributes: wire name -> (key, type).
_TG_ATTRIBUTES = {
    "deregistrationDelay": ("deregistration_delay.timeout_seconds", int),
    "slowStart": ("slow_start.duration_seconds", int),
    "loadBalancingAlgorithmType": ("load_balancing.algorithm.type", str),
    "loadBalancingCrossZoneEnabled": ("load_balancing.cross_zone.enabled", str),
    "proxyProtocolV2": ("proxy_protocol_v2.enabled", bool),
    "preserveClientIp": ("preserve_client_ip.enabled", str),
    "connectionTermination": ("deregistration_delay.connection_termination.enabled", bool),
}
# The target group's healthCheck block: wire key -> (API parameter / field, type).
_HEALTH_CHECK: dict[str, tuple[str, type]] = {
    "enabled": ("HealthCheckEnabled", bool),
    "path": ("HealthCheckPath", str),
    "port": ("HealthCheckPort", str),
    "protocol": ("HealthCheckProtocol", str),
    "interval": ("HealthCheckIntervalSeconds", int),
    "timeout": ("HealthCheckTimeoutSeconds", int),
    "healthyThreshold": ("HealthyThresholdCount", int),
    "unhealthyThreshold": ("UnhealthyThresholdCount", int),
}
_GROUP = Attributed("target_group", "TargetGroups", "TargetGroupArn", _TG_ATTRIBUTES)
_TG_INPUTS = {
    "name",
    "namePrefix",
    "port",
    "protocol",
    "protocolVersion",
    "vpcId",
    "targetType",
    "ipAddressType",
    "healthCheck",
    "tags",
    *_TG_ATTRIBUTES,
}


def _health_check_params(check: Mapping[str, Any], protocol_version: Any) -> dict[str, Any]:
    unserved = sorted(set(check) - set(_HEALTH_CHECK) - {"matcher"})
    if unserved:
        raise NotImplementedError(
            f"the local cloud's aws provider does not serve healthCheck.{', '.join(unserved)} "
            f"of {TARGET_GROUP} yet; served: {', '.join(sorted({*_HEALTH_CHECK, 'matcher'}))}"
        )
    params = {api: kind(check[key]) for key, (api, kind) in _HEALTH_CHECK.items() if key in check}
    if check.get("matcher"):
        code = "GrpcCode" if protocol_version == "GRPC" else "HttpCode"
        params["Matcher"] = {code: str(check["matcher"])}
    return params


def _observed_health_check(group: Mapping[str, Any]) -> Props:
    check = {key: group.get(api) for key, (api, _) in _HEALTH_CHECK.items()}
    matcher = group.get("Matcher") or {}
    check["matcher"] = matcher.get("HttpCode") or matcher.get("GrpcCode")
    return {k: v for k, v in check.items() if v is not None}


def _tg_outputs(group: Answer, ctx: CloudContext) -> Props:
    arn = str(group["TargetGroupArn"])
    return {"arn": arn, "arnSuffix": "targetgroup/" + arn.split(":targetgroup/", 1)[-1]}


def _tg_create(elbv2: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {"Name": inputs["name"]}
    for key, api in (
        ("protocol", "Protocol"),
        ("protocolVersion", "ProtocolVersion"),
        ("vpcId", "VpcId"),
        ("targetType", "TargetType"),
        ("ipAddressType", "IpAddressType"),
    ):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    if inputs.get("port") is not None:
        kwargs["Port"] = int(inputs["port"])
    if inputs.get("healthCheck"):
        kwargs.update(_health_check_params(inputs["healthCheck"], inputs.get("protocolVersion")))
    return _GROUP.create(elbv2, kwargs, inputs)


def _tg_observed(group: Answer, state: Props) -> Props:
    return {
        "name": group.get("TargetGroupName"),
        "port": group.get("Port"),
        "protocol": group.get("Protocol"),
        "protocolVersion": group.get("ProtocolVersion"),
        "vpcId": group.get("VpcId"),
        "targetType": group.get("TargetType"),
        "ipAddressType": group.get("IpAddressType"),
        "healthCheck": _observed_health_check(group),
        **_GROUP.observed(group),
    }


def _tg_update(elbv2: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    if "healthCheck" in changed and inputs.get("healthCheck"):
        elbv2.modify_target_group(
            TargetGroupArn=id,
            **_health_check_params(inputs["healthCheck"], inputs.get("protocolVersion")),
        )
    _GROUP.set_attributes(elbv2, id, inputs, changed)


TARGET_GROUP_SHAPE = Shape(
    token=TARGET_GROUP,
    service="elbv2",
    inputs=_TG_INPUTS,
    create=_tg_create,
    describe=lambda elbv2, id, state: _GROUP.describe(elbv2, id),
    gone=("TargetGroupNotFound",),
    outputs=_tg_outputs,
    observed=_tg_observed,
    update=_tg_update,
    delete=lambda elbv2, id, state: elbv2.delete_target_group(TargetGroupArn=id),
    tagging=ELB_TAGGING,
    computed=("arn", "arnSuffix"),
)


def register(aws: Registry) -> None:
    """Add the target group type to the aws registry."""
    aws.add(
        TARGET_GROUP_SHAPE.type(
            # Every input but the health check, the attributes and the tags replaces.
            force_new=_TG_INPUTS - {"healthCheck", "tags", *_TG_ATTRIBUTES},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=32,
        )
    )
