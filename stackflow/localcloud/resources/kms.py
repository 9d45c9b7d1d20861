"""KMS keys and aliases of the local cloud's aws provider. Ids follow pulumi-aws: a key's id is
its key id, an alias's its name ("alias/...")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, json_text

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

KEY = "aws:kms/key:Key"
ALIAS = "aws:kms/alias:Alias"
_GONE = ("NotFoundException",)
DEFAULT_DELETION_WINDOW_DAYS = 30  # AWS's, when the program gives none
_TAGGING = Tagging(
    "list_resource_tags",
    "tag_resource",
    "untag_resource",
    key="KeyId",
    by="id",
    field="Tags",
    keys="TagKeys",
    item=("TagKey", "TagValue"),
)


def _key_create(kms: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "KeyUsage": str(inputs.get("keyUsage") or "ENCRYPT_DECRYPT"),
        "KeySpec": str(inputs.get("customerMasterKeySpec") or "SYMMETRIC_DEFAULT"),
        "MultiRegion": bool(inputs.get("multiRegion")),
    }
    if inputs.get("description"):
        kwargs["Description"] = str(inputs["description"])
    if inputs.get("policy"):
        kwargs["Policy"] = str(inputs["policy"])
    if input_tags(inputs):
        kwargs["Tags"] = _TAGGING.wire(input_tags(inputs))
    key_id = str(kms.create_key(**kwargs)["KeyMetadata"]["KeyId"])
    if inputs.get("enableKeyRotation"):
        kms.enable_key_rotation(KeyId=key_id)
    if inputs.get("isEnabled") is False:
        kms.disable_key(KeyId=key_id)
    return key_id


def _key_describe(kms: Any, key_id: str, state: Props) -> Answer | None:
    metadata = kms.describe_key(KeyId=key_id)["KeyMetadata"]
    if metadata.get("KeyState") == "PendingDeletion":
        return None  # as pulumi-aws reads it: a key scheduled for deletion is gone
    rotation = kms.get_key_rotation_status(KeyId=key_id).get("KeyRotationEnabled", False)
    policy = kms.get_key_policy(KeyId=key_id, PolicyName="default").get("Policy", "")
    return {**metadata, "Rotation": rotation, "Policy": policy}


def _key_observed(key: Answer, state: Props) -> Props:
    return {
        "description": key.get("Description", ""),
        "keyUsage": key.get("KeyUsage"),
        "customerMasterKeySpec": key.get("KeySpec") or key.get("CustomerMasterKeySpec"),
        "isEnabled": bool(key.get("Enabled")),
        "enableKeyRotation": bool(key.get("Rotation")),
        "multiRegion": bool(key.get("MultiRegion")),
        "policy": json_text(key.get("Policy"), state.get("policy")),
    }


def _key_update(
    kms: Any, key_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    if "description" in changed:
        kms.update_key_description(KeyId=key_id, Description=str(inputs.get("description") or ""))
    if "policy" in changed and inputs.get("policy"):
        kms.put_key_policy(KeyId=key_id, PolicyName="default", Policy=str(inputs["policy"]))
    if "enableKeyRotation" in changed:
        rotate = kms.enable_key_rotation if inputs.get("enableKeyRotation") else None
        (rotate or kms.disable_key_rotation)(KeyId=key_id)
    if "isEnabled" in changed:
        (kms.enable_key if inputs.get("isEnabled", True) else kms.disable_key)(KeyId=key_id)


def _key_delete(kms: Any, key_id: str, state: Props) -> None:
    days = state.get("deletionWindowInDays") or DEFAULT_DELETION_WINDOW_DAYS
    kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=int(days))


KEY_SHAPE = Shape(
    token=KEY,
    service="kms",
    inputs=(
        "description",
        "keyUsage",
        "customerMasterKeySpec",
        "policy",
        "enableKeyRotation",
        "isEnabled",
        "deletionWindowInDays",
        "multiRegion",
        "bypassPolicyLockoutSafetyCheck",
        "tags",
    ),
    create=_key_create,
    describe=_key_describe,
    gone=_GONE,
    outputs=lambda key, ctx: {"arn": key["Arn"], "keyId": key["KeyId"]},
    observed=_key_observed,
    update=_key_update,
    delete=_key_delete,
    tagging=_TAGGING,
    computed=("arn", "keyId", "policy"),
)


def _alias_create(kms: Any, inputs: Props, ctx: CloudContext) -> str:
    kms.create_alias(AliasName=str(inputs["name"]), TargetKeyId=str(inputs["targetKeyId"]))
    return str(inputs["name"])


def _alias_describe(kms: Any, name: str, state: Props) -> Answer | None:
    for page in kms.get_paginator("list_aliases").paginate():
        for alias in page["Aliases"]:
            if alias["AliasName"] == name:
                return dict(alias)
    return None


def _alias_outputs(alias: Answer, ctx: CloudContext) -> Props:
    key_id = str(alias.get("TargetKeyId", ""))
    return {
        "arn": alias["AliasArn"],
        "targetKeyArn": f"arn:aws:kms:{ctx.region}:{ctx.account_id}:key/{key_id}",
    }


def _alias_observed(alias: Answer, state: Props) -> Props:
    target = str(state.get("targetKeyId") or "")
    key_id = str(alias.get("TargetKeyId", ""))
    # The program may name the key by id or by ARN; both mean the same key.
    return {
        "name": alias["AliasName"],
        "targetKeyId": target if target.endswith(key_id) else key_id,
    }


ALIAS_SHAPE = Shape(
    token=ALIAS,
    service="kms",
    inputs=("name", "namePrefix", "targetKeyId"),
    create=_alias_create,
    describe=_alias_describe,
    gone=_GONE,
    outputs=_alias_outputs,
    observed=_alias_observed,
    update=lambda kms, name, state, inputs, changed: kms.update_alias(
        AliasName=name, TargetKeyId=str(inputs["targetKeyId"])
    ),
    delete=lambda kms, name, state: kms.delete_alias(AliasName=name),
    computed=("arn", "targetKeyArn"),
)


def register(aws: Registry) -> None:
    """Add the KMS key and alias types."""
    aws.add(
        KEY_SHAPE.type(
            force_new={"keyUsage", "customerMasterKeySpec", "multiRegion"},
            defaults={
                "keyUsage": "ENCRYPT_DECRYPT",
                "customerMasterKeySpec": "SYMMETRIC_DEFAULT",
                "isEnabled": True,
                "enableKeyRotation": False,
                "bypassPolicyLockoutSafetyCheck": False,
            },
        ),
        ALIAS_SHAPE.type(force_new={"name", "namePrefix"}),
    )
