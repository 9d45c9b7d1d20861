"""getPartition and getArn, answered by the local cloud's aws plugin without a cloud (as
pulumi-aws answers them, with no AWS call); the real engine calls them in
tests/integration/test_served_families.py."""

from __future__ import annotations

import pytest

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.resources import registry
from stackflow.localcloud.resources.arns import GET_ARN, GET_PARTITION

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("region", "partition", "suffix", "reverse"),
    [
        ("eu-west-1", "aws", "amazonaws.com", "com.amazonaws"),
        ("cn-north-1", "aws-cn", "amazonaws.com.cn", "cn.com.amazonaws"),
        ("us-gov-west-1", "aws-us-gov", "amazonaws.com", "com.amazonaws"),
    ],
)
def test_get_partition_answers_for_the_providers_region(
    region: str, partition: str, suffix: str, reverse: str
) -> None:
    get_partition = registry("aws").find_function(GET_PARTITION)
    assert get_partition is not None
    assert get_partition(CloudContext("http://127.0.0.1:9", region), {}) == {
        "id": partition,
        "partition": partition,
        "dnsSuffix": suffix,
        "reverseDnsPrefix": reverse,
    }


def test_get_arn_splits_an_arn_keeping_the_resource_whole_and_refuses_what_is_not_one() -> None:
    get_arn = registry("aws").find_function(GET_ARN)
    assert get_arn is not None
    ctx = CloudContext("http://127.0.0.1:9", "eu-west-1")
    arn = "arn:aws:logs:eu-west-1:123456789012:log-group:/app/web:*"
    assert get_arn(ctx, {"arn": arn}) == {
        "id": arn,
        "arn": arn,
        "partition": "aws",
        "service": "logs",
        "region": "eu-west-1",
        "account": "123456789012",
        "resource": "log-group:/app/web:*",
    }
    assert get_arn(ctx, {"arn": "arn:aws:s3:::site"})["resource"] == "site"
    with pytest.raises(ValueError, match="invalid ARN \\('s3://site'\\)"):
        get_arn(ctx, {"arn": "s3://site"})
