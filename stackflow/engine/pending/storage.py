"""S3, Lambda, Step Functions and `random`: found by their physical names. Ids are pulumi-aws's:
a bucket's (and its policy's, public access block's and website configuration's) is the bucket's
name, an object's its key, a function's its name, a state machine's its ARN. A random password
lives in the state alone: no cloud ever holds one, so its pending create is always cleared."""

from __future__ import annotations

from stackflow.engine.pending.cloud import CloudClients, answer, by_name
from stackflow.engine.pending.model import Candidate, Lookup, Props, text

_NO_BUCKET = ("404", "NoSuchBucket", "NotFound")


def bucket(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "bucket")
    if name is None:
        return []
    s3 = clients.client("s3")
    found = answer(lambda: s3.head_bucket(Bucket=name), *_NO_BUCKET)
    return [Candidate(name)] if found is not None else []


def bucket_object(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name, key = text(inputs, "bucket"), text(inputs, "key")
    if name is None or key is None:
        return []
    s3 = clients.client("s3")
    found = answer(lambda: s3.head_object(Bucket=name, Key=key), *_NO_BUCKET, "NoSuchKey")
    return [Candidate(key)] if found is not None else []


def _bucket_setting(call: str, *gone: str) -> Lookup:
    """A bucket's sub-resource (its id: the bucket's name), there when `call` answers."""

    def lookup(clients: CloudClients, inputs: Props) -> list[Candidate]:
        name = text(inputs, "bucket")
        if name is None:
            return []
        s3 = clients.client("s3")
        found = answer(lambda: getattr(s3, call)(Bucket=name), *_NO_BUCKET, *gone)
        return [Candidate(name)] if found is not None else []

    return lookup


def state_machine(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    machines = []
    for page in clients.client("stepfunctions").get_paginator("list_state_machines").paginate():
        machines += page.get("stateMachines", [])
    return [Candidate(m["stateMachineArn"]) for m in machines if m.get("name") == name]


def in_the_state_alone(clients: CloudClients, inputs: Props) -> list[Candidate]:
    return []


_POLICY = _bucket_setting("get_bucket_policy", "NoSuchBucketPolicy")
_ACCESS_BLOCK = _bucket_setting("get_public_access_block", "NoSuchPublicAccessBlockConfiguration")
_WEBSITE = _bucket_setting("get_bucket_website", "NoSuchWebsiteConfiguration")

LOOKUPS: dict[str, Lookup] = {
    "aws:s3/bucket:Bucket": bucket,
    "aws:s3/bucketV2:BucketV2": bucket,
    "aws:s3/bucketObject:BucketObject": bucket_object,
    "aws:s3/bucketObjectv2:BucketObjectv2": bucket_object,
    "aws:s3/bucketPolicy:BucketPolicy": _POLICY,
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _ACCESS_BLOCK,
    "aws:s3/bucketWebsiteConfiguration:BucketWebsiteConfiguration": _WEBSITE,
    "aws:s3/bucketWebsiteConfigurationV2:BucketWebsiteConfigurationV2": _WEBSITE,
    "aws:lambda/function:Function": by_name(
        "lambda",
        "get_function",
        "FunctionName",
        "Configuration",
        "FunctionName",
        gone=("ResourceNotFoundException",),
    ),
    "aws:sfn/stateMachine:StateMachine": state_machine,
    "random:index/randomPassword:RandomPassword": in_the_state_alone,
    "random:index/randomString:RandomString": in_the_state_alone,
}
