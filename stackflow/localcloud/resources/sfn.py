"""Step Functions state machines in the local cloud (defined, never run). A state machine's id is
its ARN, as in pulumi-aws."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    json_text,
    kept,
    observe,
    refuse_unserved,
    tag_changes,
    tag_outputs,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

STATE_MACHINE = "aws:sfn/stateMachine:StateMachine"
_INPUTS = ("name", "namePrefix", "roleArn", "definition", "type", "publish", "tags")
_COMPUTED = ("arn", "creationDate", "status", "revisionId", "stateMachineVersionArn", "tagsAll")


def _sfn(ctx: CloudContext) -> Any:
    return ctx.client("stepfunctions")


def _describe(ctx: CloudContext, arn: str) -> dict[str, Any] | None:
    try:
        return dict(_sfn(ctx).describe_state_machine(stateMachineArn=arn))
    except ClientError as exc:
        if error_code(exc) in ("StateMachineDoesNotExist", "InvalidArn"):
            return None
        raise


def _outputs(machine: dict[str, Any]) -> Props:
    created: Any = machine.get("creationDate")
    return {
        "arn": machine["stateMachineArn"],
        "creationDate": created.isoformat() if hasattr(created, "isoformat") else str(created),
        "status": machine.get("status", "ACTIVE"),
        "revisionId": machine.get("revisionId", ""),
        "stateMachineVersionArn": "",
    }


def _create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, STATE_MACHINE, inputs, _INPUTS)
    tags = input_tags(inputs)
    answer = _sfn(ctx).create_state_machine(
        name=str(inputs["name"]),
        definition=str(inputs["definition"]),
        roleArn=str(inputs["roleArn"]),
        type=str(inputs.get("type") or "STANDARD"),
        tags=[{"key": k, "value": v} for k, v in tags.items()],
    )
    machine = _describe(ctx, str(answer["stateMachineArn"])) or {
        "stateMachineArn": answer["stateMachineArn"],
        "creationDate": answer.get("creationDate"),
    }
    return str(answer["stateMachineArn"]), {**_outputs(machine), "tagsAll": tags}


def _tags(ctx: CloudContext, arn: str) -> dict[str, str]:
    return tags_of(_sfn(ctx).list_tags_for_resource(resourceArn=arn).get("tags"))


def _read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    machine = _describe(ctx, id)
    if machine is None:
        return None
    observed = {
        "name": machine.get("name"),
        "roleArn": machine.get("roleArn"),
        "type": machine.get("type"),
        "definition": json_text(machine.get("definition"), state.get("definition")),
    }
    return {**observe(state, observed), **_outputs(machine), **tag_outputs(state, _tags(ctx, id))}


def _update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, STATE_MACHINE, inputs, _INPUTS)
    client = _sfn(ctx)
    if changed & {"definition", "roleArn"}:
        client.update_state_machine(
            stateMachineArn=id,
            definition=str(inputs["definition"]),
            roleArn=str(inputs["roleArn"]),
        )
    upsert, remove = tag_changes(_tags(ctx, id), inputs)
    if remove:
        client.untag_resource(resourceArn=id, tagKeys=remove)
    if upsert:
        client.tag_resource(
            resourceArn=id, tags=[{"key": t["Key"], "value": t["Value"]} for t in tag_list(upsert)]
        )
    machine = _describe(ctx, id)
    computed = _outputs(machine) if machine else kept(state, _COMPUTED)
    return {**computed, "tagsAll": input_tags(inputs)}


def _delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        _sfn(ctx).delete_state_machine(stateMachineArn=id)
    except ClientError as exc:
        if error_code(exc) not in ("StateMachineDoesNotExist", "InvalidArn"):
            raise


def register(aws: Registry) -> None:
    """Add the Step Functions state machine type to the aws registry."""
    aws.add(
        ResourceType(
            token=STATE_MACHINE,
            create=_create,
            read=_read,
            update=_update,
            delete=_delete,
            force_new=frozenset({"name", "namePrefix", "type", "region"}),
            computed=_COMPUTED,
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=80,
            drift_inputs=frozenset({"tags"}),
            defaults={"type": "STANDARD", "publish": False},
        )
    )
