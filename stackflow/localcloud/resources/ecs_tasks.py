"""ECS task definitions of the local cloud's aws provider.

The id is the family (pulumi-aws); the revision's ARN is the `arn` output. Every input but the
tags (and `skipDestroy`, `trackLatest`, which live in the state alone) forces a new revision.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.errors import InvalidInput
from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import ECS_TAGGING, Answer, Shape
from stackflow.localcloud.resources._shared import (
    error_code,
    error_message,
    input_tags,
    plain_number,
    same_members,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

TASK_DEFINITION = "aws:ecs/taskDefinition:TaskDefinition"


def _unknown(exc: ClientError, *words: str) -> bool:
    """ECS's "no such task definition": a ClientException whose message says so."""
    return error_code(exc) == "ClientException" and any(w in error_message(exc) for w in words)


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


def _outputs(definition: Answer, ctx: CloudContext) -> Props:
    arn = str(definition["taskDefinitionArn"])
    return {
        "arn": arn,
        "arnWithoutRevision": arn.rsplit(":", 1)[0],
        "revision": int(definition["revision"]),
    }


def _create(ecs: Any, inputs: Props, ctx: CloudContext) -> str:
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
    if input_tags(inputs):
        kwargs["tags"] = ECS_TAGGING.wire(input_tags(inputs))
    return str(ecs.register_task_definition(**kwargs)["taskDefinition"]["family"])


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


def _describe(ecs: Any, id: str, state: Props) -> Answer | None:
    # trackLatest: follow the family's newest revision, as pulumi-aws does.
    wanted = id if state.get("trackLatest") else str(state.get("arn") or id)
    try:
        found = ecs.describe_task_definition(taskDefinition=wanted, include=["TAGS"])
    except ClientError as exc:
        if _unknown(exc, "Unable to describe"):
            return None
        raise
    definition = found["taskDefinition"]
    if definition.get("status") == "INACTIVE":
        return None  # deregistered: pulumi-aws treats the revision as gone
    return {**definition, "tags": found.get("tags")}


def _observed(definition: Answer, state: Props) -> Props:
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
    return observed


def _delete(ecs: Any, id: str, state: Props) -> None:
    if state.get("skipDestroy"):
        return  # pulumi-aws keeps the revision and forgets it
    try:
        ecs.deregister_task_definition(taskDefinition=str(state.get("arn") or id))
    except ClientError as exc:
        if not _unknown(exc, "Unable to describe", "does not exist"):
            raise


TASK_DEFINITION_SHAPE = Shape(
    token=TASK_DEFINITION,
    service="ecs",
    inputs=_TASK_DEFINITION_INPUTS,
    create=_create,
    describe=_describe,
    outputs=_outputs,
    observed=_observed,
    # Only the tags change in place (skipDestroy and trackLatest live in the state alone).
    update=lambda ecs, id, state, inputs, changed: None,
    delete=_delete,
    tagging=ECS_TAGGING,
    computed=("arn", "arnWithoutRevision", "revision"),
)


def register(aws: Registry) -> None:
    """Add the ECS task definition type to the aws registry."""
    aws.add(
        TASK_DEFINITION_SHAPE.type(
            force_new=(_TASK_DEFINITION_INPUTS - {"tags", "skipDestroy", "trackLatest"})
            | {"volumes", "placementConstraints", "proxyConfiguration", "enableFaultInjection"}
        )
    )
