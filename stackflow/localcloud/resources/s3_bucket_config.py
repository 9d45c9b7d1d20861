"""A bucket's own settings in the local cloud's aws provider: its policy, public access block and
website configuration (each one's id is the bucket's name, as in pulumi-aws). Both website
configuration tokens are served by the same entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry, ResourceType
from stackflow.localcloud.resources._declared import Answer, Shape, found
from stackflow.localcloud.resources._shared import json_text, refuse_unserved, unless_gone

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

POLICY = "aws:s3/bucketPolicy:BucketPolicy"
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
WEBSITE_TOKENS = (
    "aws:s3/bucketWebsiteConfiguration:BucketWebsiteConfiguration",
    "aws:s3/bucketWebsiteConfigurationV2:BucketWebsiteConfigurationV2",
)
_GONE = ("NoSuchBucket", "404", "NotFound", "NoSuchKey")
# Regions whose website endpoint is s3-website-<region> (the others: s3-website.<region>).
_DASH_WEBSITE_REGIONS = frozenset(
    {
        "us-east-1",
        "us-west-1",
        "us-west-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-northeast-1",
        "eu-west-1",
        "sa-east-1",
    }
)


# --- policy (read back as the state's own text when it means the same) -------------------------


def _policy_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, POLICY, inputs, ("bucket", "policy"))
    bucket, policy = str(inputs["bucket"]), inputs["policy"]
    text = policy if isinstance(policy, str) else json_text(policy, None)
    ctx.client("s3").put_bucket_policy(Bucket=bucket, Policy=text)
    return bucket, {}


def _policy_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    s3 = ctx.client("s3")
    answer = found((*_GONE, "NoSuchBucketPolicy"), lambda: s3.get_bucket_policy(Bucket=id))
    if answer is None:
        return None
    return {"bucket": id, "policy": json_text(answer["Policy"], state.get("policy"))}


def _policy_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    _policy_create(ctx, inputs)
    return {}


def _policy_delete(ctx: CloudContext, id: str, state: Props) -> None:
    with unless_gone(_GONE):
        ctx.client("s3").delete_bucket_policy(Bucket=id)


# --- public access block -----------------------------------------------------------------------

_ACCESS_BLOCK = {
    "blockPublicAcls": "BlockPublicAcls",
    "blockPublicPolicy": "BlockPublicPolicy",
    "ignorePublicAcls": "IgnorePublicAcls",
    "restrictPublicBuckets": "RestrictPublicBuckets",
}


def _access_block_put(s3: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    bucket = str(inputs["bucket"])
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            api: bool(inputs.get(wire)) for wire, api in _ACCESS_BLOCK.items()
        },
    )
    return bucket


def _access_block_observed(answer: Answer, state: Props) -> Props:
    block = answer["PublicAccessBlockConfiguration"]
    return {"bucket": answer["Bucket"]} | {
        wire: bool(block.get(api)) for wire, api in _ACCESS_BLOCK.items()
    }


def _access_block_delete(s3: Any, bucket: str, state: Props) -> None:
    if not state.get("skipDestroy"):
        s3.delete_public_access_block(Bucket=bucket)


ACCESS_BLOCK_SHAPE = Shape(
    token=PUBLIC_ACCESS_BLOCK,
    service="s3",
    inputs=("bucket", "skipDestroy", *_ACCESS_BLOCK),
    create=_access_block_put,
    describe=lambda s3, bucket, state: {
        **s3.get_public_access_block(Bucket=bucket),
        "Bucket": bucket,
    },
    gone=(*_GONE, "NoSuchPublicAccessBlockConfiguration"),
    outputs=lambda answer, ctx: {},
    observed=_access_block_observed,
    update=lambda s3, bucket, state, inputs, changed: _access_block_put(s3, inputs),
    delete=_access_block_delete,
)


# --- website configuration ---------------------------------------------------------------------


def _website_outputs(answer: Answer, ctx: CloudContext) -> Props:
    separator = "-" if ctx.region in _DASH_WEBSITE_REGIONS else "."
    domain = f"s3-website{separator}{ctx.region}.amazonaws.com"
    return {"websiteDomain": domain, "websiteEndpoint": f"{answer['Bucket']}.{domain}"}


def _website_put(s3: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    config: dict[str, Any] = {}
    if inputs.get("indexDocument"):
        config["IndexDocument"] = {"Suffix": str(inputs["indexDocument"]["suffix"])}
    if inputs.get("errorDocument"):
        config["ErrorDocument"] = {"Key": str(inputs["errorDocument"]["key"])}
    redirect = inputs.get("redirectAllRequestsTo")
    if redirect:
        config["RedirectAllRequestsTo"] = {"HostName": str(redirect["hostName"])}
        if redirect.get("protocol"):
            config["RedirectAllRequestsTo"]["Protocol"] = str(redirect["protocol"])
    bucket = str(inputs["bucket"])
    s3.put_bucket_website(Bucket=bucket, WebsiteConfiguration=config)
    return bucket


def _website_observed(answer: Answer, state: Props) -> Props:
    observed: Props = {"bucket": answer["Bucket"]}
    if answer.get("IndexDocument"):
        observed["indexDocument"] = {"suffix": answer["IndexDocument"]["Suffix"]}
    if answer.get("ErrorDocument"):
        observed["errorDocument"] = {"key": answer["ErrorDocument"]["Key"]}
    return observed


def _website(token: str) -> Shape:
    return Shape(
        token=token,
        service="s3",
        inputs=("bucket", "indexDocument", "errorDocument", "redirectAllRequestsTo"),
        create=_website_put,
        describe=lambda s3, bucket, state: {
            **s3.get_bucket_website(Bucket=bucket),
            "Bucket": bucket,
        },
        gone=(*_GONE, "NoSuchWebsiteConfiguration"),
        outputs=_website_outputs,
        observed=_website_observed,
        update=lambda s3, bucket, state, inputs, changed: _website_put(s3, inputs),
        delete=lambda s3, bucket, state: s3.delete_bucket_website(Bucket=bucket),
        computed=("websiteDomain", "websiteEndpoint"),
    )


def register(aws: Registry) -> None:
    """Add the bucket policy, public access block and website configuration types."""
    aws.add(
        ResourceType(
            token=POLICY,
            create=_policy_create,
            read=_policy_read,
            update=_policy_update,
            delete=_policy_delete,
            force_new=frozenset({"bucket", "region"}),
        ),
        ACCESS_BLOCK_SHAPE.type(
            force_new={"bucket"},
            defaults={
                "blockPublicAcls": False,
                "blockPublicPolicy": False,
                "ignorePublicAcls": False,
                "restrictPublicBuckets": False,
                "skipDestroy": False,
            },
        ),
        *(
            _website(token).type(force_new={"bucket", "expectedBucketOwner"})
            for token in WEBSITE_TOKENS
        ),
    )
