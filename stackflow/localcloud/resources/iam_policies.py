"""IAM managed policies, their attachments to users and groups, and instance profiles in the local
cloud's aws provider. Ids follow pulumi-aws: a managed policy's id is its ARN, an instance
profile's its name, an attachment's `<user or group>-<random>` (here `<user or group>/<policy
ARN>`, which pulumi-aws never reads back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, tag_list
from stackflow.localcloud.resources._declared import Answer, Shape
from stackflow.localcloud.resources._iam_common import GONE, document, iam_tagging
from stackflow.localcloud.resources._shared import input_tags, json_text, timestamp

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

POLICY = "aws:iam/policy:Policy"
USER_POLICY_ATTACHMENT = "aws:iam/userPolicyAttachment:UserPolicyAttachment"
GROUP_POLICY_ATTACHMENT = "aws:iam/groupPolicyAttachment:GroupPolicyAttachment"
INSTANCE_PROFILE = "aws:iam/instanceProfile:InstanceProfile"
MAX_POLICY_VERSIONS = 5  # IAM keeps at most five versions of a managed policy


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
    tagging=iam_tagging("policy", "PolicyArn", by="arn"),
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
    tagging=iam_tagging("instance_profile", "InstanceProfileName", listed="get_instance_profile"),
    computed=("arn", "uniqueId", "createDate"),
)


def register(aws: Registry) -> None:
    """Add the IAM managed policy, policy attachment and instance profile types."""
    aws.add(
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
