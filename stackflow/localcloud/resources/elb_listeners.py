"""Listeners of the local cloud's aws provider (id = the listener's ARN, as in pulumi-aws) with
their default actions: forward to a target group, a fixed response, a redirect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape
from stackflow.localcloud.resources._elb_common import ELB_TAGGING
from stackflow.localcloud.resources._shared import input_tags

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

LISTENER = "aws:lb/listener:Listener"

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


def _listener_create(elbv2: Any, inputs: Props, ctx: CloudContext) -> str:
    protocol = inputs.get("protocol") or _default_protocol(str(inputs["loadBalancerArn"]))
    kwargs = {
        "LoadBalancerArn": inputs["loadBalancerArn"],
        **_listener_params({**inputs, "protocol": protocol}, None),
    }
    if input_tags(inputs):
        kwargs["Tags"] = ELB_TAGGING.wire(input_tags(inputs))
    return str(elbv2.create_listener(**kwargs)["Listeners"][0]["ListenerArn"])


def _listener_outputs(listener: Answer, ctx: CloudContext) -> Props:
    # The protocol is an output too: the default it was created with when the program gives none.
    protocol = {"protocol": listener["Protocol"]} if listener.get("Protocol") else {}
    return {"arn": listener["ListenerArn"], **protocol}


def _listener_observed(listener: Answer, state: Props) -> Props:
    certificates = listener.get("Certificates") or []
    alpn = listener.get("AlpnPolicy") or []
    return {
        "loadBalancerArn": listener.get("LoadBalancerArn"),
        "port": listener.get("Port"),
        "sslPolicy": listener.get("SslPolicy"),
        "certificateArn": certificates[0].get("CertificateArn") if certificates else None,
        "alpnPolicy": alpn[0] if alpn else None,
        "defaultActions": [_observed_action(a) for a in listener.get("DefaultActions", [])],
    }


def _listener_update(
    elbv2: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    params = _listener_params(inputs, changed)
    if params:
        elbv2.modify_listener(ListenerArn=id, **params)


LISTENER_SHAPE = Shape(
    token=LISTENER,
    service="elbv2",
    inputs=_LISTENER_INPUTS,
    create=_listener_create,
    describe=lambda elbv2, id, state: elbv2.describe_listeners(ListenerArns=[id])["Listeners"][0],
    gone=("ListenerNotFound", "LoadBalancerNotFound"),
    outputs=_listener_outputs,
    observed=_listener_observed,
    update=_listener_update,
    delete=lambda elbv2, id, state: elbv2.delete_listener(ListenerArn=id),
    tagging=ELB_TAGGING,
    computed=("arn", "protocol"),
)


def register(aws: Registry) -> None:
    """Add the listener type to the aws registry."""
    aws.add(LISTENER_SHAPE.type(force_new={"loadBalancerArn"}))
