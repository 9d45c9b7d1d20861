"""What connects other services to a Lambda function in the local cloud: permissions (a statement
of the function's resource policy; id = its statement id, as in pulumi-aws) and event source
mappings (id = the mapping's UUID). Nothing is invoked: the function never runs here."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

PERMISSION = "aws:lambda/permission:Permission"
EVENT_SOURCE_MAPPING = "aws:lambda/eventSourceMapping:EventSourceMapping"
_GONE = ("ResourceNotFoundException",)


def _function_name(value: Any) -> str:
    """A function input as its name (the program may give its name or its ARN)."""
    text = str(value)
    return text.split(":function:", 1)[1].split(":", 1)[0] if ":function:" in text else text


def _permission_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "FunctionName": _function_name(inputs["function"]),
        "StatementId": str(inputs["statementId"]),
        "Action": str(inputs["action"]),
        "Principal": str(inputs["principal"]),
    }
    for key, api in (
        ("sourceArn", "SourceArn"),
        ("sourceAccount", "SourceAccount"),
        ("qualifier", "Qualifier"),
        ("eventSourceToken", "EventSourceToken"),
        ("principalOrgId", "PrincipalOrgID"),
        ("functionUrlAuthType", "FunctionUrlAuthType"),
    ):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    client.add_permission(**kwargs)
    return str(inputs["statementId"])


def _permission_describe(client: Any, sid: str, state: Props) -> Answer | None:
    kwargs: dict[str, Any] = {"FunctionName": _function_name(state["function"])}
    if state.get("qualifier"):
        kwargs["Qualifier"] = str(state["qualifier"])
    policy = json.loads(client.get_policy(**kwargs)["Policy"])
    return next((s for s in policy.get("Statement", []) if s.get("Sid") == sid), None)


def _permission_observed(statement: Answer, state: Props) -> Props:
    principal = statement.get("Principal")
    if isinstance(principal, dict):
        principal = principal.get("Service") or principal.get("AWS")
    condition = statement.get("Condition") or {}
    source_arn = (condition.get("ArnLike") or {}).get("AWS:SourceArn", "")
    return {"action": statement.get("Action"), "principal": principal, "sourceArn": source_arn}


def _permission_delete(client: Any, sid: str, state: Props) -> None:
    kwargs: dict[str, Any] = {"FunctionName": _function_name(state["function"]), "StatementId": sid}
    if state.get("qualifier"):
        kwargs["Qualifier"] = str(state["qualifier"])
    client.remove_permission(**kwargs)


PERMISSION_SHAPE = Shape(
    token=PERMISSION,
    service="lambda",
    inputs=(
        "action",
        "function",
        "principal",
        "sourceArn",
        "sourceAccount",
        "qualifier",
        "statementId",
        "statementIdPrefix",
        "eventSourceToken",
        "principalOrgId",
        "functionUrlAuthType",
    ),
    create=_permission_create,
    describe=_permission_describe,
    gone=_GONE,
    outputs=lambda statement, ctx: {},
    observed=_permission_observed,
    delete=_permission_delete,
)

# input -> event source mapping parameter, for those that change in place.
_MAPPING_FIELDS: dict[str, tuple[str, type]] = {
    "batchSize": ("BatchSize", int),
    "enabled": ("Enabled", bool),
    "maximumBatchingWindowInSeconds": ("MaximumBatchingWindowInSeconds", int),
    "maximumRetryAttempts": ("MaximumRetryAttempts", int),
    "maximumRecordAgeInSeconds": ("MaximumRecordAgeInSeconds", int),
    "parallelizationFactor": ("ParallelizationFactor", int),
    "bisectBatchOnFunctionError": ("BisectBatchOnFunctionError", bool),
}


def _mapping_fields(inputs: Props, keys: frozenset[str] | None = None) -> dict[str, Any]:
    return {
        api: kind(inputs[key])
        for key, (api, kind) in _MAPPING_FIELDS.items()
        if inputs.get(key) is not None and (keys is None or key in keys)
    }


def _mapping_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "FunctionName": str(inputs["functionName"]),
        "EventSourceArn": str(inputs["eventSourceArn"]),
        **_mapping_fields(inputs),
    }
    if inputs.get("startingPosition"):
        kwargs["StartingPosition"] = str(inputs["startingPosition"])
    return str(client.create_event_source_mapping(**kwargs)["UUID"])


def _mapping_outputs(mapping: Answer, ctx: CloudContext) -> Props:
    modified: Any = mapping.get("LastModified")
    return {
        "uuid": mapping["UUID"],
        "functionArn": mapping["FunctionArn"],
        "state": mapping.get("State", ""),
        "stateTransitionReason": mapping.get("StateTransitionReason", ""),
        "lastProcessingResult": mapping.get("LastProcessingResult", ""),
        "lastModified": modified.isoformat() if hasattr(modified, "isoformat") else str(modified),
        "arn": mapping.get("EventSourceMappingArn")
        or f"arn:aws:lambda:{ctx.region}:{ctx.account_id}:event-source-mapping:{mapping['UUID']}",
    }


def _mapping_observed(mapping: Answer, state: Props) -> Props:
    observed: Props = {"eventSourceArn": mapping.get("EventSourceArn")}
    for key, (api, kind) in _MAPPING_FIELDS.items():
        if api in mapping:
            observed[key] = kind(mapping[api])
    if "State" in mapping:
        observed["enabled"] = mapping["State"] in ("Enabled", "Enabling", "Creating")
    return observed


MAPPING_SHAPE = Shape(
    token=EVENT_SOURCE_MAPPING,
    service="lambda",
    inputs=("functionName", "eventSourceArn", "startingPosition", *_MAPPING_FIELDS),
    create=_mapping_create,
    describe=lambda client, uuid, state: client.get_event_source_mapping(UUID=uuid),
    gone=_GONE,
    outputs=_mapping_outputs,
    observed=_mapping_observed,
    update=lambda client, uuid, state, inputs, changed: client.update_event_source_mapping(
        UUID=uuid, FunctionName=str(inputs["functionName"]), **_mapping_fields(inputs, changed)
    ),
    delete=lambda client, uuid, state: client.delete_event_source_mapping(UUID=uuid),
    computed=(
        "uuid",
        "functionArn",
        "state",
        "stateTransitionReason",
        "lastProcessingResult",
        "lastModified",
        "arn",
    ),
)


def register(aws: Registry) -> None:
    """Add the Lambda permission and event source mapping types."""
    aws.add(
        PERMISSION_SHAPE.type(
            auto_name="statementId", name_prefix="statementIdPrefix", auto_name_max=100
        ),
        MAPPING_SHAPE.type(
            force_new={"eventSourceArn", "startingPosition"},
            defaults={"enabled": True},
        ),
    )
