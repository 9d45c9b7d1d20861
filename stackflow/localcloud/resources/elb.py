"""Application load balancers of the local cloud's aws provider (target groups and listeners are
`elb_target_groups` and `elb_listeners`).

Ids are ARNs, as in pulumi-aws. A load balancer's `dnsName` is the loopback address the cloud
server's data plane allocated for it on CreateLoadBalancer (where the app's stand-in listens),
in create and read alike; against bare moto (no cloud server around it) it is moto's own name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.errors import ControlApiError, LoadBalancerNotServed
from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape
from stackflow.localcloud.resources._elb_common import ELB_TAGGING, Attributed
from stackflow.localcloud.resources._shared import same_members

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

LOAD_BALANCER = "aws:lb/loadBalancer:LoadBalancer"

DATAPLANE_WAIT_S = 5.0

# pulumi-aws inputs that are load balancer attributes: wire name -> (key, type).
_LB_ATTRIBUTES = {
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
_BALANCER = Attributed("load_balancer", "LoadBalancers", "LoadBalancerArn", _LB_ATTRIBUTES)
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


def _lb_outputs(balancer: Answer, ctx: CloudContext) -> Props:
    arn = str(balancer["LoadBalancerArn"])
    return {
        "arn": arn,
        "arnSuffix": arn.split(":loadbalancer/", 1)[-1],
        "dnsName": _dns_name(ctx, balancer),
        "zoneId": balancer.get("CanonicalHostedZoneId"),
        "vpcId": balancer.get("VpcId"),
    }


def _lb_create(elbv2: Any, inputs: Props, ctx: CloudContext) -> str:
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
    return _BALANCER.create(elbv2, kwargs, inputs)


def _lb_observed(balancer: Answer, state: Props) -> Props:
    return {
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
        **_BALANCER.observed(balancer),
    }


def _lb_update(elbv2: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    if "securityGroups" in changed:
        elbv2.set_security_groups(
            LoadBalancerArn=id, SecurityGroups=list(inputs.get("securityGroups") or [])
        )
    if "subnets" in changed and inputs.get("subnets"):
        elbv2.set_subnets(LoadBalancerArn=id, Subnets=list(inputs["subnets"]))
    if "ipAddressType" in changed and inputs.get("ipAddressType"):
        elbv2.set_ip_address_type(LoadBalancerArn=id, IpAddressType=inputs["ipAddressType"])
    _BALANCER.set_attributes(elbv2, id, inputs, changed)


LOAD_BALANCER_SHAPE = Shape(
    token=LOAD_BALANCER,
    service="elbv2",
    inputs=_LB_INPUTS,
    create=_lb_create,
    describe=lambda elbv2, id, state: _BALANCER.describe(elbv2, id),
    gone=("LoadBalancerNotFound",),
    outputs=_lb_outputs,
    observed=_lb_observed,
    update=_lb_update,
    delete=lambda elbv2, id, state: elbv2.delete_load_balancer(LoadBalancerArn=id),
    tagging=ELB_TAGGING,
    computed=("arn", "arnSuffix", "dnsName", "zoneId", "vpcId"),
)


def register(aws: Registry) -> None:
    """Add the load balancer type to the aws registry."""
    aws.add(
        LOAD_BALANCER_SHAPE.type(
            force_new={
                "name",
                "namePrefix",
                "internal",
                "loadBalancerType",
                "customerOwnedIpv4Pool",
            },
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=32,
        )
    )
