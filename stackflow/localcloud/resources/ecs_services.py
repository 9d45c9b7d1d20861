"""ECS services of the local cloud's aws provider.

Ids follow pulumi-aws: a service's id is its ARN. `cluster` may be given as name or ARN,
`taskDefinition` as ARN, family:revision or family: read gives back the form the state holds when
it names the same. `waitForSteadyState`: the local cloud's services are steady as soon as they
exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, ResourceType, tags_of
from stackflow.localcloud.resources._declared import ECS_TAGGING, found
from stackflow.localcloud.resources._shared import (
    input_tags,
    observe,
    refuse_unserved,
    same_members,
    tag_outputs,
    unless_gone,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

SERVICE = "aws:ecs/service:Service"
_GONE = ("ServiceNotFoundException", "ServiceNotActiveException", "ClusterNotFoundException")

_SERVICE_INPUTS = {
    "name",
    "cluster",
    "taskDefinition",
    "desiredCount",
    "launchType",
    "platformVersion",
    "schedulingStrategy",
    "iamRole",
    "networkConfiguration",
    "loadBalancers",
    "healthCheckGracePeriodSeconds",
    "deploymentCircuitBreaker",
    "deploymentMaximumPercent",
    "deploymentMinimumHealthyPercent",
    "deploymentController",
    "propagateTags",
    "enableEcsManagedTags",
    "enableExecuteCommand",
    "forceDelete",
    "forceNewDeployment",
    "triggers",
    "waitForSteadyState",
    "tags",
}
_DEPLOYMENT_INPUTS = (
    "deploymentCircuitBreaker",
    "deploymentMaximumPercent",
    "deploymentMinimumHealthyPercent",
)


def _network(config: Mapping[str, Any]) -> dict[str, Any]:
    vpc: dict[str, Any] = {"subnets": list(config.get("subnets") or [])}
    if config.get("securityGroups"):
        vpc["securityGroups"] = list(config["securityGroups"])
    vpc["assignPublicIp"] = "ENABLED" if config.get("assignPublicIp") else "DISABLED"
    return {"awsvpcConfiguration": vpc}


def _load_balancers(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        entry: dict[str, Any] = {
            "containerName": str(item["containerName"]),
            "containerPort": int(item["containerPort"]),
        }
        if item.get("targetGroupArn"):
            entry["targetGroupArn"] = str(item["targetGroupArn"])
        if item.get("elbName"):
            entry["loadBalancerName"] = str(item["elbName"])
        out.append(entry)
    return out


def _deployment_configuration(inputs: Mapping[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    breaker = inputs.get("deploymentCircuitBreaker")
    if breaker:
        config["deploymentCircuitBreaker"] = {
            "enable": bool(breaker.get("enable")),
            "rollback": bool(breaker.get("rollback")),
        }
    if inputs.get("deploymentMaximumPercent") is not None:
        config["maximumPercent"] = int(inputs["deploymentMaximumPercent"])
    if inputs.get("deploymentMinimumHealthyPercent") is not None:
        config["minimumHealthyPercent"] = int(inputs["deploymentMinimumHealthyPercent"])
    return config


def _cluster_of(service_arn: str) -> str:
    # arn:aws:ecs:<region>:<account>:service/<cluster>/<name>
    parts = service_arn.split(":", 5)[-1].split("/")
    return parts[1] if len(parts) == 3 else "default"


def _same_ref(observed_arn: str, current: Any) -> Any:
    """`current` when it names the same thing as the ARN AWS reports (by ARN, by the ARN's tail
    such as family:revision or cluster name, or by family alone), else the ARN."""
    if not isinstance(current, str) or not observed_arn:
        return observed_arn
    tail = observed_arn.rsplit("/", 1)[-1]
    if current in (observed_arn, tail, tail.split(":")[0]):
        return current
    return observed_arn


def _describe_service(ctx: CloudContext, id: str, state: Props) -> dict[str, Any] | None:
    cluster = str(state.get("cluster") or _cluster_of(id))
    ecs = ctx.client("ecs")
    answer = found(
        ("ClusterNotFoundException",),
        lambda: ecs.describe_services(cluster=cluster, services=[id], include=["TAGS"]),
    )
    if answer is None:
        return None
    services = [s for s in answer.get("services", []) if s.get("status") != "INACTIVE"]
    return services[0] if services else None


def _service_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, SERVICE, inputs, _SERVICE_INPUTS)
    kwargs: dict[str, Any] = {"serviceName": inputs["name"]}
    for key, api in (
        ("cluster", "cluster"),
        ("taskDefinition", "taskDefinition"),
        ("launchType", "launchType"),
        ("platformVersion", "platformVersion"),
        ("schedulingStrategy", "schedulingStrategy"),
        ("iamRole", "role"),
        ("propagateTags", "propagateTags"),
    ):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    if inputs.get("schedulingStrategy") != "DAEMON":
        kwargs["desiredCount"] = int(inputs.get("desiredCount") or 0)
    if inputs.get("healthCheckGracePeriodSeconds") is not None:
        kwargs["healthCheckGracePeriodSeconds"] = int(inputs["healthCheckGracePeriodSeconds"])
    if inputs.get("networkConfiguration"):
        kwargs["networkConfiguration"] = _network(inputs["networkConfiguration"])
    if inputs.get("loadBalancers"):
        kwargs["loadBalancers"] = _load_balancers(inputs["loadBalancers"])
    deployment = _deployment_configuration(inputs)
    if deployment:
        kwargs["deploymentConfiguration"] = deployment
    if inputs.get("deploymentController"):
        kwargs["deploymentController"] = {"type": inputs["deploymentController"]["type"]}
    for key, api in (
        ("enableEcsManagedTags", "enableECSManagedTags"),
        ("enableExecuteCommand", "enableExecuteCommand"),
    ):
        if inputs.get(key) is not None:
            kwargs[api] = bool(inputs[key])
    tags = input_tags(inputs)
    if tags:
        kwargs["tags"] = ECS_TAGGING.wire(tags)
    service = ctx.client("ecs").create_service(**kwargs)["service"]
    computed: Props = {"arn": service["serviceArn"], "tagsAll": tags}
    if not inputs.get("cluster"):
        computed["cluster"] = service["clusterArn"]
    return str(service["serviceArn"]), computed


def _service_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    service = _describe_service(ctx, id, state)
    if service is None:
        return None
    observed: Props = {
        "name": service.get("serviceName"),
        "cluster": _same_ref(str(service.get("clusterArn", "")), state.get("cluster")),
        "taskDefinition": _same_ref(
            str(service.get("taskDefinition", "")), state.get("taskDefinition")
        ),
        "desiredCount": service.get("desiredCount"),
        "launchType": service.get("launchType"),
        "platformVersion": service.get("platformVersion"),
        "schedulingStrategy": service.get("schedulingStrategy"),
        "propagateTags": service.get("propagateTags"),
        "iamRole": service.get("roleArn"),
        "healthCheckGracePeriodSeconds": service.get("healthCheckGracePeriodSeconds"),
        "enableExecuteCommand": service.get("enableExecuteCommand"),
        "enableEcsManagedTags": service.get("enableECSManagedTags"),
    }
    vpc = (service.get("networkConfiguration") or {}).get("awsvpcConfiguration")
    if vpc is not None:
        mine = state.get("networkConfiguration") or {}
        observed["networkConfiguration"] = {
            "subnets": same_members(list(vpc.get("subnets", [])), mine.get("subnets")),
            "securityGroups": same_members(
                list(vpc.get("securityGroups", [])), mine.get("securityGroups")
            ),
            "assignPublicIp": vpc.get("assignPublicIp") == "ENABLED",
        }
    balancers = [
        {
            k: v
            for k, v in (
                ("targetGroupArn", item.get("targetGroupArn")),
                ("elbName", item.get("loadBalancerName")),
                ("containerName", item.get("containerName")),
                ("containerPort", item.get("containerPort")),
            )
            if v is not None
        }
        for item in service.get("loadBalancers", [])
    ]
    observed["loadBalancers"] = same_members(balancers, state.get("loadBalancers"))
    deployment = service.get("deploymentConfiguration") or {}
    observed["deploymentCircuitBreaker"] = deployment.get("deploymentCircuitBreaker")
    observed["deploymentMaximumPercent"] = deployment.get("maximumPercent")
    observed["deploymentMinimumHealthyPercent"] = deployment.get("minimumHealthyPercent")
    if service.get("deploymentController"):
        observed["deploymentController"] = {"type": service["deploymentController"].get("type")}
    return {
        **observe(state, observed),
        "arn": service["serviceArn"],
        **tag_outputs(state, tags_of(service.get("tags"))),
    }


def _service_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, SERVICE, inputs, _SERVICE_INPUTS)
    kwargs: dict[str, Any] = {}
    if "desiredCount" in changed and inputs.get("schedulingStrategy") != "DAEMON":
        kwargs["desiredCount"] = int(inputs.get("desiredCount") or 0)
    if "taskDefinition" in changed and inputs.get("taskDefinition"):
        kwargs["taskDefinition"] = str(inputs["taskDefinition"])
    if "networkConfiguration" in changed and inputs.get("networkConfiguration"):
        kwargs["networkConfiguration"] = _network(inputs["networkConfiguration"])
    if "loadBalancers" in changed:
        kwargs["loadBalancers"] = _load_balancers(inputs.get("loadBalancers") or [])
    if "healthCheckGracePeriodSeconds" in changed:
        kwargs["healthCheckGracePeriodSeconds"] = int(
            inputs.get("healthCheckGracePeriodSeconds") or 0
        )
    if changed & set(_DEPLOYMENT_INPUTS):
        kwargs["deploymentConfiguration"] = _deployment_configuration(inputs)
    if "propagateTags" in changed:
        kwargs["propagateTags"] = str(inputs.get("propagateTags") or "NONE")
    if "platformVersion" in changed and inputs.get("platformVersion"):
        kwargs["platformVersion"] = str(inputs["platformVersion"])
    if "enableExecuteCommand" in changed:
        kwargs["enableExecuteCommand"] = bool(inputs.get("enableExecuteCommand"))
    if "enableEcsManagedTags" in changed:
        kwargs["enableECSManagedTags"] = bool(inputs.get("enableEcsManagedTags"))
    if inputs.get("forceNewDeployment") or "triggers" in changed:
        kwargs["forceNewDeployment"] = True
    if kwargs:
        cluster = str(state.get("cluster") or _cluster_of(id))
        ctx.client("ecs").update_service(cluster=cluster, service=id, **kwargs)
    ECS_TAGGING.sync(ctx.client("ecs"), id, inputs)
    computed: Props = {"arn": state.get("arn", id), "tagsAll": input_tags(inputs)}
    if not inputs.get("cluster") and state.get("cluster"):
        computed["cluster"] = state["cluster"]
    return computed


def _service_delete(ctx: CloudContext, id: str, state: Props) -> None:
    service = _describe_service(ctx, id, state)
    if service is None:
        return
    cluster = str(service["clusterArn"])
    force = bool(state.get("forceDelete"))
    ecs = ctx.client("ecs")
    with unless_gone(_GONE):
        # AWS refuses to delete a replica service still scaled above zero (unless forced).
        if (
            not force
            and service.get("schedulingStrategy") != "DAEMON"
            and service.get("desiredCount")
        ):
            ecs.update_service(cluster=cluster, service=id, desiredCount=0)
        ecs.delete_service(cluster=cluster, service=id, force=force)


def register(aws: Registry) -> None:
    """Add the ECS service type to the aws registry."""
    aws.add(
        ResourceType(
            token=SERVICE,
            create=_service_create,
            read=_service_read,
            update=_service_update,
            delete=_service_delete,
            force_new=frozenset(
                {
                    "name",
                    "cluster",
                    "iamRole",
                    "launchType",
                    "schedulingStrategy",
                    "deploymentController",
                    "region",
                }
            ),
            computed=("arn", "tagsAll"),
            auto_name="name",
            drift_inputs=frozenset({"tags"}),
        ),
    )
