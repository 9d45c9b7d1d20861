"""CloudFront distributions of the local cloud's aws provider (id = the distribution's id, as in
pulumi-aws).

The program's blocks become CloudFront's DistributionConfig and back in _cloudfront_config.py.
A delete disables the distribution first, as pulumi-aws does (`retainOnDelete`: only
that). Origin groups, staging distributions and Lambda@Edge or CloudFront function associations
are not served.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._cloudfront_config import distribution_config, observed_config
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, timestamp

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
HOSTED_ZONE_ID = "Z2FDTNDATAQYW2"  # every CloudFront distribution's, for Route 53 aliases
_GONE = ("NoSuchDistribution",)
_TAGGING = Tagging(
    "list_tags_for_resource",
    "tag_resource",
    "untag_resource",
    key="Resource",
    by="arn",
    field="Tags",
    keys="TagKeys",
    item=KEY_VALUE,
    answer="Tags.Items",
    wrapped="Items",
)
_UNSERVED_IN_BEHAVIORS = ("lambdaFunctionAssociations", "functionAssociations")


def _refuse_unserved_blocks(inputs: Props) -> None:
    ordered = inputs.get("orderedCacheBehaviors") or []
    behaviors = [inputs.get("defaultCacheBehavior") or {}, *ordered]
    for behavior in behaviors:
        for key in _UNSERVED_IN_BEHAVIORS:
            if behavior.get(key):
                raise NotImplementedError(
                    f"the local cloud's aws provider does not serve {key} of a cache behavior "
                    f"of {DISTRIBUTION} yet"
                )


def _outputs(answer: Answer, ctx: CloudContext) -> Props:
    distribution = answer["Distribution"]
    signers = distribution.get("ActiveTrustedSigners") or {}
    groups = distribution.get("ActiveTrustedKeyGroups") or {}
    return {
        "arn": distribution["ARN"],
        "callerReference": distribution["DistributionConfig"]["CallerReference"],
        "domainName": distribution["DomainName"],
        "etag": answer.get("ETag", ""),
        "hostedZoneId": HOSTED_ZONE_ID,
        "status": distribution.get("Status", ""),
        "lastModifiedTime": timestamp(distribution.get("LastModifiedTime")),
        "inProgressValidationBatches": int(distribution.get("InProgressInvalidationBatches") or 0),
        "trustedSigners": [{"enabled": bool(signers.get("Enabled")), "items": []}],
        "trustedKeyGroups": [{"enabled": bool(groups.get("Enabled")), "items": []}],
    }


# --- the calls -------------------------------------------------------------------------------


def _create(cloudfront: Any, inputs: Props, ctx: CloudContext) -> str:
    _refuse_unserved_blocks(inputs)
    config = distribution_config(inputs, uuid.uuid4().hex)
    if input_tags(inputs):
        with_tags = {"DistributionConfig": config, "Tags": _TAGGING.wire(input_tags(inputs))}
        made = cloudfront.create_distribution_with_tags(DistributionConfigWithTags=with_tags)
    else:
        made = cloudfront.create_distribution(DistributionConfig=config)
    return str(made["Distribution"]["Id"])


def _describe(cloudfront: Any, id: str, state: Props) -> Answer:
    return dict(cloudfront.get_distribution(Id=id))


def _update(cloudfront: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    _refuse_unserved_blocks(inputs)
    current = cloudfront.get_distribution_config(Id=id)
    reference = str(current["DistributionConfig"]["CallerReference"])
    cloudfront.update_distribution(
        Id=id, IfMatch=current["ETag"], DistributionConfig=distribution_config(inputs, reference)
    )


def _delete(cloudfront: Any, id: str, state: Props) -> None:
    current = cloudfront.get_distribution_config(Id=id)
    config, etag = dict(current["DistributionConfig"]), current["ETag"]
    if config.get("Enabled"):  # CloudFront deletes only a disabled distribution
        config["Enabled"] = False
        etag = cloudfront.update_distribution(Id=id, IfMatch=etag, DistributionConfig=config)[
            "ETag"
        ]
    if not state.get("retainOnDelete"):
        cloudfront.delete_distribution(Id=id, IfMatch=etag)


SHAPE = Shape(
    token=DISTRIBUTION,
    service="cloudfront",
    inputs=(
        "enabled",
        "aliases",
        "comment",
        "defaultRootObject",
        "httpVersion",
        "isIpv6Enabled",
        "priceClass",
        "retainOnDelete",
        "waitForDeployment",
        "webAclId",
        "origins",
        "defaultCacheBehavior",
        "orderedCacheBehaviors",
        "customErrorResponses",
        "viewerCertificate",
        "restrictions",
        "loggingConfig",
        "tags",
    ),
    create=_create,
    describe=_describe,
    gone=_GONE,
    outputs=_outputs,
    observed=lambda answer, state: observed_config(
        answer["Distribution"]["DistributionConfig"], state
    ),
    update=_update,
    delete=_delete,
    tagging=_TAGGING,
    computed=(
        "arn",
        "callerReference",
        "domainName",
        "etag",
        "hostedZoneId",
        "status",
        "lastModifiedTime",
        "inProgressValidationBatches",
        "trustedSigners",
        "trustedKeyGroups",
    ),
)


def register(aws: Registry) -> None:
    """Add the CloudFront distribution type."""
    aws.add(
        SHAPE.type(
            defaults={
                "httpVersion": "http2",
                "isIpv6Enabled": False,
                "priceClass": "PriceClass_All",
                "retainOnDelete": False,
                "waitForDeployment": True,
            },
        )
    )
