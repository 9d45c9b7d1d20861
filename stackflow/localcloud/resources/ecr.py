"""ECR repositories, their policies and lifecycle policies in the local cloud (no image registry:
pushing images is not served). Ids follow pulumi-aws: a repository's id is its name, a policy's
and a lifecycle policy's the repository's name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, json_text

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

REPOSITORY = "aws:ecr/repository:Repository"
LIFECYCLE_POLICY = "aws:ecr/lifecyclePolicy:LifecyclePolicy"
REPOSITORY_POLICY = "aws:ecr/repositoryPolicy:RepositoryPolicy"
_GONE = (
    "RepositoryNotFoundException",
    "LifecyclePolicyNotFoundException",
    "RepositoryPolicyNotFoundException",
)
_TAGGING = Tagging(
    "list_tags_for_resource", "tag_resource", "untag_resource", key="resourceArn", item=KEY_VALUE
)


def _create(ecr: Any, inputs: Props, ctx: CloudContext) -> str:
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
    if input_tags(inputs):
        kwargs["tags"] = _TAGGING.wire(input_tags(inputs))
    return str(ecr.create_repository(**kwargs)["repository"]["repositoryName"])


def _describe(ecr: Any, name: str, state: Props) -> Answer | None:
    found = ecr.describe_repositories(repositoryNames=[name])["repositories"]
    return dict(found[0]) if found else None


def _outputs(repository: Answer, ctx: CloudContext) -> Props:
    return {
        "arn": repository["repositoryArn"],
        "registryId": repository["registryId"],
        "repositoryUrl": repository["repositoryUri"],
    }


def _observed(repository: Answer, state: Props) -> Props:
    scanning = repository.get("imageScanningConfiguration") or {}
    return {
        "name": repository["repositoryName"],
        "imageTagMutability": repository.get("imageTagMutability"),
        "imageScanningConfiguration": {"scanOnPush": bool(scanning.get("scanOnPush"))},
    }


def _update(ecr: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
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


REPO = Shape(
    token=REPOSITORY,
    service="ecr",
    inputs=(
        "name",
        "imageTagMutability",
        "imageScanningConfiguration",
        "encryptionConfigurations",
        "forceDelete",
        "tags",
    ),
    create=_create,
    describe=_describe,
    gone=_GONE,
    outputs=_outputs,
    observed=_observed,
    update=_update,
    # Images left in it: RepositoryNotEmptyException, in AWS's words (unless forceDelete).
    delete=lambda ecr, name, state: ecr.delete_repository(
        repositoryName=name, force=bool(state.get("forceDelete"))
    ),
    tagging=_TAGGING,
    computed=("arn", "registryId", "repositoryUrl"),
)


def _lifecycle_put(ecr: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    ecr.put_lifecycle_policy(
        repositoryName=str(inputs["repository"]), lifecyclePolicyText=str(inputs["policy"])
    )
    return str(inputs["repository"])


LIFECYCLE = Shape(
    token=LIFECYCLE_POLICY,
    service="ecr",
    inputs=("repository", "policy"),
    create=_lifecycle_put,
    describe=lambda ecr, name, state: ecr.get_lifecycle_policy(repositoryName=name),
    gone=_GONE,
    outputs=lambda found, ctx: {"registryId": found["registryId"]},
    observed=lambda found, state: {
        "repository": found["repositoryName"],
        "policy": json_text(found["lifecyclePolicyText"], state.get("policy")),
    },
    update=lambda ecr, name, state, inputs, changed: _lifecycle_put(ecr, inputs),
    delete=lambda ecr, name, state: ecr.delete_lifecycle_policy(repositoryName=name),
    computed=("registryId",),
)


def _policy_put(ecr: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    ecr.set_repository_policy(repositoryName=str(inputs["repository"]), policyText=inputs["policy"])
    return str(inputs["repository"])


POLICY = Shape(
    token=REPOSITORY_POLICY,
    service="ecr",
    inputs=("repository", "policy"),
    create=_policy_put,
    describe=lambda ecr, name, state: ecr.get_repository_policy(repositoryName=name),
    gone=_GONE,
    outputs=lambda found, ctx: {"registryId": found["registryId"]},
    observed=lambda found, state: {
        "repository": found["repositoryName"],
        "policy": json_text(found["policyText"], state.get("policy")),
    },
    update=lambda ecr, name, state, inputs, changed: _policy_put(ecr, inputs),
    delete=lambda ecr, name, state: ecr.delete_repository_policy(repositoryName=name),
    computed=("registryId",),
)


def register(aws: Registry) -> None:
    """Add the ECR repository, repository policy and lifecycle policy types."""
    aws.add(
        REPO.type(
            force_new={"name", "encryptionConfigurations"},
            auto_name="name",
            defaults={"imageTagMutability": "MUTABLE", "forceDelete": False},
        ),
        LIFECYCLE.type(force_new={"repository"}),
        POLICY.type(force_new={"repository"}),
    )
