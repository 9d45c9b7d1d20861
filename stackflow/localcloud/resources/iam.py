"""IAM roles, their policy attachments and inline policies, and the caller's identity, of the
local cloud's aws provider.

Ids follow pulumi-aws: a role's id is its name, an attachment's `<role>/<policy ARN>`, an inline
policy's `<role>:<policy name>`. Policy documents read back as the state's own JSON text while
the cloud's document means the same (AWS reformats them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
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

ROLE = "aws:iam/role:Role"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
CALLER_IDENTITY = "aws:index/getCallerIdentity:getCallerIdentity"

NO_SUCH_ENTITY = "NoSuchEntity"


def _document(value: Any) -> str:
    """A policy document input as AWS takes it: JSON text (pulumi-aws also accepts a dict)."""
    return value if isinstance(value, str) else json.dumps(value)


def _timestamp(value: Any) -> str:
    # pulumi-aws reports IAM dates as RFC 3339 in UTC, to the second.
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


# --- role -----------------------------------------------------------------------------------

_ROLE_INPUTS = {
    "name",
    "namePrefix",
    "assumeRolePolicy",
    "description",
    "path",
    "maxSessionDuration",
    "permissionsBoundary",
    "forceDetachPolicies",
    "tags",
}


def _role_outputs(role: Mapping[str, Any]) -> Props:
    return {
        "arn": role["Arn"],
        "uniqueId": role["RoleId"],
        "createDate": _timestamp(role.get("CreateDate")),
    }


def _role_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, ROLE, inputs, _ROLE_INPUTS)
    kwargs: dict[str, Any] = {
        "RoleName": inputs["name"],
        "AssumeRolePolicyDocument": _document(inputs["assumeRolePolicy"]),
    }
    for key, api in (
        ("path", "Path"),
        ("description", "Description"),
        ("permissionsBoundary", "PermissionsBoundary"),
    ):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    if inputs.get("maxSessionDuration") is not None:
        kwargs["MaxSessionDuration"] = int(inputs["maxSessionDuration"])
    tags = input_tags(inputs)
    if tags:
        kwargs["Tags"] = tag_list(tags)
    role = ctx.client("iam").create_role(**kwargs)["Role"]
    return str(role["RoleName"]), {**_role_outputs(role), "tagsAll": tags}


def _role_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        role = ctx.client("iam").get_role(RoleName=id)["Role"]
    except ClientError as exc:
        if error_code(exc) == NO_SUCH_ENTITY:
            return None
        raise
    observed: Props = {
        "name": role.get("RoleName"),
        "path": role.get("Path"),
        "description": role.get("Description", ""),
        "maxSessionDuration": role.get("MaxSessionDuration"),
        "permissionsBoundary": (role.get("PermissionsBoundary") or {}).get(
            "PermissionsBoundaryArn", ""
        ),
        "assumeRolePolicy": json_text(
            role.get("AssumeRolePolicyDocument"), state.get("assumeRolePolicy")
        ),
    }
    return {
        **observe(state, observed),
        **_role_outputs(role),
        **tag_outputs(state, tags_of(role.get("Tags"))),
    }


def _role_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, ROLE, inputs, _ROLE_INPUTS)
    iam = ctx.client("iam")
    if changed & {"description", "maxSessionDuration"}:
        kwargs: dict[str, Any] = {"RoleName": id, "Description": inputs.get("description") or ""}
        if inputs.get("maxSessionDuration") is not None:
            kwargs["MaxSessionDuration"] = int(inputs["maxSessionDuration"])
        iam.update_role(**kwargs)
    if "assumeRolePolicy" in changed:
        iam.update_assume_role_policy(
            RoleName=id, PolicyDocument=_document(inputs["assumeRolePolicy"])
        )
    if "permissionsBoundary" in changed:
        if inputs.get("permissionsBoundary"):
            iam.put_role_permissions_boundary(
                RoleName=id, PermissionsBoundary=str(inputs["permissionsBoundary"])
            )
        else:
            iam.delete_role_permissions_boundary(RoleName=id)
    current: dict[str, str] = {}
    for page in iam.get_paginator("list_role_tags").paginate(RoleName=id):
        current.update(tags_of(page["Tags"]))
    upsert, remove = tag_changes(current, inputs)
    if remove:
        iam.untag_role(RoleName=id, TagKeys=remove)
    if upsert:
        iam.tag_role(RoleName=id, Tags=tag_list(upsert))
    return {**kept(state, ("arn", "uniqueId", "createDate")), "tagsAll": input_tags(inputs)}


def _role_delete(ctx: CloudContext, id: str, state: Props) -> None:
    iam = ctx.client("iam")
    try:
        if state.get("forceDetachPolicies"):
            for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=id):
                for policy in page["AttachedPolicies"]:
                    iam.detach_role_policy(RoleName=id, PolicyArn=policy["PolicyArn"])
            for page in iam.get_paginator("list_role_policies").paginate(RoleName=id):
                for name in page["PolicyNames"]:
                    iam.delete_role_policy(RoleName=id, PolicyName=name)
        # As pulumi-aws does: a role still in an instance profile cannot be deleted.
        for page in iam.get_paginator("list_instance_profiles_for_role").paginate(RoleName=id):
            for profile in page["InstanceProfiles"]:
                iam.remove_role_from_instance_profile(
                    InstanceProfileName=profile["InstanceProfileName"], RoleName=id
                )
        iam.delete_role(RoleName=id)
    except ClientError as exc:
        if error_code(exc) != NO_SUCH_ENTITY:
            raise


# --- role policy attachment -----------------------------------------------------------------


def _attachment_key(id: str, state: Props) -> tuple[str, str]:
    role, _, policy_arn = id.partition("/")
    return str(state.get("role") or role), str(state.get("policyArn") or policy_arn)


def _attachment_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, ROLE_POLICY_ATTACHMENT, inputs, {"role", "policyArn"})
    role, policy_arn = str(inputs["role"]), str(inputs["policyArn"])
    ctx.client("iam").attach_role_policy(RoleName=role, PolicyArn=policy_arn)
    return f"{role}/{policy_arn}", {}


def _attachment_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    role, policy_arn = _attachment_key(id, state)
    iam = ctx.client("iam")
    try:
        for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=role):
            if any(p["PolicyArn"] == policy_arn for p in page["AttachedPolicies"]):
                return {"role": role, "policyArn": policy_arn}
    except ClientError as exc:
        if error_code(exc) == NO_SUCH_ENTITY:
            return None
        raise
    return None


def _attachment_delete(ctx: CloudContext, id: str, state: Props) -> None:
    role, policy_arn = _attachment_key(id, state)
    try:
        ctx.client("iam").detach_role_policy(RoleName=role, PolicyArn=policy_arn)
    except ClientError as exc:
        if error_code(exc) != NO_SUCH_ENTITY:
            raise


# --- role policy (inline) -------------------------------------------------------------------


def _role_policy_key(id: str, state: Props) -> tuple[str, str]:
    role, _, name = id.partition(":")
    return str(state.get("role") or role), str(state.get("name") or name)


def _role_policy_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, ROLE_POLICY, inputs, {"name", "namePrefix", "role", "policy"})
    role, name = str(inputs["role"]), str(inputs["name"])
    ctx.client("iam").put_role_policy(
        RoleName=role, PolicyName=name, PolicyDocument=_document(inputs["policy"])
    )
    return f"{role}:{name}", {}


def _role_policy_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    role, name = _role_policy_key(id, state)
    try:
        found = ctx.client("iam").get_role_policy(RoleName=role, PolicyName=name)
    except ClientError as exc:
        if error_code(exc) == NO_SUCH_ENTITY:
            return None
        raise
    return {
        "role": found.get("RoleName", role),
        "name": found.get("PolicyName", name),
        "policy": json_text(found.get("PolicyDocument"), state.get("policy")),
    }


def _role_policy_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, ROLE_POLICY, inputs, {"name", "namePrefix", "role", "policy"})
    role, name = _role_policy_key(id, state)
    ctx.client("iam").put_role_policy(
        RoleName=role, PolicyName=name, PolicyDocument=_document(inputs["policy"])
    )
    return {}


def _role_policy_delete(ctx: CloudContext, id: str, state: Props) -> None:
    role, name = _role_policy_key(id, state)
    try:
        ctx.client("iam").delete_role_policy(RoleName=role, PolicyName=name)
    except ClientError as exc:
        if error_code(exc) != NO_SUCH_ENTITY:
            raise


def _caller_identity(ctx: CloudContext, args: Props) -> Props:
    """aws.get_caller_identity(): the local cloud's account, in pulumi-aws's result shape."""
    found = ctx.client("sts").get_caller_identity()
    return {
        "accountId": found["Account"],
        "arn": found["Arn"],
        "userId": found["UserId"],
        "id": found["Account"],
    }


def register(aws: Registry) -> None:
    """Add the IAM role, attachment and inline policy types and getCallerIdentity."""
    aws.add(
        ResourceType(
            token=ROLE,
            create=_role_create,
            read=_role_read,
            update=_role_update,
            delete=_role_delete,
            force_new=frozenset({"name", "namePrefix", "path"}),
            computed=("arn", "uniqueId", "createDate", "tagsAll"),
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=64,
            drift_inputs=frozenset({"tags"}),
            defaults={"path": "/", "maxSessionDuration": 3600, "forceDetachPolicies": False},
        ),
        ResourceType(
            token=ROLE_POLICY_ATTACHMENT,
            create=_attachment_create,
            read=_attachment_read,
            delete=_attachment_delete,
            force_new=frozenset({"role", "policyArn"}),
        ),
        ResourceType(
            token=ROLE_POLICY,
            create=_role_policy_create,
            read=_role_policy_read,
            update=_role_policy_update,
            delete=_role_policy_delete,
            force_new=frozenset({"name", "namePrefix", "role"}),
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=128,
        ),
    )
    aws.function(CALLER_IDENTITY)(_caller_identity)
