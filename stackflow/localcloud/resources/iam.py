"""IAM roles, their policy attachments and inline policies, and the caller's identity, of the
local cloud's aws provider.

Ids follow pulumi-aws: a role's id is its name, an attachment's `<role>/<policy ARN>`, an inline
policy's `<role>:<policy name>`. Policy documents read back as the state's own JSON text while
the cloud's document means the same (AWS reformats them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, tag_list
from stackflow.localcloud.resources._declared import Answer, Shape
from stackflow.localcloud.resources._iam_common import GONE, document, iam_tagging
from stackflow.localcloud.resources._shared import input_tags, json_text, timestamp

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

ROLE = "aws:iam/role:Role"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
CALLER_IDENTITY = "aws:index/getCallerIdentity:getCallerIdentity"


# --- role -----------------------------------------------------------------------------------


def _role_outputs(role: Answer, ctx: CloudContext) -> Props:
    return {
        "arn": role["Arn"],
        "uniqueId": role["RoleId"],
        "createDate": timestamp(role.get("CreateDate")),
    }


def _role_create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "RoleName": inputs["name"],
        "AssumeRolePolicyDocument": document(inputs["assumeRolePolicy"]),
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
    if input_tags(inputs):
        kwargs["Tags"] = tag_list(input_tags(inputs))
    return str(iam.create_role(**kwargs)["Role"]["RoleName"])


def _role_observed(role: Answer, state: Props) -> Props:
    return {
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


def _role_update(iam: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    if changed & {"description", "maxSessionDuration"}:
        kwargs: dict[str, Any] = {"RoleName": id, "Description": inputs.get("description") or ""}
        if inputs.get("maxSessionDuration") is not None:
            kwargs["MaxSessionDuration"] = int(inputs["maxSessionDuration"])
        iam.update_role(**kwargs)
    if "assumeRolePolicy" in changed:
        iam.update_assume_role_policy(
            RoleName=id, PolicyDocument=document(inputs["assumeRolePolicy"])
        )
    if "permissionsBoundary" in changed:
        if inputs.get("permissionsBoundary"):
            iam.put_role_permissions_boundary(
                RoleName=id, PermissionsBoundary=str(inputs["permissionsBoundary"])
            )
        else:
            iam.delete_role_permissions_boundary(RoleName=id)


def _role_delete(iam: Any, id: str, state: Props) -> None:
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


ROLE_SHAPE = Shape(
    token=ROLE,
    service="iam",
    inputs=(
        "name",
        "namePrefix",
        "assumeRolePolicy",
        "description",
        "path",
        "maxSessionDuration",
        "permissionsBoundary",
        "forceDetachPolicies",
        "tags",
    ),
    create=_role_create,
    describe=lambda iam, name, state: iam.get_role(RoleName=name)["Role"],
    gone=GONE,
    outputs=_role_outputs,
    observed=_role_observed,
    update=_role_update,
    delete=_role_delete,
    tagging=iam_tagging("role", "RoleName"),
    computed=("arn", "uniqueId", "createDate"),
)


# --- role policy attachment and inline role policy ---------------------------------------------


def _attachment_create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
    role, policy_arn = str(inputs["role"]), str(inputs["policyArn"])
    iam.attach_role_policy(RoleName=role, PolicyArn=policy_arn)
    return f"{role}/{policy_arn}"


def _attachment_describe(iam: Any, id: str, state: Props) -> Answer | None:
    role, _, policy_arn = id.partition("/")
    role, policy_arn = str(state.get("role") or role), str(state.get("policyArn") or policy_arn)
    for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=role):
        if any(p["PolicyArn"] == policy_arn for p in page["AttachedPolicies"]):
            return {"role": role, "policyArn": policy_arn}
    return None


ATTACHMENT = Shape(
    token=ROLE_POLICY_ATTACHMENT,
    service="iam",
    inputs=("role", "policyArn"),
    create=_attachment_create,
    describe=_attachment_describe,
    gone=GONE,
    outputs=lambda found, ctx: {},
    observed=lambda found, state: dict(found),
    delete=lambda iam, id, state: iam.detach_role_policy(
        RoleName=state["role"], PolicyArn=state["policyArn"]
    ),
)


def _role_policy_put(iam: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    role, name = str(inputs["role"]), str(inputs["name"])
    iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=document(inputs["policy"]))
    return f"{role}:{name}"


def _role_policy_describe(iam: Any, id: str, state: Props) -> Answer:
    role, _, name = id.partition(":")
    return dict(
        iam.get_role_policy(
            RoleName=str(state.get("role") or role), PolicyName=str(state.get("name") or name)
        )
    )


ROLE_POLICY_SHAPE = Shape(
    token=ROLE_POLICY,
    service="iam",
    inputs=("name", "namePrefix", "role", "policy"),
    create=_role_policy_put,
    describe=_role_policy_describe,
    gone=GONE,
    outputs=lambda found, ctx: {},
    observed=lambda found, state: {
        "role": found["RoleName"],
        "name": found["PolicyName"],
        "policy": json_text(found.get("PolicyDocument"), state.get("policy")),
    },
    update=lambda iam, id, state, inputs, changed: _role_policy_put(iam, inputs),
    delete=lambda iam, id, state: iam.delete_role_policy(
        RoleName=state["role"], PolicyName=state["name"]
    ),
)


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
        ROLE_SHAPE.type(
            force_new={"name", "namePrefix", "path"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=64,
            defaults={"path": "/", "maxSessionDuration": 3600, "forceDetachPolicies": False},
        ),
        ATTACHMENT.type(),
        ROLE_POLICY_SHAPE.type(
            force_new={"name", "namePrefix", "role"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=128,
        ),
    )
    aws.function(CALLER_IDENTITY)(_caller_identity)
