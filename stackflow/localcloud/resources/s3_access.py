"""Who owns and may read what in an S3 bucket of the local cloud: ownership controls (id = the
bucket's name) and the bucket's ACL (id = `<bucket>,<canned ACL>`, or the bucket's name, as
pulumi-aws writes it). Deleting an ACL leaves the bucket's ACL as it is, as pulumi-aws does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

OWNERSHIP_CONTROLS = "aws:s3/bucketOwnershipControls:BucketOwnershipControls"
ACL_TOKENS = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
_GONE = ("NoSuchBucket", "OwnershipControlsNotFoundError")


def _ownership_put(s3: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    rule = inputs.get("rule") or {}
    s3.put_bucket_ownership_controls(
        Bucket=str(inputs["bucket"]),
        OwnershipControls={"Rules": [{"ObjectOwnership": str(rule.get("objectOwnership"))}]},
    )
    return str(inputs["bucket"])


def _ownership_observed(found: Answer, state: Props) -> Props:
    rules = (found.get("OwnershipControls") or {}).get("Rules") or [{}]
    return {"rule": {"objectOwnership": rules[0].get("ObjectOwnership")}}


OWNERSHIP = Shape(
    token=OWNERSHIP_CONTROLS,
    service="s3",
    inputs=("bucket", "rule"),
    create=_ownership_put,
    describe=lambda s3, bucket, state: s3.get_bucket_ownership_controls(Bucket=bucket),
    gone=_GONE,
    outputs=lambda found, ctx: {},
    observed=_ownership_observed,
    update=lambda s3, bucket, state, inputs, changed: _ownership_put(s3, inputs),
    delete=lambda s3, bucket, state: s3.delete_bucket_ownership_controls(Bucket=bucket),
)


def _grants(answer: Answer) -> Props:
    owner = answer.get("Owner") or {}
    return {
        "grants": [
            {
                "grantee": {
                    key: grant.get("Grantee", {}).get(api, "")
                    for key, api in (
                        ("type", "Type"),
                        ("id", "ID"),
                        ("uri", "URI"),
                        ("displayName", "DisplayName"),
                        ("emailAddress", "EmailAddress"),
                    )
                },
                "permission": grant.get("Permission"),
            }
            for grant in answer.get("Grants") or []
        ],
        "owner": {"id": owner.get("ID", ""), "displayName": owner.get("DisplayName", "")},
    }


def _acl_put(s3: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
    bucket = str(inputs["bucket"])
    if inputs.get("acl"):
        s3.put_bucket_acl(Bucket=bucket, ACL=str(inputs["acl"]))
        return f"{bucket},{inputs['acl']}"
    raise NotImplementedError(
        "the local cloud's aws provider serves a bucket ACL by its canned `acl` only, not an "
        "accessControlPolicy of grants"
    )


def _acl(token: str) -> Shape:
    return Shape(
        token=token,
        service="s3",
        inputs=("bucket", "acl", "expectedBucketOwner"),
        create=_acl_put,
        describe=lambda s3, id, state: s3.get_bucket_acl(Bucket=str(state["bucket"])),
        gone=_GONE,
        outputs=lambda answer, ctx: {"accessControlPolicy": _grants(answer)},
        update=lambda s3, id, state, inputs, changed: _acl_put(s3, inputs),
        delete=lambda s3, id, state: None,
        computed=("accessControlPolicy",),
    )


def register(aws: Registry) -> None:
    """Add the S3 ownership controls and bucket ACL types."""
    aws.add(
        OWNERSHIP.type(force_new={"bucket"}),
        *(_acl(token).type(force_new={"bucket", "expectedBucketOwner"}) for token in ACL_TOKENS),
    )
