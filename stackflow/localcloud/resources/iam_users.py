"""IAM users, groups, group memberships and access keys in the local cloud's aws provider
(managed policies, their attachments and instance profiles are `iam_policies`). Ids follow
pulumi-aws: a user's and group's id is its name, an access key's its key id, a group
membership's its own name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, tag_list
from stackflow.localcloud.resources._declared import Answer, Shape
from stackflow.localcloud.resources._iam_common import GONE, iam_tagging
from stackflow.localcloud.resources._shared import input_tags, same_members, timestamp

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

USER = "aws:iam/user:User"
GROUP = "aws:iam/group:Group"
ACCESS_KEY = "aws:iam/accessKey:AccessKey"
GROUP_MEMBERSHIP = "aws:iam/groupMembership:GroupMembership"


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
    tagging=iam_tagging("user", "UserName"),
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


def register(aws: Registry) -> None:
    """Add the IAM user, group, membership and access key types."""
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
    )
