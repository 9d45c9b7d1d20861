"""S3 in the local cloud: buckets and their objects, as pulumi-aws 7 manages them (a bucket's
policy, public access block and website are `s3_bucket_config`; ownership and ACLs `s3_access`).

pulumi-aws 7's `Bucket` is the former `BucketV2` (kept as a deprecated alias); both tokens are
served by the same entry, as are `BucketObject` and `BucketObjectv2`. Ids follow pulumi-aws: a
bucket's id is its name, an object's its key.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._assets import asset_bytes
from stackflow.localcloud.resources._declared import found
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    observe,
    refuse_unserved,
    tag_changes,
    tag_outputs,
    unless_gone,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

BUCKET_TOKENS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
OBJECT_TOKENS = ("aws:s3/bucketObject:BucketObject", "aws:s3/bucketObjectv2:BucketObjectv2")
_GONE = ("NoSuchBucket", "404", "NotFound", "NoSuchKey")


def _s3(ctx: CloudContext) -> Any:
    return ctx.client("s3")


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
    s3 = _s3(ctx)
    if found(_GONE, lambda: s3.head_bucket(Bucket=id)) is None:
        return None
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
    with unless_gone(_GONE):
        if state.get("forceDestroy"):
            _empty_bucket(ctx, id)
        _s3(ctx).delete_bucket(Bucket=id)  # not empty: BucketNotEmpty, in AWS's words


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
    s3 = _s3(ctx)
    head = found(_GONE, lambda: s3.head_object(Bucket=bucket, Key=key))
    if head is None:
        return None
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
    with unless_gone(_GONE):
        _s3(ctx).delete_object(Bucket=bucket, Key=key)


def register(aws: Registry) -> None:
    """Add the bucket and object types to the aws registry."""
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
