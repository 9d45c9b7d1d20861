"""pulumi-aws's defaults and AWS's offer in the local cloud's plugins, without an engine or a
cloud: defaults filled in Check and not seen as changes against an older state, S3 object keys
named exactly, the dated RDS snapshot and the refusals it makes (the real engine drives them in
tests/integration/test_published_shapes.py)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.plugin import diff_inputs
from stackflow.localcloud.plugin.rules import with_auto_name, with_defaults
from stackflow.localcloud.resources import registry
from stackflow.localcloud.resources._rds_offerings import check_mysql_instance, mysql_offerings

pytestmark = pytest.mark.unit

MYSQL = {"engine": "mysql", "engineVersion": "8.0", "instanceClass": "db.t4g.micro"}


def test_check_fills_defaults_and_an_older_state_without_them_shows_no_change() -> None:
    vpc = registry("aws").resource("aws:ec2/vpc:Vpc")
    news = with_defaults(vpc, {"cidrBlock": "10.0.0.0/16"})
    assert news == {
        "cidrBlock": "10.0.0.0/16",
        "enableDnsSupport": True,
        "instanceTenancy": "default",
    }
    assert with_defaults(vpc, {"enableDnsSupport": False})["enableDnsSupport"] is False
    assert diff_inputs(vpc, {"cidrBlock": "10.0.0.0/16"}, news) == ([], [])
    assert diff_inputs(vpc, news, {**news, "enableDnsSupport": False})[0] == ["enableDnsSupport"]


def test_an_s3_objects_key_is_its_resource_name_and_a_buckets_name_gets_a_suffix() -> None:
    aws = registry("aws")
    obj = aws.resource("aws:s3/bucketObject:BucketObject")
    assert with_auto_name(obj, {}, {"bucket": "b"}, b"seed", "index.html")["key"] == "index.html"
    bucket = aws.resource("aws:s3/bucket:Bucket")
    named = with_auto_name(bucket, {}, {}, b"seed", "site-bucket")["bucket"]
    assert named.startswith("site-bucket-") and len(named) == len("site-bucket-") + 7


def test_the_rds_snapshot_says_where_it_comes_from_and_when() -> None:
    offered = mysql_offerings()
    assert offered.snapshot_date == "2025-08-01"
    assert {"8.0", "8.4", "5.7"} <= offered.majors and "8.0.40" in offered.versions
    assert offered.latest("8.0") == "8.0.43" and "db.t4g.micro" in offered.classes


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"engineVersion": "8.0.99"}, "Cannot find version 8.0.99 for mysql"),
        ({"engineVersion": "9.99"}, "Cannot find version 9.99 for mysql"),
        ({"instanceClass": "db.foo.huge"}, "DBInstanceClass=db.foo.huge, Engine=mysql, "),
        (
            {"allocatedStorage": 5},
            "Invalid storage size for engine name mysql and storage type gp2: 5",
        ),
        ({"allocatedStorage": 50, "storageType": "io1"}, "storage type io1: 50"),
    ],
)
def test_what_aws_refuses_is_refused_in_its_words(change: dict[str, Any], message: str) -> None:
    ctx = CloudContext("http://127.0.0.1:9", "eu-west-1")
    with pytest.raises(ClientError) as refused:
        check_mysql_instance(ctx, "CreateDBInstance", {**MYSQL, **change}, None)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterCombination"
    assert message in str(refused.value) and refused.value.operation_name == "CreateDBInstance"


def test_what_aws_offers_passes_and_a_modify_checks_only_what_changes() -> None:
    ctx = CloudContext("http://127.0.0.1:9", "eu-west-1")
    for version in ("8.0", "8.0.43", "8.4.6", "5.7", "5.7.44"):
        check_mysql_instance(ctx, "CreateDBInstance", {**MYSQL, "engineVersion": version}, None)
    check_mysql_instance(ctx, "CreateDBInstance", {**MYSQL, "allocatedStorage": 20}, None)
    check_mysql_instance(
        ctx, "CreateDBInstance", {"engine": "postgres", "engineVersion": "99"}, None
    )
    old = {**MYSQL, "engineVersion": "8.0.35"}  # deployed when AWS still offered it
    check_mysql_instance(ctx, "ModifyDBInstance", old, frozenset({"tags"}))
    with pytest.raises(ClientError):
        check_mysql_instance(ctx, "ModifyDBInstance", old, frozenset({"engineVersion"}))
