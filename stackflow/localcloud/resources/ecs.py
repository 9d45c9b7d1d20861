"""ECS clusters, task definitions and services of the local cloud's aws provider.

Ids follow pulumi-aws: a cluster's and a service's id is its ARN, a task definition's is its family
(the revision lives in `arn`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.errors import InvalidInput
from stackflow.localcloud.registry import Props, Registry, ResourceType, tags_of
from stackflow.localcloud.resources._shared import (
    error_code,
    error_message,
    input_tags,
    kept,
    observe,
    plain_number,
    refuse_unserved,
    same_members,
    tag_changes,
    tag_outputs,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

# --- ECS ------------------------------------------------------------------------------------

CLUSTER = "aws:ecs/cluster:Cluster"
TASK_DEFINITION = "aws:ecs/taskDefinition:TaskDefinition"
SERVICE = "aws:ecs/service:Service"


def _ecs_tags(tags: Mapping[str, str]) -> list[dict[str, str]]:
    # ECS alone spells tag keys in lower case.
    return [{"key": k, "value": v} for k, v in tags.items()]


def _retag_ecs(ctx: CloudContext, arn: str, inputs: Props) -> None:
    ecs = ctx.client("ecs")
    current = tags_of(ecs.list_tags_for_resource(resourceArn=arn).get("tags"))
    upsert, remove = tag_changes(current, inputs)
    if remove:
        ecs.untag_resource(resourceArn=arn, tagKeys=remove)
    if upsert:
        ecs.tag_resource(resourceArn=arn, tags=_ecs_tags(upsert))


def _settings(items: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    return [{"name": str(item["name"]), "value": str(item["value"])} for item in items]


# Cluster: id = ARN (pulumi-aws imports by name, but the id it keeps is the ARN).
_CLUSTER_INPUTS = {"name", "settings", "tags"}


def _cluster_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, CLUSTER, inputs, _CLUSTER_INPUTS)
    kwargs: dict[str, Any] = {"clusterName": inputs["name"]}
    tags = input_tags(inputs)
    if tags:
        kwargs["tags"] = _ecs_tags(tags)
    if inputs.get("settings"):
        kwargs["settings"] = _settings(inputs["settings"])
    cluster = ctx.client("ecs").create_cluster(**kwargs)["cluster"]
    return cluster["clusterArn"], {"arn": cluster["clusterArn"], "tagsAll": tags}


def _cluster_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    found = ctx.client("ecs").describe_clusters(clusters=[id], include=["TAGS", "SETTINGS"])
    clusters = [c for c in found.get("clusters", []) if c.get("status") != "INACTIVE"]
    if not clusters:
        return None
    cluster = clusters[0]
    observed = {
        "name": cluster["clusterName"],
        "settings": same_members(_settings(cluster.get("settings", [])), state.get("settings")),
    }
    return {
        **observe(state, observed),
        "arn": cluster["clusterArn"],
        **tag_outputs(state, tags_of(cluster.get("tags"))),
    }


def _cluster_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, CLUSTER, inputs, _CLUSTER_INPUTS)
    if "settings" in changed and inputs.get("settings"):
        ctx.client("ecs").update_cluster(cluster=id, settings=_settings(inputs["settings"]))
    _retag_ecs(ctx, id, inputs)
    return {"arn": state.get("arn", id), "tagsAll": input_tags(inputs)}


def _cluster_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        ctx.client("ecs").delete_cluster(cluster=id)
    except ClientError as exc:
        if error_code(exc) != "ClusterNotFoundException":
            raise


# Task definition: id = family (pulumi-aws), the revision's ARN is the `arn` output. Every input
# but the tags forces a new revision.
_TASK_DEFINITION_INPUTS = {
    "family",
    "containerDefinitions",
    "cpu",
    "memory",
    "networkMode",
    "requiresCompatibilities",
    "executionRoleArn",
    "taskRoleArn",
    "pidMode",
    "ipcMode",
    "runtimePlatform",
    "ephemeralStorage",
    "skipDestroy",
    "trackLatest",
    "tags",
}
_TASK_DEFINITION_STRINGS = (
    "cpu",
    "memory",
    "networkMode",
    "executionRoleArn",
    "taskRoleArn",
    "pidMode",
    "ipcMode",
)


def _task_definition_outputs(definition: Mapping[str, Any]) -> Props:
    arn = str(definition["taskDefinitionArn"])
    return {
        "arn": arn,
        "arnWithoutRevision": arn.rsplit(":", 1)[0],
        "revision": int(definition["revision"]),
    }


def _task_definition_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, TASK_DEFINITION, inputs, _TASK_DEFINITION_INPUTS)
    # The input is one JSON document (pulumi-aws's shape); the API takes the parsed list.
    try:
        containers = json.loads(inputs["containerDefinitions"])
    except (TypeError, ValueError) as exc:
        raise InvalidInput(
            f"{TASK_DEFINITION}: containerDefinitions must be a JSON list of container "
            f"definitions ({exc})"
        ) from None
    kwargs: dict[str, Any] = {"family": inputs["family"], "containerDefinitions": containers}
    for key in _TASK_DEFINITION_STRINGS:
        if inputs.get(key) is not None:
            kwargs[key] = str(inputs[key])
    if inputs.get("requiresCompatibilities"):
        kwargs["requiresCompatibilities"] = list(inputs["requiresCompatibilities"])
    if inputs.get("runtimePlatform"):
        kwargs["runtimePlatform"] = dict(inputs["runtimePlatform"])
    if inputs.get("ephemeralStorage"):
        kwargs["ephemeralStorage"] = {"sizeInGiB": int(inputs["ephemeralStorage"]["sizeInGib"])}
    tags = input_tags(inputs)
    if tags:
        kwargs["tags"] = _ecs_tags(tags)
    definition = ctx.client("ecs").register_task_definition(**kwargs)["taskDefinition"]
    return str(definition["family"]), {**_task_definition_outputs(definition), "tagsAll": tags}


def _normal_containers(containers: Any, awsvpc: bool) -> Any:
    """Container definitions without what ECS fills in itself (empty lists, cpu 0, essential
    true, tcp, hostPort = containerPort under awsvpc), in a stable order."""
    if not isinstance(containers, list):
        return containers

    def normal(container: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in container.items():
            if value in (None, [], {}) or (key, value) in (("cpu", 0), ("essential", True)):
                continue
            if key in ("environment", "secrets") and isinstance(value, list):
                value = sorted(value, key=lambda item: str(item.get("name")))
            if key == "portMappings" and isinstance(value, list):
                value = [
                    {
                        k: v
                        for k, v in mapping.items()
                        if not (k == "protocol" and v == "tcp")
                        and not (k == "hostPort" and awsvpc and v == mapping.get("containerPort"))
                    }
                    for mapping in value
                ]
            out[key] = plain_number(value)
        return out

    return sorted(
        (normal(c) for c in containers if isinstance(c, Mapping)),
        key=lambda c: str(c.get("name")),
    )


def _container_definitions_text(observed: list[Any], current: Any, awsvpc: bool) -> str:
    """The state's JSON text when the cloud's definitions mean the same, else the cloud's."""
    if isinstance(current, str):
        try:
            mine = json.loads(current)
        except ValueError:
            mine = None
        if _normal_containers(mine, awsvpc) == _normal_containers(observed, awsvpc):
            return current
    return json.dumps(observed)


def _task_definition_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    # trackLatest: follow the family's newest revision, as pulumi-aws does.
    wanted = id if state.get("trackLatest") else str(state.get("arn") or id)
    try:
        found = ctx.client("ecs").describe_task_definition(taskDefinition=wanted, include=["TAGS"])
    except ClientError as exc:
        if error_code(exc) == "ClientException" and "Unable to describe" in error_message(exc):
            return None
        raise
    definition = found["taskDefinition"]
    if definition.get("status") == "INACTIVE":
        return None  # deregistered: pulumi-aws treats the revision as gone
    awsvpc = definition.get("networkMode") == "awsvpc"
    observed: Props = {key: definition.get(key) for key in ("family", *_TASK_DEFINITION_STRINGS)}
    observed["requiresCompatibilities"] = same_members(
        list(definition.get("requiresCompatibilities", [])),
        state.get("requiresCompatibilities"),
    )
    observed["runtimePlatform"] = definition.get("runtimePlatform")
    if definition.get("ephemeralStorage"):
        observed["ephemeralStorage"] = {"sizeInGib": definition["ephemeralStorage"]["sizeInGiB"]}
    observed["containerDefinitions"] = _container_definitions_text(
        definition.get("containerDefinitions", []), state.get("containerDefinitions"), awsvpc
    )
    return {
        **observe(state, observed),
        **_task_definition_outputs(definition),
        **tag_outputs(state, tags_of(found.get("tags"))),
    }


def _task_definition_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    # Only tags (and skipDestroy/trackLatest, which live in the state alone) change in place.
    refuse_unserved(ctx, TASK_DEFINITION, inputs, _TASK_DEFINITION_INPUTS)
    _retag_ecs(ctx, str(state["arn"]), inputs)
    computed = kept(state, ("arn", "arnWithoutRevision", "revision"))
    return {**computed, "tagsAll": input_tags(inputs)}


def _task_definition_delete(ctx: CloudContext, id: str, state: Props) -> None:
    if state.get("skipDestroy"):
        return  # pulumi-aws keeps the revision and forgets it
    try:
        ctx.client("ecs").deregister_task_definition(taskDefinition=str(state.get("arn") or id))
    except ClientError as exc:
        gone = ("Unable to describe", "does not exist")
        if not (
            error_code(exc) == "ClientException" and any(g in error_message(exc) for g in gone)
        ):
            raise


# Service: id = ARN. `cluster` may be given as name or ARN, `taskDefinition` as ARN,
# family:revision or family: read gives back the form the state holds when it names the same.
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
    try:
        found = ctx.client("ecs").describe_services(
            cluster=cluster, services=[id], include=["TAGS"]
        )
    except ClientError as exc:
        if error_code(exc) == "ClusterNotFoundException":
            return None
        raise
    services = [s for s in found.get("services", []) if s.get("status") != "INACTIVE"]
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
        kwargs["tags"] = _ecs_tags(tags)
    # waitForSteadyState: the local cloud's services are steady as soon as they exist.
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
    _retag_ecs(ctx, id, inputs)
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
    try:
        # AWS refuses to delete a replica service still scaled above zero (unless forced).
        if (
            not force
            and service.get("schedulingStrategy") != "DAEMON"
            and service.get("desiredCount")
        ):
            ecs.update_service(cluster=cluster, service=id, desiredCount=0)
        ecs.delete_service(cluster=cluster, service=id, force=force)
    except ClientError as exc:
        gone = ("ServiceNotFoundException", "ServiceNotActiveException", "ClusterNotFoundException")
        if error_code(exc) not in gone:
            raise


def register(aws: Registry) -> None:
    """Add the ECS cluster, task definition and service types to the aws registry."""
    aws.add(
        ResourceType(
            token=CLUSTER,
            create=_cluster_create,
            read=_cluster_read,
            update=_cluster_update,
            delete=_cluster_delete,
            force_new=frozenset({"name", "region"}),
            computed=("arn", "tagsAll"),
            auto_name="name",
            drift_inputs=frozenset({"tags"}),
        ),
        ResourceType(
            token=TASK_DEFINITION,
            create=_task_definition_create,
            read=_task_definition_read,
            update=_task_definition_update,
            delete=_task_definition_delete,
            force_new=frozenset(_TASK_DEFINITION_INPUTS - {"tags", "skipDestroy", "trackLatest"})
            | {"region", "volumes", "placementConstraints", "proxyConfiguration"}
            | {"enableFaultInjection"},
            computed=("arn", "arnWithoutRevision", "revision", "tagsAll"),
            drift_inputs=frozenset({"tags"}),
        ),
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
