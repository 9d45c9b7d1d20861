"""ECR repositories and their lifecycle policies in the local cloud (no image registry: pushing
images is not served). Ids follow pulumi-aws: a repository's id is its name, a lifecycle
policy's the repository's name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    json_text,
    observe,
    refuse_unserved,
    tag_changes,
    tag_outputs,
    unless_gone,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

REPOSITORY = "aws:ecr/repository:Repository"
LIFECYCLE_POLICY = "aws:ecr/lifecyclePolicy:LifecyclePolicy"
_GONE = ("RepositoryNotFoundException", "LifecyclePolicyNotFoundException")
_REPOSITORY_INPUTS = (
    "name",
    "imageTagMutability",
    "imageScanningConfiguration",
    "encryptionConfigurations",
    "forceDelete",
    "tags",
)


def _ecr(ctx: CloudContext) -> Any:
    return ctx.client("ecr")


def _outputs(repository: dict[str, Any]) -> Props:
    return {
        "arn": repository["repositoryArn"],
        "registryId": repository["registryId"],
        "repositoryUrl": repository["repositoryUri"],
    }


def _describe(ctx: CloudContext, name: str) -> dict[str, Any] | None:
    try:
        found = _ecr(ctx).describe_repositories(repositoryNames=[name])["repositories"]
    except ClientError as exc:
        if error_code(exc) in _GONE:
            return None
        raise
    return dict(found[0]) if found else None


def _create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, REPOSITORY, inputs, _REPOSITORY_INPUTS)
    kwargs: dict[str, Any] = {
        "repositoryName": str(inputs["name"]),
        "imageTagMutability": str(inputs.get("imageTagMutability") or "MUTABLE"),
    }
    scanning = inputs.get("imageScanningConfiguration")
    if scanning:
        kwargs["imageScanningConfiguration"] = {"scanOnPush": bool(scanning.get("scanOnPush"))}
    encryption = inputs.get("encryptionConfigurations") or []
    if encryption:
        config = {"encryptionType": str(encryption[0].get("encryptionType") or "AES256")}
        if encryption[0].get("kmsKey"):
            config["kmsKey"] = str(encryption[0]["kmsKey"])
        kwargs["encryptionConfiguration"] = config
    tags = input_tags(inputs)
    if tags:
        kwargs["tags"] = tag_list(tags)
    repository = _ecr(ctx).create_repository(**kwargs)["repository"]
    return str(repository["repositoryName"]), {**_outputs(repository), "tagsAll": tags}


def _read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    repository = _describe(ctx, id)
    if repository is None:
        return None
    scanning = repository.get("imageScanningConfiguration") or {}
    observed: Props = {
        "name": repository["repositoryName"],
        "imageTagMutability": repository.get("imageTagMutability"),
        "imageScanningConfiguration": {"scanOnPush": bool(scanning.get("scanOnPush"))},
    }
    tags = tags_of(
        _ecr(ctx).list_tags_for_resource(resourceArn=repository["repositoryArn"]).get("tags")
    )
    return {**observe(state, observed), **_outputs(repository), **tag_outputs(state, tags)}


def _update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, REPOSITORY, inputs, _REPOSITORY_INPUTS)
    ecr = _ecr(ctx)
    if "imageTagMutability" in changed:
        ecr.put_image_tag_mutability(
            repositoryName=id, imageTagMutability=str(inputs.get("imageTagMutability") or "MUTABLE")
        )
    if "imageScanningConfiguration" in changed:
        scanning = inputs.get("imageScanningConfiguration") or {}
        ecr.put_image_scanning_configuration(
            repositoryName=id,
            imageScanningConfiguration={"scanOnPush": bool(scanning.get("scanOnPush"))},
        )
    repository = _describe(ctx, id)
    arn = str(repository["repositoryArn"]) if repository else str(state.get("arn"))
    current = tags_of(ecr.list_tags_for_resource(resourceArn=arn).get("tags"))
    upsert, remove = tag_changes(current, inputs)
    if remove:
        ecr.untag_resource(resourceArn=arn, tagKeys=remove)
    if upsert:
        ecr.tag_resource(resourceArn=arn, tags=tag_list(upsert))
    outputs = _outputs(repository) if repository else {}
    return {**outputs, "tagsAll": input_tags(inputs)}


def _delete(ctx: CloudContext, id: str, state: Props) -> None:
    with unless_gone(_GONE):
        # Images left in it: RepositoryNotEmptyException, in AWS's words (unless forceDelete).
        _ecr(ctx).delete_repository(repositoryName=id, force=bool(state.get("forceDelete")))


def _policy_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, LIFECYCLE_POLICY, inputs, ("repository", "policy"))
    answer = _ecr(ctx).put_lifecycle_policy(
        repositoryName=str(inputs["repository"]), lifecyclePolicyText=str(inputs["policy"])
    )
    return str(inputs["repository"]), {"registryId": answer["registryId"]}


def _policy_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        found = _ecr(ctx).get_lifecycle_policy(repositoryName=id)
    except ClientError as exc:
        if error_code(exc) in _GONE:
            return None
        raise
    return {
        "repository": found["repositoryName"],
        "registryId": found["registryId"],
        "policy": json_text(found["lifecyclePolicyText"], state.get("policy")),
    }


def _policy_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    return _policy_create(ctx, inputs)[1]


def _policy_delete(ctx: CloudContext, id: str, state: Props) -> None:
    with unless_gone(_GONE):
        _ecr(ctx).delete_lifecycle_policy(repositoryName=id)


def register(aws: Registry) -> None:
    """Add the ECR repository and lifecycle policy types to the aws registry."""
    aws.add(
        ResourceType(
            token=REPOSITORY,
            create=_create,
            read=_read,
            update=_update,
            delete=_delete,
            force_new=frozenset({"name", "encryptionConfigurations", "region"}),
            computed=("arn", "registryId", "repositoryUrl", "tagsAll"),
            auto_name="name",
            drift_inputs=frozenset({"tags"}),
            defaults={"imageTagMutability": "MUTABLE", "forceDelete": False},
        ),
        ResourceType(
            token=LIFECYCLE_POLICY,
            create=_policy_create,
            read=_policy_read,
            update=_policy_update,
            delete=_policy_delete,
            force_new=frozenset({"repository", "region"}),
            computed=("registryId",),
        ),
    )
