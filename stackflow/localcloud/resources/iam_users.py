"""IAM users, groups, access keys, managed policies, instance profiles and the attachments and
memberships between them, in the local cloud's aws provider. Ids follow pulumi-aws: a user's,
group's and instance profile's id is its name, a managed policy's its ARN, an access key's its
key id, an attachment's `<user or group>-<random>` (here `<user or group>/<policy ARN>`, which
pulumi-aws never reads back), a group membership's its own name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, tag_list
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._iam_common import GONE, document
from stackflow.localcloud.resources._shared import input_tags, json_text, same_members, timestamp

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

USER = "aws:iam/user:User"
GROUP = "aws:iam/group:Group"
ACCESS_KEY = "aws:iam/accessKey:AccessKey"
POLICY = "aws:iam/policy:Policy"
USER_POLICY_ATTACHMENT = "aws:iam/userPolicyAttachment:UserPolicyAttachment"
GROUP_POLICY_ATTACHMENT = "aws:iam/groupPolicyAttachment:GroupPolicyAttachment"
GROUP_MEMBERSHIP = "aws:iam/groupMembership:GroupMembership"
INSTANCE_PROFILE = "aws:iam/instanceProfile:InstanceProfile"
MAX_POLICY_VERSIONS = 5  # IAM keeps at most five versions of a managed policy


def _tagging(kind: str, key: str, by: str = "id", listed: str | None = None) -> Tagging:
    return Tagging(
        listed or f"list_{kind}_tags",
        f"tag_{kind}",
        f"untag_{kind}",
        key=key,
        by=by,
        field="Tags",
        keys="TagKeys",
        item=KEY_VALUE,
        answer="InstanceProfile.Tags" if listed else None,
    )


def _named_outputs(id_field: str) -> Any:
    def outputs(found: Answer, ctx: CloudContext) -> Props:
        return {"arn": found["Arn"], "uniqueId": found[id_field]}

    return outputs


# --- users ----------------------------------------------------------------------------------


def _user_create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "UserName": str(inputs["name"]),
        "Path": str(inputs.get("path") or "/"),
    }
    if inputs.get("permissionsBoundary"):
        kwargs["PermissionsBoundary"] = str(inputs["permissionsBoundary"])
    if input_tags(inputs):
        kwargs["Tags"] = tag_list(input_tags(inputs))
    return str(iam.create_user(**kwargs)["User"]["UserName"])


def _user_delete(iam: Any, name: str, state: Props) -> None:
    if state.get("forceDestroy"):  # as pulumi-aws: what hangs off the user goes first
        for key in iam.list_access_keys(UserName=name)["AccessKeyMetadata"]:
            iam.delete_access_key(UserName=name, AccessKeyId=key["AccessKeyId"])
        for policy in iam.list_attached_user_policies(UserName=name)["AttachedPolicies"]:
            iam.detach_user_policy(UserName=name, PolicyArn=policy["PolicyArn"])
        for policy_name in iam.list_user_policies(UserName=name)["PolicyNames"]:
            iam.delete_user_policy(UserName=name, PolicyName=policy_name)
        for group in iam.list_groups_for_user(UserName=name)["Groups"]:
            iam.remove_user_from_group(UserName=name, GroupName=group["GroupName"])
    iam.delete_user(UserName=name)


USER_SHAPE = Shape(
    token=USER,
    service="iam",
    inputs=("name", "path", "permissionsBoundary", "forceDestroy", "tags"),
    create=_user_create,
    describe=lambda iam, name, state: iam.get_user(UserName=name)["User"],
    gone=GONE,
    outputs=_named_outputs("UserId"),
    observed=lambda user, state: {"name": user["UserName"], "path": user.get("Path")},
    update=lambda iam, name, state, inputs, changed: iam.update_user(
        UserName=name, NewPath=str(inputs.get("path") or "/")
    ),
    delete=_user_delete,
    tagging=_tagging("user", "UserName"),
    computed=("arn", "uniqueId"),
)


# --- groups ---------------------------------------------------------------------------------


def _group_create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
    iam.create_group(GroupName=str(inputs["name"]), Path=str(inputs.get("path") or "/"))
    return str(inputs["name"])


GROUP_SHAPE = Shape(
    token=GROUP,
    service="iam",
    inputs=("name", "path"),
    create=_group_create,
    describe=lambda iam, name, state: iam.get_group(GroupName=name)["Group"],
    gone=GONE,
    outputs=_named_outputs("GroupId"),
    observed=lambda group, state: {"name": group["GroupName"], "path": group.get("Path")},
    update=lambda iam, name, state, inputs, changed: iam.update_group(
        GroupName=name, NewPath=str(inputs.get("path") or "/")
    ),
    delete=lambda iam, name, state: iam.delete_group(GroupName=name),
    computed=("arn", "uniqueId"),
)


def _members_describe(iam: Any, name: str, state: Props) -> Answer | None:
    users = [u["UserName"] for u in iam.get_group(GroupName=str(state["group"]))["Users"]]
    held = [u for u in users if u in (state.get("users") or [])]
    return {"group": state["group"], "users": held} if held else None  # none left: gone


def _members_set(iam: Any, name: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    group, old = str(inputs["group"]), set(state.get("users") or [])
    new = {str(u) for u in inputs.get("users") or []}
    for user in sorted(new - old):
        iam.add_user_to_group(GroupName=group, UserName=user)
    for user in sorted(old - new):
        iam.remove_user_from_group(GroupName=group, UserName=user)


def _members_create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
    _members_set(iam, str(inputs["name"]), {}, inputs, frozenset())
    return str(inputs["name"])


MEMBERSHIP_SHAPE = Shape(
    token=GROUP_MEMBERSHIP,
    service="iam",
    inputs=("name", "group", "users"),
    create=_members_create,
    describe=_members_describe,
    gone=GONE,
    outputs=lambda found, ctx: {},
    observed=lambda found, state: {
        "users": same_members(list(found["users"]), state.get("users")),
    },
    update=_members_set,
    delete=lambda iam, name, state: _members_set(
        iam, name, state, {**state, "users": []}, frozenset()
    ),
)


# --- access keys ----------------------------------------------------------------------------


def _key_create(iam: Any, inputs: Props, ctx: CloudContext) -> tuple[str, Props]:
    key = iam.create_access_key(UserName=str(inputs["user"]))["AccessKey"]
    if inputs.get("status") == "Inactive":
        iam.update_access_key(
            UserName=inputs["user"], AccessKeyId=key["AccessKeyId"], Status="Inactive"
        )
    # The secret is told once, by CreateAccessKey (the SDK marks the output secret).
    return str(key["AccessKeyId"]), {"secret": str(key["SecretAccessKey"])}


def _key_describe(iam: Any, key_id: str, state: Props) -> Answer | None:
    keys = iam.list_access_keys(UserName=str(state["user"]))["AccessKeyMetadata"]
    return next((dict(k) for k in keys if k["AccessKeyId"] == key_id), None)


def _key_outputs(key: Answer, ctx: CloudContext) -> Props:
    return {"createDate": timestamp(key.get("CreateDate"))}


ACCESS_KEY_SHAPE = Shape(
    token=ACCESS_KEY,
    service="iam",
    inputs=("user", "status"),
    create=_key_create,
    describe=_key_describe,
    gone=GONE,
    outputs=_key_outputs,
    observed=lambda key, state: {"user": key["UserName"], "status": key.get("Status")},
    update=lambda iam, key_id, state, inputs, changed: iam.update_access_key(
        UserName=str(inputs["user"]),
        AccessKeyId=key_id,
        Status=str(inputs.get("status") or "Active"),
    ),
    delete=lambda iam, key_id, state: iam.delete_access_key(
        UserName=str(state["user"]), AccessKeyId=key_id
    ),
    computed=("createDate", "secret"),
)


# --- managed policies -----------------------------------------------------------------------


def _policy_create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "PolicyName": str(inputs["name"]),
        "Path": str(inputs.get("path") or "/"),
        "PolicyDocument": document(inputs["policy"]),
    }
    if inputs.get("description"):
        kwargs["Description"] = str(inputs["description"])
    if input_tags(inputs):
        kwargs["Tags"] = tag_list(input_tags(inputs))
    return str(iam.create_policy(**kwargs)["Policy"]["Arn"])


def _policy_describe(iam: Any, arn: str, state: Props) -> Answer:
    policy = iam.get_policy(PolicyArn=arn)["Policy"]
    version = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])
    return {**policy, "Document": version["PolicyVersion"]["Document"]}


def _policy_update(
    iam: Any, arn: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    if "policy" not in changed:
        return
    versions = iam.list_policy_versions(PolicyArn=arn)["Versions"]
    if len(versions) >= MAX_POLICY_VERSIONS:  # as pulumi-aws: the oldest non-default version goes
        oldest = min(
            (v for v in versions if not v["IsDefaultVersion"]), key=lambda v: v["CreateDate"]
        )
        iam.delete_policy_version(PolicyArn=arn, VersionId=oldest["VersionId"])
    iam.create_policy_version(
        PolicyArn=arn, PolicyDocument=document(inputs["policy"]), SetAsDefault=True
    )


def _policy_delete(iam: Any, arn: str, state: Props) -> None:
    for version in iam.list_policy_versions(PolicyArn=arn)["Versions"]:
        if not version["IsDefaultVersion"]:
            iam.delete_policy_version(PolicyArn=arn, VersionId=version["VersionId"])
    iam.delete_policy(PolicyArn=arn)


POLICY_SHAPE = Shape(
    token=POLICY,
    service="iam",
    inputs=("name", "namePrefix", "path", "description", "policy", "tags"),
    create=_policy_create,
    describe=_policy_describe,
    gone=GONE,
    outputs=lambda policy, ctx: {
        "arn": policy["Arn"],
        "policyId": policy["PolicyId"],
        "attachmentCount": int(policy.get("AttachmentCount") or 0),
    },
    observed=lambda policy, state: {
        "name": policy["PolicyName"],
        "path": policy.get("Path"),
        "description": policy.get("Description", ""),
        "policy": json_text(policy["Document"], state.get("policy")),
    },
    update=_policy_update,
    delete=_policy_delete,
    tagging=_tagging("policy", "PolicyArn", by="arn"),
    computed=("arn", "policyId", "attachmentCount"),
)


# --- policy attachments to users and groups -------------------------------------------------


def _attachment(kind: str, token: str) -> Shape:
    """A managed policy attached to a user or a group (`kind`), id `<name>/<policy ARN>`."""
    title = kind.title()

    def create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
        getattr(iam, f"attach_{kind}_policy")(
            **{f"{title}Name": str(inputs[kind]), "PolicyArn": str(inputs["policyArn"])}
        )
        return f"{inputs[kind]}/{inputs['policyArn']}"

    def describe(iam: Any, id: str, state: Props) -> Answer | None:
        listed = getattr(iam, f"list_attached_{kind}_policies")(**{f"{title}Name": state[kind]})
        arns = [p["PolicyArn"] for p in listed["AttachedPolicies"]]
        return (
            {kind: state[kind], "policyArn": state["policyArn"]}
            if state["policyArn"] in arns
            else None
        )

    return Shape(
        token=token,
        service="iam",
        inputs=(kind, "policyArn"),
        create=create,
        describe=describe,
        gone=GONE,
        outputs=lambda found, ctx: {},
        observed=lambda found, state: dict(found),
        delete=lambda iam, id, state: getattr(iam, f"detach_{kind}_policy")(
            **{f"{title}Name": str(state[kind]), "PolicyArn": str(state["policyArn"])}
        ),
    )


# --- instance profiles ----------------------------------------------------------------------


def _profile_create(iam: Any, inputs: Props, ctx: CloudContext) -> str:
    name = str(inputs["name"])
    kwargs: dict[str, Any] = {"InstanceProfileName": name, "Path": str(inputs.get("path") or "/")}
    if input_tags(inputs):
        kwargs["Tags"] = tag_list(input_tags(inputs))
    iam.create_instance_profile(**kwargs)
    if inputs.get("role"):
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=str(inputs["role"]))
    return name


def _profile_update(
    iam: Any, name: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    if "role" in changed:
        if state.get("role"):
            iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=state["role"])
        if inputs.get("role"):
            iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=str(inputs["role"]))


def _profile_delete(iam: Any, name: str, state: Props) -> None:
    profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    for role in profile.get("Roles", []):
        iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role["RoleName"])
    iam.delete_instance_profile(InstanceProfileName=name)


PROFILE_SHAPE = Shape(
    token=INSTANCE_PROFILE,
    service="iam",
    inputs=("name", "namePrefix", "path", "role", "tags"),
    create=_profile_create,
    describe=lambda iam, name, state: iam.get_instance_profile(InstanceProfileName=name)[
        "InstanceProfile"
    ],
    gone=GONE,
    outputs=lambda profile, ctx: {
        "arn": profile["Arn"],
        "uniqueId": profile["InstanceProfileId"],
        "createDate": timestamp(profile.get("CreateDate")),
    },
    observed=lambda profile, state: {
        "name": profile["InstanceProfileName"],
        "path": profile.get("Path"),
        "role": next((r["RoleName"] for r in profile.get("Roles", [])), ""),
    },
    update=_profile_update,
    delete=_profile_delete,
    # moto 5.2.5 has no ListInstanceProfileTags; GetInstanceProfile tells them too.
    tagging=_tagging("instance_profile", "InstanceProfileName", listed="get_instance_profile"),
    computed=("arn", "uniqueId", "createDate"),
)


def register(aws: Registry) -> None:
    """Add the IAM user, group, access key, managed policy, attachment, membership and
    instance profile types."""
    aws.add(
        USER_SHAPE.type(
            force_new={"name"},
            auto_name="name",
            auto_name_max=64,
            defaults={"path": "/", "forceDestroy": False},
        ),
        GROUP_SHAPE.type(
            force_new={"name"}, auto_name="name", auto_name_max=128, defaults={"path": "/"}
        ),
        MEMBERSHIP_SHAPE.type(force_new={"name", "group"}, auto_name="name"),
        ACCESS_KEY_SHAPE.type(force_new={"user"}, defaults={"status": "Active"}),
        POLICY_SHAPE.type(
            force_new={"name", "namePrefix", "path", "description"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=128,
            defaults={"path": "/"},
        ),
        _attachment("user", USER_POLICY_ATTACHMENT).type(),
        _attachment("group", GROUP_POLICY_ATTACHMENT).type(),
        PROFILE_SHAPE.type(
            force_new={"name", "namePrefix", "path"},
            auto_name="name",
            name_prefix="namePrefix",
            auto_name_max=128,
            defaults={"path": "/"},
        ),
    )
