"""Application load balancers, target groups and listeners of the local cloud's aws provider.

Ids are ARNs, as in pulumi-aws. A load balancer's `dnsName` is the loopback address the cloud
server's data plane allocated for it on CreateLoadBalancer (where the app's stand-in listens),
in create and read alike; against bare moto (no cloud server around it) it is moto's own name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.errors import ControlApiError, LoadBalancerNotServed
from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    kept,
    observe,
    refuse_unserved,
    same_members,
    tag_changes,
    tag_outputs,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

LOAD_BALANCER = "aws:lb/loadBalancer:LoadBalancer"
TARGET_GROUP = "aws:lb/targetGroup:TargetGroup"
LISTENER = "aws:lb/listener:Listener"

DATAPLANE_WAIT_S = 5.0


# pulumi-aws inputs that are load balancer / target group attributes: wire name -> (key, type).
_LB_ATTRIBUTES: dict[str, tuple[str, type]] = {
    "dropInvalidHeaderFields": ("routing.http.drop_invalid_header_fields.enabled", bool),
    "idleTimeout": ("idle_timeout.timeout_seconds", int),
    "enableDeletionProtection": ("deletion_protection.enabled", bool),
    "enableHttp2": ("routing.http2.enabled", bool),
    "enableCrossZoneLoadBalancing": ("load_balancing.cross_zone.enabled", bool),
    "desyncMitigationMode": ("routing.http.desync_mitigation_mode", str),
    "preserveHostHeader": ("routing.http.preserve_host_header.enabled", bool),
    "xffHeaderProcessingMode": ("routing.http.xff_header_processing.mode", str),
    "enableWafFailOpen": ("waf.fail_open.enabled", bool),
    "enableTlsVersionAndCipherSuiteHeaders": (
        "routing.http.x_amzn_tls_version_and_cipher_suite.enabled",
        bool,
    ),
    "enableXffClientPort": ("routing.http.xff_client_port.enabled", bool),
    "clientKeepAlive": ("client_keep_alive.seconds", int),
    "enableZonalShift": ("zonal_shift.config.enabled", bool),
    "dnsRecordClientRoutingPolicy": ("dns_record.client_routing_policy", str),
}
_TG_ATTRIBUTES: dict[str, tuple[str, type]] = {
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


def _to_attribute(kind: type, value: Any) -> str:
    if kind is bool:
        return "true" if value else "false"
    return str(int(value)) if kind is int else str(value)


def _from_attribute(kind: type, text: str) -> Any:
    if kind is bool:
        return text.lower() == "true"
    return int(text) if kind is int else text


def _attributes(
    table: Mapping[str, tuple[str, type]], inputs: Mapping[str, Any], only: frozenset[str] | None
) -> list[dict[str, str]]:
    return [
        {"Key": key, "Value": _to_attribute(kind, inputs[wire])}
        for wire, (key, kind) in table.items()
        if inputs.get(wire) is not None and (only is None or wire in only)
    ]


def _observed_attributes(
    table: Mapping[str, tuple[str, type]], items: list[Mapping[str, str]]
) -> Props:
    by_key = {str(item["Key"]): str(item["Value"]) for item in items}
    return {
        wire: _from_attribute(kind, by_key[key])
        for wire, (key, kind) in table.items()
        if key in by_key and by_key[key] != ""
    }


def _tags(ctx: CloudContext, arn: str) -> dict[str, str]:
    found = ctx.client("elbv2").describe_tags(ResourceArns=[arn])["TagDescriptions"]
    return tags_of(found[0].get("Tags")) if found else {}


def _retag(ctx: CloudContext, arn: str, inputs: Props) -> None:
    upsert, remove = tag_changes(_tags(ctx, arn), inputs)
    elbv2 = ctx.client("elbv2")
    if remove:
        elbv2.remove_tags(ResourceArns=[arn], TagKeys=remove)
    if upsert:
        elbv2.add_tags(ResourceArns=[arn], Tags=tag_list(upsert))


def _gone(exc: ClientError, *codes: str) -> bool:
    return error_code(exc) in codes


# --- load balancer --------------------------------------------------------------------------

_LB_INPUTS = {
    "name",
    "namePrefix",
    "loadBalancerType",
    "internal",
    "subnets",
    "securityGroups",
    "ipAddressType",
    "tags",
    *_LB_ATTRIBUTES,
}
_LB_COMPUTED = ("arn", "arnSuffix", "dnsName", "zoneId", "vpcId")


def _dns_name(ctx: CloudContext, balancer: Mapping[str, Any]) -> str:
    """Where the data plane serves this load balancer: its loopback host."""
    name = str(balancer["LoadBalancerName"])
    deadline = time.monotonic() + DATAPLANE_WAIT_S
    while True:
        try:
            served = ctx.dataplane()
        except ControlApiError:
            # Bare moto (no cloud server around it, as in unit tests): moto's own DNS name.
            return str(balancer["DNSName"])
        if not isinstance(served, Mapping):
            return str(balancer["DNSName"])
        entry = (served.get("load_balancers") or {}).get(name)
        if entry and entry.get("host"):
            return str(entry["host"])
        if time.monotonic() >= deadline:
            raise LoadBalancerNotServed(
                f"load balancer {name!r} exists in the local cloud, but its data plane "
                f"(GET {ctx.endpoint}/_stackflow/dataplane) lists no address for it; it serves: "
                f"{', '.join(sorted(served.get('load_balancers') or {})) or 'none'}"
            )
        time.sleep(0.2)  # the data plane allocates the address right after CreateLoadBalancer


def _lb_outputs(ctx: CloudContext, balancer: Mapping[str, Any]) -> Props:
    arn = str(balancer["LoadBalancerArn"])
    return {
        "arn": arn,
        "arnSuffix": arn.split(":loadbalancer/", 1)[-1],
        "dnsName": _dns_name(ctx, balancer),
        "zoneId": balancer.get("CanonicalHostedZoneId"),
        "vpcId": balancer.get("VpcId"),
    }


def _lb_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, LOAD_BALANCER, inputs, _LB_INPUTS)
    kwargs: dict[str, Any] = {
        "Name": inputs["name"],
        "Type": inputs.get("loadBalancerType") or "application",
        "Scheme": "internal" if inputs.get("internal") else "internet-facing",
    }
    if inputs.get("subnets"):
        kwargs["Subnets"] = list(inputs["subnets"])
    if inputs.get("securityGroups"):
        kwargs["SecurityGroups"] = list(inputs["securityGroups"])
    if inputs.get("ipAddressType"):
        kwargs["IpAddressType"] = inputs["ipAddressType"]
    tags = input_tags(inputs)
    if tags:
        kwargs["Tags"] = tag_list(tags)
    elbv2 = ctx.client("elbv2")
    balancer = elbv2.create_load_balancer(**kwargs)["LoadBalancers"][0]
    attributes = _attributes(_LB_ATTRIBUTES, inputs, None)
    if attributes:
        elbv2.modify_load_balancer_attributes(
            LoadBalancerArn=balancer["LoadBalancerArn"], Attributes=attributes
        )
    return str(balancer["LoadBalancerArn"]), {**_lb_outputs(ctx, balancer), "tagsAll": tags}


def _lb_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    elbv2 = ctx.client("elbv2")
    try:
        balancer = elbv2.describe_load_balancers(LoadBalancerArns=[id])["LoadBalancers"][0]
    except ClientError as exc:
        if _gone(exc, "LoadBalancerNotFound"):
            return None
        raise
    attributes = elbv2.describe_load_balancer_attributes(LoadBalancerArn=id)["Attributes"]
    observed: Props = {
        "name": balancer.get("LoadBalancerName"),
        "loadBalancerType": balancer.get("Type"),
        "internal": balancer.get("Scheme") == "internal",
        "subnets": same_members(
            [zone["SubnetId"] for zone in balancer.get("AvailabilityZones", [])],
            state.get("subnets"),
        ),
        "securityGroups": same_members(
            list(balancer.get("SecurityGroups", [])), state.get("securityGroups")
        ),
        "ipAddressType": balancer.get("IpAddressType"),
        **_observed_attributes(_LB_ATTRIBUTES, attributes),
    }
    return {
        **observe(state, observed),
        **_lb_outputs(ctx, balancer),
        **tag_outputs(state, _tags(ctx, id)),
    }


def _lb_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, LOAD_BALANCER, inputs, _LB_INPUTS)
    elbv2 = ctx.client("elbv2")
    if "securityGroups" in changed:
        elbv2.set_security_groups(
            LoadBalancerArn=id, SecurityGroups=list(inputs.get("securityGroups") or [])
        )
    if "subnets" in changed and inputs.get("subnets"):
        elbv2.set_subnets(LoadBalancerArn=id, Subnets=list(inputs["subnets"]))
    if "ipAddressType" in changed and inputs.get("ipAddressType"):
        elbv2.set_ip_address_type(LoadBalancerArn=id, IpAddressType=inputs["ipAddressType"])
    attributes = _attributes(_LB_ATTRIBUTES, inputs, changed)
    if attributes:
        elbv2.modify_load_balancer_attributes(LoadBalancerArn=id, Attributes=attributes)
    _retag(ctx, id, inputs)
    return {**kept(state, _LB_COMPUTED), "tagsAll": input_tags(inputs)}


def _lb_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        ctx.client("elbv2").delete_load_balancer(LoadBalancerArn=id)
    except ClientError as exc:
        if not _gone(exc, "LoadBalancerNotFound"):
            raise


# --- target group ---------------------------------------------------------------------------

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


def _tg_outputs(group: Mapping[str, Any]) -> Props:
    arn = str(group["TargetGroupArn"])
    return {"arn": arn, "arnSuffix": "targetgroup/" + arn.split(":targetgroup/", 1)[-1]}


def _tg_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, TARGET_GROUP, inputs, _TG_INPUTS)
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
    tags = input_tags(inputs)
    if tags:
        kwargs["Tags"] = tag_list(tags)
    elbv2 = ctx.client("elbv2")
    group = elbv2.create_target_group(**kwargs)["TargetGroups"][0]
    attributes = _attributes(_TG_ATTRIBUTES, inputs, None)
    if attributes:
        elbv2.modify_target_group_attributes(
            TargetGroupArn=group["TargetGroupArn"], Attributes=attributes
        )
    return str(group["TargetGroupArn"]), {**_tg_outputs(group), "tagsAll": tags}


def _tg_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    elbv2 = ctx.client("elbv2")
    try:
        group = elbv2.describe_target_groups(TargetGroupArns=[id])["TargetGroups"][0]
    except ClientError as exc:
        if _gone(exc, "TargetGroupNotFound"):
            return None
        raise
    attributes = elbv2.describe_target_group_attributes(TargetGroupArn=id)["Attributes"]
    observed: Props = {
        "name": group.get("TargetGroupName"),
        "port": group.get("Port"),
        "protocol": group.get("Protocol"),
        "protocolVersion": group.get("ProtocolVersion"),
        "vpcId": group.get("VpcId"),
        "targetType": group.get("TargetType"),
        "ipAddressType": group.get("IpAddressType"),
        "healthCheck": _observed_health_check(group),
        **_observed_attributes(_TG_ATTRIBUTES, attributes),
    }
    return {
        **observe(state, observed),
        **_tg_outputs(group),
        **tag_outputs(state, _tags(ctx, id)),
    }


def _tg_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, TARGET_GROUP, inputs, _TG_INPUTS)
    elbv2 = ctx.client("elbv2")
    if "healthCheck" in changed and inputs.get("healthCheck"):
        elbv2.modify_target_group(
            TargetGroupArn=id,
            **_health_check_params(inputs["healthCheck"], inputs.get("protocolVersion")),
        )
    attributes = _attributes(_TG_ATTRIBUTES, inputs, changed)
    if attributes:
        elbv2.modify_target_group_attributes(TargetGroupArn=id, Attributes=attributes)
    _retag(ctx, id, inputs)
    return {**kept(state, ("arn", "arnSuffix")), "tagsAll": input_tags(inputs)}


def _tg_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        ctx.client("elbv2").delete_target_group(TargetGroupArn=id)
    except ClientError as exc:
        if not _gone(exc, "TargetGroupNotFound"):
            raise


# --- listener -------------------------------------------------------------------------------

_LISTENER_INPUTS = {
    "loadBalancerArn",
    "port",
    "protocol",
    "defaultActions",
    "sslPolicy",
    "certificateArn",
    "alpnPolicy",
    "tags",
}
# defaultActions[] blocks: wire key -> API field.
_FIXED_RESPONSE = {
    "contentType": "ContentType",
    "messageBody": "MessageBody",
    "statusCode": "StatusCode",
}
_REDIRECT = {
    "host": "Host",
    "path": "Path",
    "port": "Port",
    "protocol": "Protocol",
    "query": "Query",
    "statusCode": "StatusCode",
}
_ACTION_KEYS = {"type", "targetGroupArn", "order", "fixedResponse", "redirect"}


def _action_params(action: Mapping[str, Any]) -> dict[str, Any]:
    unserved = sorted(k for k, v in action.items() if k not in _ACTION_KEYS and v is not None)
    if unserved:
        raise NotImplementedError(
            f"the local cloud's aws provider does not serve defaultActions[].{', '.join(unserved)}"
            f" of {LISTENER} yet; served: {', '.join(sorted(_ACTION_KEYS))}"
        )
    params: dict[str, Any] = {"Type": str(action["type"])}
    if action.get("targetGroupArn"):
        params["TargetGroupArn"] = str(action["targetGroupArn"])
    if action.get("order") is not None:
        params["Order"] = int(action["order"])
    for key, api, table in (
        ("fixedResponse", "FixedResponseConfig", _FIXED_RESPONSE),
        ("redirect", "RedirectConfig", _REDIRECT),
    ):
        block = action.get(key)
        if block:
            params[api] = {table[k]: str(v) for k, v in block.items() if v is not None}
    return params


def _observed_action(action: Mapping[str, Any]) -> Props:
    out: Props = {"type": action.get("Type")}
    if action.get("TargetGroupArn"):
        out["targetGroupArn"] = action["TargetGroupArn"]
    if action.get("Order") is not None:
        out["order"] = action["Order"]
    for key, api, table in (
        ("fixedResponse", "FixedResponseConfig", _FIXED_RESPONSE),
        ("redirect", "RedirectConfig", _REDIRECT),
    ):
        block = action.get(api)
        if block:
            out[key] = {k: block[a] for k, a in table.items() if a in block}
    return out


def _listener_params(inputs: Props, changed: frozenset[str] | None) -> dict[str, Any]:
    def wanted(key: str) -> bool:
        return inputs.get(key) is not None and (changed is None or key in changed)

    params: dict[str, Any] = {}
    if wanted("port"):
        params["Port"] = int(inputs["port"])
    if wanted("protocol"):
        params["Protocol"] = str(inputs["protocol"])
    if wanted("sslPolicy"):
        params["SslPolicy"] = str(inputs["sslPolicy"])
    if wanted("certificateArn"):
        params["Certificates"] = [{"CertificateArn": str(inputs["certificateArn"])}]
    if wanted("alpnPolicy"):
        params["AlpnPolicy"] = [str(inputs["alpnPolicy"])]
    if wanted("defaultActions"):
        params["DefaultActions"] = [_action_params(a) for a in inputs["defaultActions"]]
    return params


def _default_protocol(load_balancer_arn: str) -> str | None:
    """pulumi-aws's listener protocol when the program gives none: HTTP for an application load
    balancer (its ARN says loadbalancer/app/), none for the others (AWS decides or refuses)."""
    return "HTTP" if ":loadbalancer/app/" in load_balancer_arn else None


def _listener_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, LISTENER, inputs, _LISTENER_INPUTS)
    tags = input_tags(inputs)
    computed: Props = {}
    protocol = inputs.get("protocol") or _default_protocol(str(inputs["loadBalancerArn"]))
    if protocol and not inputs.get("protocol"):
        computed["protocol"] = protocol
    kwargs = {
        "LoadBalancerArn": inputs["loadBalancerArn"],
        **_listener_params({**inputs, **computed}, None),
    }
    if tags:
        kwargs["Tags"] = tag_list(tags)
    listener = ctx.client("elbv2").create_listener(**kwargs)["Listeners"][0]
    return str(listener["ListenerArn"]), {
        "arn": listener["ListenerArn"],
        "tagsAll": tags,
        **computed,
    }


def _listener_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        listener = ctx.client("elbv2").describe_listeners(ListenerArns=[id])["Listeners"][0]
    except ClientError as exc:
        if _gone(exc, "ListenerNotFound", "LoadBalancerNotFound"):
            return None
        raise
    certificates = listener.get("Certificates") or []
    alpn = listener.get("AlpnPolicy") or []
    observed: Props = {
        "loadBalancerArn": listener.get("LoadBalancerArn"),
        "port": listener.get("Port"),
        "protocol": listener.get("Protocol"),
        "sslPolicy": listener.get("SslPolicy"),
        "certificateArn": certificates[0].get("CertificateArn") if certificates else None,
        "alpnPolicy": alpn[0] if alpn else None,
        "defaultActions": [_observed_action(a) for a in listener.get("DefaultActions", [])],
    }
    return {
        **observe(state, observed),
        "arn": listener["ListenerArn"],
        **tag_outputs(state, _tags(ctx, id)),
    }


def _listener_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, LISTENER, inputs, _LISTENER_INPUTS)
    params = _listener_params(inputs, changed)
    if params:
        ctx.client("elbv2").modify_listener(ListenerArn=id, **params)
    _retag(ctx, id, inputs)
    computed: Props = {"arn": state.get("arn", id), "tagsAll": input_tags(inputs)}
    if not inputs.get("protocol") and state.get("protocol"):
        computed["protocol"] = state["protocol"]  # the default it was created with stays
    return computed


def _listener_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        ctx.client("elbv2").delete_listener(ListenerArn=id)
    except ClientError as exc:
        if not _gone(exc, "ListenerNotFound"):
            raise


def register(aws: Registry) -> None:
    """Add the load balancer, target group and listener types to the aws registry."""
    aws.add(
        ResourceType(
            token=LOAD_BALANCER,
            create=_lb_create,
            read=_lb_read,
            update=_lb_update,
            delete=_lb_delete,
            force_new=frozenset(
                {
                    "name",
                    "namePrefix",
                    "internal",
                    "loadBalancerType",
                    "customerOwnedIpv4Pool",
                    "region",
                }
            ),
            computed=(*_LB_COMPUTED, "tagsAll"),
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=32,
            drift_inputs=frozenset({"tags"}),
        ),
        ResourceType(
            token=TARGET_GROUP,
            create=_tg_create,
            read=_tg_read,
            update=_tg_update,
            delete=_tg_delete,
            force_new=frozenset(
                {
                    "name",
                    "namePrefix",
                    "port",
                    "protocol",
                    "protocolVersion",
                    "vpcId",
                    "targetType",
                    "ipAddressType",
                    "region",
                }
            ),
            computed=("arn", "arnSuffix", "tagsAll"),
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=32,
            drift_inputs=frozenset({"tags"}),
        ),
        ResourceType(
            token=LISTENER,
            create=_listener_create,
            read=_listener_read,
            update=_listener_update,
            delete=_listener_delete,
            force_new=frozenset({"loadBalancerArn", "region"}),
            computed=("arn", "protocol", "tagsAll"),
            drift_inputs=frozenset({"tags"}),
        ),
    )
