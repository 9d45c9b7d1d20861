"""Step Functions state machines in the local cloud (defined, never run). A state machine's id is
its ARN, as in pulumi-aws."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import LOWER_KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, json_text

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

STATE_MACHINE = "aws:sfn/stateMachine:StateMachine"
_TAGGING = Tagging(
    "list_tags_for_resource",
    "tag_resource",
    "untag_resource",
    key="resourceArn",
    item=LOWER_KEY_VALUE,
)


def _create(sfn: Any, inputs: Props, ctx: CloudContext) -> str:
    answer = sfn.create_state_machine(
        name=str(inputs["name"]),
        definition=str(inputs["definition"]),
        roleArn=str(inputs["roleArn"]),
        type=str(inputs.get("type") or "STANDARD"),
        tags=_TAGGING.wire(input_tags(inputs)),
    )
    return str(answer["stateMachineArn"])


def _outputs(machine: Answer, ctx: CloudContext) -> Props:
    created: Any = machine.get("creationDate")
    return {
        "arn": machine["stateMachineArn"],
        "creationDate": created.isoformat() if hasattr(created, "isoformat") else str(created),
        "status": machine.get("status", "ACTIVE"),
        "revisionId": machine.get("revisionId", ""),
        "stateMachineVersionArn": "",
    }


def _observed(machine: Answer, state: Props) -> Props:
    return {
        "name": machine.get("name"),
        "roleArn": machine.get("roleArn"),
        "type": machine.get("type"),
        "definition": json_text(machine.get("definition"), state.get("definition")),
    }


def _update(sfn: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    if changed & {"definition", "roleArn"}:
        sfn.update_state_machine(
            stateMachineArn=id, definition=str(inputs["definition"]), roleArn=str(inputs["roleArn"])
        )


MACHINE = Shape(
    token=STATE_MACHINE,
    service="stepfunctions",
    inputs=("name", "namePrefix", "roleArn", "definition", "type", "publish", "tags"),
    create=_create,
    describe=lambda sfn, arn, state: sfn.describe_state_machine(stateMachineArn=arn),
    gone=("StateMachineDoesNotExist", "InvalidArn"),
    outputs=_outputs,
    observed=_observed,
    update=_update,
    delete=lambda sfn, arn, state: sfn.delete_state_machine(stateMachineArn=arn),
    tagging=_TAGGING,
    computed=("arn", "creationDate", "status", "revisionId", "stateMachineVersionArn"),
)


def register(aws: Registry) -> None:
    """Add the Step Functions state machine type to the aws registry."""
    aws.add(
        MACHINE.type(
            force_new={"name", "namePrefix", "type"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=80,
            defaults={"type": "STANDARD", "publish": False},
        )
    )
