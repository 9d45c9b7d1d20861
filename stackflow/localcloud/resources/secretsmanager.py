"""Secrets Manager in the local cloud: secrets and their versions, as pulumi-aws 7 manages them.

Secret values (`secretString`, `secretBinary`) pass through to the cloud and back into the state,
where the engine marks them secret; nothing here logs or prints them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.errors import InvalidInput
from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._shared import (
    error_code,
    json_text,
    keep_observed,
    refuse_unserved,
    tag_changes,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

SECRET = "aws:secretsmanager/secret:Secret"
SECRET_VERSION = "aws:secretsmanager/secretVersion:SecretVersion"
DEFAULT_RECOVERY_WINDOW_DAYS = 30  # pulumi-aws's default recoveryWindowInDays
NAME_MAX = 512  # Secrets Manager's longest secret name
CURRENT = "AWSCURRENT"

_SECRET_INPUTS = (
    "name",
    "namePrefix",
    "description",
    "kmsKeyId",
    "policy",
    "recoveryWindowInDays",
    "forceOverwriteReplicaSecret",
    "tags",
)
_SECRET_VERSION_INPUTS = ("secretId", "secretString", "secretBinary", "versionStages")


def _gone(exc: ClientError) -> bool:
    """True if `exc` says the secret (or its version) no longer exists or awaits deletion."""
    code = error_code(exc)
    message = str(exc.response.get("Error", {}).get("Message", ""))
    return code == "ResourceNotFoundException" or (
        code == "InvalidRequestException" and "deleted" in message
    )


# --- aws:secretsmanager/secret:Secret (id = ARN) ----------------------------------------------


def _describe_secret(ctx: CloudContext, secret_id: str) -> dict[str, Any] | None:
    """The secret as DescribeSecret tells it; None if it is gone or scheduled for deletion."""
    try:
        described: dict[str, Any] = ctx.client("secretsmanager").describe_secret(SecretId=secret_id)
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    return None if described.get("DeletedDate") else described


def _secret_view(
    ctx: CloudContext, described: Mapping[str, Any], known: Mapping[str, Any]
) -> Props:
    tags = tags_of(described.get("Tags"))
    view: Props = {
        "arn": described["ARN"],
        "name": described["Name"],
        "description": described.get("Description", ""),
        "kmsKeyId": described.get("KmsKeyId", ""),
        "tags": tags,
        "tagsAll": tags,
    }
    if known.get("policy"):
        policy = ctx.client("secretsmanager").get_resource_policy(SecretId=described["ARN"])
        observed = policy.get("ResourcePolicy")
        view["policy"] = json_text(observed, known["policy"]) if observed else ""
    return view


def _create_secret(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, SECRET, inputs, _SECRET_INPUTS)
    name = inputs.get("name")
    if not name:  # the servicer's Check fills it from `namePrefix` or the logical name
        raise InvalidInput(f"{SECRET} needs a `name`; Check auto-names it when none is given")
    request: dict[str, Any] = {"Name": str(name)}
    if inputs.get("description"):
        request["Description"] = str(inputs["description"])
    if inputs.get("kmsKeyId"):
        request["KmsKeyId"] = str(inputs["kmsKeyId"])
    if inputs.get("tags"):
        request["Tags"] = tag_list(inputs["tags"])
    client = ctx.client("secretsmanager")
    arn = str(client.create_secret(**request)["ARN"])
    if inputs.get("policy"):
        client.put_resource_policy(SecretId=arn, ResourcePolicy=str(inputs["policy"]))
    described = client.describe_secret(SecretId=arn)
    return arn, keep_observed(_secret_view(ctx, described, inputs), inputs)


def _read_secret(ctx: CloudContext, id: str, state: Props) -> Props | None:
    described = _describe_secret(ctx, id)
    return None if described is None else keep_observed(_secret_view(ctx, described, state), state)


def _update_secret(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, SECRET, inputs, _SECRET_INPUTS)
    client = ctx.client("secretsmanager")
    if {"description", "kmsKeyId"} & changed:
        request: dict[str, Any] = {
            "SecretId": id,
            "Description": str(inputs.get("description") or ""),
        }
        if inputs.get("kmsKeyId"):
            request["KmsKeyId"] = str(inputs["kmsKeyId"])
        client.update_secret(**request)
    if "policy" in changed:
        if inputs.get("policy"):
            client.put_resource_policy(SecretId=id, ResourcePolicy=str(inputs["policy"]))
        else:
            client.delete_resource_policy(SecretId=id)
    if "tags" in changed:
        current = tags_of(client.describe_secret(SecretId=id).get("Tags"))
        upsert, remove = tag_changes(current, inputs)
        if remove:
            client.untag_resource(SecretId=id, TagKeys=remove)
        if upsert:
            client.tag_resource(SecretId=id, Tags=tag_list(upsert))
    described = client.describe_secret(SecretId=id)
    return keep_observed(_secret_view(ctx, described, inputs), inputs)


def _delete_secret(ctx: CloudContext, id: str, state: Props) -> None:
    window_input = state.get("recoveryWindowInDays")
    days = DEFAULT_RECOVERY_WINDOW_DAYS if window_input is None else int(window_input)
    # 0 deletes at once; otherwise the name stays reserved for the recovery window, as on AWS.
    window: dict[str, Any] = (
        {"ForceDeleteWithoutRecovery": True} if days == 0 else {"RecoveryWindowInDays": days}
    )
    try:
        ctx.client("secretsmanager").delete_secret(SecretId=id, **window)
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- aws:secretsmanager/secretVersion:SecretVersion (id = "<secret id>|<version id>") --------


def _split_version_id(id: str) -> tuple[str, str]:
    secret_id, _, version_id = id.rpartition("|")
    return secret_id, version_id


def _version_view(observed: Mapping[str, Any]) -> Props:
    binary = observed.get("SecretBinary")
    return {
        "arn": observed["ARN"],
        "secretArn": observed["ARN"],
        "versionId": observed["VersionId"],
        "versionStages": list(observed.get("VersionStages") or []),
        "secretString": observed.get("SecretString"),
        "secretBinary": base64.b64encode(binary).decode() if binary is not None else None,
    }


def _get_version(ctx: CloudContext, id: str) -> dict[str, Any] | None:
    secret_id, version_id = _split_version_id(id)
    try:
        found: dict[str, Any] = ctx.client("secretsmanager").get_secret_value(
            SecretId=secret_id, VersionId=version_id
        )
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    return found


def _create_secret_version(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, SECRET_VERSION, inputs, _SECRET_VERSION_INPUTS)
    secret_id = str(inputs["secretId"])
    request: dict[str, Any] = {"SecretId": secret_id}
    if inputs.get("secretString") is not None:
        request["SecretString"] = str(inputs["secretString"])
    elif inputs.get("secretBinary") is not None:
        request["SecretBinary"] = base64.b64decode(str(inputs["secretBinary"]))
    if inputs.get("versionStages"):
        request["VersionStages"] = [str(s) for s in inputs["versionStages"]]
    put = ctx.client("secretsmanager").put_secret_value(**request)
    observed = ctx.client("secretsmanager").get_secret_value(
        SecretId=secret_id, VersionId=put["VersionId"]
    )
    return f"{secret_id}|{put['VersionId']}", keep_observed(_version_view(observed), inputs)


def _read_secret_version(ctx: CloudContext, id: str, state: Props) -> Props | None:
    observed = _get_version(ctx, id)
    return None if observed is None else keep_observed(_version_view(observed), state)


def _stages_by_version(ctx: CloudContext, secret_id: str) -> dict[str, list[str]]:
    described = ctx.client("secretsmanager").describe_secret(SecretId=secret_id)
    return {str(k): list(v) for k, v in (described.get("VersionIdsToStages") or {}).items()}


def _update_secret_version(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, SECRET_VERSION, inputs, _SECRET_VERSION_INPUTS)
    secret_id, version_id = _split_version_id(id)
    client = ctx.client("secretsmanager")
    if "versionStages" in changed and inputs.get("versionStages") is not None:
        old = set(state.get("versionStages") or [])
        new = {str(s) for s in inputs["versionStages"]}
        holders = _stages_by_version(ctx, secret_id)
        for stage in sorted(new - old):
            holder = next((v for v, s in holders.items() if stage in s and v != version_id), None)
            moved = {"RemoveFromVersionId": holder} if holder else {}
            client.update_secret_version_stage(
                SecretId=secret_id, VersionStage=stage, MoveToVersionId=version_id, **moved
            )
        for stage in sorted(old - new - {CURRENT}):  # AWSCURRENT leaves only to another version
            client.update_secret_version_stage(
                SecretId=secret_id, VersionStage=stage, RemoveFromVersionId=version_id
            )
    observed = client.get_secret_value(SecretId=secret_id, VersionId=version_id)
    return keep_observed(_version_view(observed), inputs)


def _delete_secret_version(ctx: CloudContext, id: str, state: Props) -> None:
    """Take the version's staging labels off it, as pulumi-aws does; a version that still holds
    AWSCURRENT stays (only a newer version can take that label), and goes with its secret."""
    secret_id, version_id = _split_version_id(id)
    try:
        held = _stages_by_version(ctx, secret_id).get(version_id, [])
        for stage in sorted(set(held) & set(state.get("versionStages") or []) - {CURRENT}):
            ctx.client("secretsmanager").update_secret_version_stage(
                SecretId=secret_id, VersionStage=stage, RemoveFromVersionId=version_id
            )
    except ClientError as exc:
        if not _gone(exc):
            raise


def register(aws: Registry) -> None:
    """Add the Secrets Manager resource types to the local cloud's `aws` provider."""
    aws.add(
        ResourceType(
            token=SECRET,
            create=_create_secret,
            read=_read_secret,
            update=_update_secret,
            delete=_delete_secret,
            force_new=frozenset({"name", "namePrefix", "region", "type"}),
            computed=("arn", "tagsAll"),
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=NAME_MAX,
            drift_inputs=frozenset({"tags"}),
        ),
        ResourceType(
            token=SECRET_VERSION,
            create=_create_secret_version,
            read=_read_secret_version,
            update=_update_secret_version,
            delete=_delete_secret_version,
            force_new=frozenset({"secretId", "secretString", "secretBinary", "region"}),
            computed=("arn", "secretArn", "versionId", "versionStages"),
        ),
    )
