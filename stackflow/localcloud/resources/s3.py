"""S3 in the local cloud: buckets, their objects, policies, public access blocks and website
configurations, as pulumi-aws 7 manages them.

pulumi-aws 7's `Bucket` is the former `BucketV2` (kept as a deprecated alias); both tokens are
served by the same entry, as are `BucketObject` and `BucketObjectv2`, and the two website
configuration tokens. Ids follow pulumi-aws: a bucket's (and its policy's, access block's and
website's) id is the bucket's name, an object's its key.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._assets import asset_bytes
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    json_text,
    observe,
    refuse_unserved,
    tag_changes,
    tag_outputs,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

BUCKET_TOKENS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
OBJECT_TOKENS = ("aws:s3/bucketObject:BucketObject", "aws:s3/bucketObjectv2:BucketObjectv2")
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


def _s3(ctx: CloudContext) -> Any:
    return ctx.client("s3")


def _gone(exc: ClientError) -> bool:
    return error_code(exc) in _GONE


def _bucket_tags(ctx: CloudContext, bucket: str) -> dict[str, str]:
    try:
        return tags_of(_s3(ctx).get_bucket_tagging(Bucket=bucket).get("TagSet"))
    except ClientError as exc:
        if error_code(exc) == "NoSuchTagSet":
            return {}
        raise


# --- bucket ---------------------------------------------------------------------------------

_BUCKET_INPUTS = ("bucket", "bucketPrefix", "forceDestroy", "objectLockEnabled", "tags")


def _bucket_outputs(ctx: CloudContext, name: str) -> Props:
    return {
        "arn": f"arn:aws:s3:::{name}",
        "bucketDomainName": f"{name}.s3.amazonaws.com",
        "bucketRegionalDomainName": f"{name}.s3.{ctx.region}.amazonaws.com",
        "region": ctx.region,
    }


def _bucket_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, BUCKET_TOKENS[0], inputs, _BUCKET_INPUTS)
    name = str(inputs["bucket"])
    kwargs: dict[str, Any] = {"Bucket": name}
    if ctx.region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": ctx.region}
    if inputs.get("objectLockEnabled"):
        kwargs["ObjectLockEnabledForBucket"] = True
    s3 = _s3(ctx)
    s3.create_bucket(**kwargs)
    tags = input_tags(inputs)
    if tags:
        s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tag_list(tags)})
    return name, {**_bucket_outputs(ctx, name), "tagsAll": tags}


def _bucket_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        _s3(ctx).head_bucket(Bucket=id)
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    return {
        **observe(state, {"bucket": id}),
        **_bucket_outputs(ctx, id),
        **tag_outputs(state, _bucket_tags(ctx, id)),
    }


def _bucket_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, BUCKET_TOKENS[0], inputs, _BUCKET_INPUTS)
    if "tags" in changed:
        upsert, remove = tag_changes(_bucket_tags(ctx, id), inputs)
        if upsert or remove:
            wanted = input_tags(inputs)
            if wanted:
                _s3(ctx).put_bucket_tagging(Bucket=id, Tagging={"TagSet": tag_list(wanted)})
            else:
                _s3(ctx).delete_bucket_tagging(Bucket=id)
    return {**_bucket_outputs(ctx, id), "tagsAll": input_tags(inputs)}


def _empty_bucket(ctx: CloudContext, bucket: str) -> None:
    s3 = _s3(ctx)
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        doomed = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
        ]
        if doomed:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})


def _bucket_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        if state.get("forceDestroy"):
            _empty_bucket(ctx, id)
        _s3(ctx).delete_bucket(Bucket=id)  # not empty: BucketNotEmpty, in AWS's words
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- object ---------------------------------------------------------------------------------

# Inputs that are PutObject parameters: wire name -> API name.
_OBJECT_PARAMETERS = {
    "contentType": "ContentType",
    "cacheControl": "CacheControl",
    "contentDisposition": "ContentDisposition",
    "contentEncoding": "ContentEncoding",
    "contentLanguage": "ContentLanguage",
    "acl": "ACL",
    "storageClass": "StorageClass",
    "serverSideEncryption": "ServerSideEncryption",
    "websiteRedirect": "WebsiteRedirectLocation",
}
_OBJECT_INPUTS = (
    "bucket",
    "key",
    "source",
    "content",
    "contentBase64",
    "sourceHash",
    "etag",
    "metadata",
    "forceDestroy",
    "tags",
    *_OBJECT_PARAMETERS,
)
_OBJECT_COMPUTED = ("arn", "etag", "versionId", "contentType", "storageClass", "tagsAll")


def _object_body(inputs: Props) -> bytes:
    if inputs.get("source"):
        return asset_bytes(inputs["source"])
    if inputs.get("contentBase64"):
        return base64.b64decode(str(inputs["contentBase64"]))
    return str(inputs.get("content") or "").encode()


def _put_object(ctx: CloudContext, inputs: Props) -> Props:
    bucket, key = str(inputs["bucket"]), str(inputs["key"])
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": _object_body(inputs)}
    for wire, api in _OBJECT_PARAMETERS.items():
        if inputs.get(wire):
            kwargs[api] = str(inputs[wire])
    if inputs.get("metadata"):
        kwargs["Metadata"] = {str(k): str(v) for k, v in inputs["metadata"].items()}
    tags = input_tags(inputs)
    if tags:
        kwargs["Tagging"] = "&".join(f"{k}={v}" for k, v in tags.items())
    answer = _s3(ctx).put_object(**kwargs)
    head = _s3(ctx).head_object(Bucket=bucket, Key=key)
    return {
        "arn": f"arn:aws:s3:::{bucket}/{key}",
        "etag": str(answer.get("ETag", "")).strip('"'),
        "versionId": answer.get("VersionId") or "",
        "contentType": head.get("ContentType", "binary/octet-stream"),
        "storageClass": head.get("StorageClass") or "STANDARD",
        "tagsAll": tags,
    }


def _object_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, OBJECT_TOKENS[0], inputs, _OBJECT_INPUTS)
    computed = _put_object(ctx, inputs)
    return str(inputs["key"]), {k: v for k, v in computed.items() if k not in inputs}


def _object_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    bucket, key = str(state.get("bucket", "")), str(state.get("key") or id)
    try:
        head = _s3(ctx).head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if _gone(exc):
            return None
        raise
    observed: Props = {
        "bucket": bucket,
        "key": key,
        "contentType": head.get("ContentType"),
        "cacheControl": head.get("CacheControl"),
        "contentDisposition": head.get("ContentDisposition"),
        "contentEncoding": head.get("ContentEncoding"),
        "contentLanguage": head.get("ContentLanguage"),
        "storageClass": head.get("StorageClass") or "STANDARD",
        "metadata": head.get("Metadata"),
        "etag": str(head.get("ETag", "")).strip('"'),
    }
    tags = tags_of(_s3(ctx).get_object_tagging(Bucket=bucket, Key=key).get("TagSet"))
    out = {**observe(state, observed), **tag_outputs(state, tags)}
    out["arn"] = f"arn:aws:s3:::{bucket}/{key}"
    return out


def _object_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, OBJECT_TOKENS[0], inputs, _OBJECT_INPUTS)
    computed = _put_object(ctx, inputs)  # S3 has no in-place change of an object: a new PUT
    return {k: v for k, v in computed.items() if k not in inputs}


def _object_delete(ctx: CloudContext, id: str, state: Props) -> None:
    bucket, key = str(state.get("bucket", "")), str(state.get("key") or id)
    try:
        _s3(ctx).delete_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if not _gone(exc):
            raise


# --- policy, public access block, website ---------------------------------------------------


def _policy_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, POLICY, inputs, ("bucket", "policy"))
    bucket, policy = str(inputs["bucket"]), inputs["policy"]
    text = policy if isinstance(policy, str) else json_text(policy, None)
    _s3(ctx).put_bucket_policy(Bucket=bucket, Policy=text)
    return bucket, {}


def _policy_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        found = _s3(ctx).get_bucket_policy(Bucket=id)["Policy"]
    except ClientError as exc:
        if _gone(exc) or error_code(exc) == "NoSuchBucketPolicy":
            return None
        raise
    return {"bucket": id, "policy": json_text(found, state.get("policy"))}


def _policy_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    _policy_create(ctx, inputs)
    return {}


def _policy_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        _s3(ctx).delete_bucket_policy(Bucket=id)
    except ClientError as exc:
        if not _gone(exc):
            raise


_ACCESS_BLOCK = {
    "blockPublicAcls": "BlockPublicAcls",
    "blockPublicPolicy": "BlockPublicPolicy",
    "ignorePublicAcls": "IgnorePublicAcls",
    "restrictPublicBuckets": "RestrictPublicBuckets",
}


def _access_block_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, PUBLIC_ACCESS_BLOCK, inputs, ("bucket", "skipDestroy", *_ACCESS_BLOCK))
    bucket = str(inputs["bucket"])
    _s3(ctx).put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            api: bool(inputs.get(wire)) for wire, api in _ACCESS_BLOCK.items()
        },
    )
    return bucket, {}


def _access_block_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        found = _s3(ctx).get_public_access_block(Bucket=id)["PublicAccessBlockConfiguration"]
    except ClientError as exc:
        if _gone(exc) or error_code(exc) == "NoSuchPublicAccessBlockConfiguration":
            return None
        raise
    observed = {wire: bool(found.get(api)) for wire, api in _ACCESS_BLOCK.items()}
    return observe(state, {"bucket": id, **observed})


def _access_block_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    _access_block_create(ctx, inputs)
    return {}


def _access_block_delete(ctx: CloudContext, id: str, state: Props) -> None:
    if state.get("skipDestroy"):
        return
    try:
        _s3(ctx).delete_public_access_block(Bucket=id)
    except ClientError as exc:
        if not _gone(exc):
            raise


_WEBSITE_INPUTS = ("bucket", "indexDocument", "errorDocument", "redirectAllRequestsTo")


def _website_domain(ctx: CloudContext) -> str:
    separator = "-" if ctx.region in _DASH_WEBSITE_REGIONS else "."
    return f"s3-website{separator}{ctx.region}.amazonaws.com"


def _website_outputs(ctx: CloudContext, bucket: str) -> Props:
    domain = _website_domain(ctx)
    return {"websiteDomain": domain, "websiteEndpoint": f"{bucket}.{domain}"}


def _website_configuration(inputs: Props) -> dict[str, Any]:
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
    return config


def _website_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, WEBSITE_TOKENS[0], inputs, _WEBSITE_INPUTS)
    bucket = str(inputs["bucket"])
    _s3(ctx).put_bucket_website(Bucket=bucket, WebsiteConfiguration=_website_configuration(inputs))
    return bucket, _website_outputs(ctx, bucket)


def _website_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        found = _s3(ctx).get_bucket_website(Bucket=id)
    except ClientError as exc:
        if _gone(exc) or error_code(exc) == "NoSuchWebsiteConfiguration":
            return None
        raise
    observed: Props = {"bucket": id}
    if found.get("IndexDocument"):
        observed["indexDocument"] = {"suffix": found["IndexDocument"]["Suffix"]}
    if found.get("ErrorDocument"):
        observed["errorDocument"] = {"key": found["ErrorDocument"]["Key"]}
    return {**observe(state, observed), **_website_outputs(ctx, id)}


def _website_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    _website_create(ctx, inputs)
    return _website_outputs(ctx, id)


def _website_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        _s3(ctx).delete_bucket_website(Bucket=id)
    except ClientError as exc:
        if not _gone(exc):
            raise


def register(aws: Registry) -> None:
    """Add the S3 types to the aws registry."""
    for token in BUCKET_TOKENS:
        aws.add(
            ResourceType(
                token=token,
                create=_bucket_create,
                read=_bucket_read,
                update=_bucket_update,
                delete=_bucket_delete,
                force_new=frozenset({"bucket", "bucketPrefix", "objectLockEnabled", "region"}),
                computed=(
                    "arn",
                    "bucketDomainName",
                    "bucketRegionalDomainName",
                    "region",
                    "tagsAll",
                ),
                auto_name="bucket",
                name_prefix="bucketPrefix",
                auto_name_max=63,
                drift_inputs=frozenset({"tags"}),
                defaults={"forceDestroy": False},
            )
        )
    for token in OBJECT_TOKENS:
        aws.add(
            ResourceType(
                token=token,
                create=_object_create,
                read=_object_read,
                update=_object_update,
                delete=_object_delete,
                force_new=frozenset({"bucket", "key", "region"}),
                computed=_OBJECT_COMPUTED,
                auto_name="key",
                auto_name_exact=True,  # pulumi-aws: the object's key is its resource name
                defaults={"forceDestroy": False},
            )
        )
    aws.add(
        ResourceType(
            token=POLICY,
            create=_policy_create,
            read=_policy_read,
            update=_policy_update,
            delete=_policy_delete,
            force_new=frozenset({"bucket", "region"}),
        ),
        ResourceType(
            token=PUBLIC_ACCESS_BLOCK,
            create=_access_block_create,
            read=_access_block_read,
            update=_access_block_update,
            delete=_access_block_delete,
            force_new=frozenset({"bucket", "region"}),
            defaults={
                "blockPublicAcls": False,
                "blockPublicPolicy": False,
                "ignorePublicAcls": False,
                "restrictPublicBuckets": False,
                "skipDestroy": False,
            },
        ),
    )
    for token in WEBSITE_TOKENS:
        aws.add(
            ResourceType(
                token=token,
                create=_website_create,
                read=_website_read,
                update=_website_update,
                delete=_website_delete,
                force_new=frozenset({"bucket", "expectedBucketOwner", "region"}),
                computed=("websiteDomain", "websiteEndpoint"),
            )
        )
