"""DynamoDB tables of the local cloud's aws provider (id = the table's name, as in pulumi-aws),
and `getTable`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, same_members

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

TABLE = "aws:dynamodb/table:Table"
GET_TABLE = "aws:dynamodb/getTable:getTable"
_TAGGING = Tagging(
    "list_tags_of_resource",
    "tag_resource",
    "untag_resource",
    key="ResourceArn",
    field="Tags",
    keys="TagKeys",
    item=KEY_VALUE,
)


def _keys(hash_key: Any, range_key: Any) -> list[dict[str, str]]:
    keys = [{"AttributeName": str(hash_key), "KeyType": "HASH"}]
    if range_key:
        keys.append({"AttributeName": str(range_key), "KeyType": "RANGE"})
    return keys


def _throughput(given: Mapping[str, Any]) -> dict[str, int]:
    return {
        "ReadCapacityUnits": int(given.get("readCapacity") or 0),
        "WriteCapacityUnits": int(given.get("writeCapacity") or 0),
    }


def _provisioned(inputs: Props) -> bool:
    return str(inputs.get("billingMode") or "PROVISIONED") == "PROVISIONED"


def _index(given: Mapping[str, Any], provisioned: bool) -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": str(given.get("projectionType") or "ALL")}
    if given.get("nonKeyAttributes"):
        projection["NonKeyAttributes"] = [str(a) for a in given["nonKeyAttributes"]]
    index: dict[str, Any] = {
        "IndexName": str(given["name"]),
        "KeySchema": _keys(given.get("hashKey"), given.get("rangeKey")),
        "Projection": projection,
    }
    if provisioned and "readCapacity" in given:
        index["ProvisionedThroughput"] = _throughput(given)
    return index


def _create(dynamodb: Any, inputs: Props, ctx: CloudContext) -> str:
    provisioned = _provisioned(inputs)
    kwargs: dict[str, Any] = {
        "TableName": str(inputs["name"]),
        "AttributeDefinitions": [
            {"AttributeName": str(a["name"]), "AttributeType": str(a["type"])}
            for a in inputs.get("attributes") or []
        ],
        "KeySchema": _keys(inputs["hashKey"], inputs.get("rangeKey")),
        "BillingMode": "PROVISIONED" if provisioned else "PAY_PER_REQUEST",
    }
    if provisioned:
        kwargs["ProvisionedThroughput"] = _throughput(inputs)
    if inputs.get("globalSecondaryIndexes"):
        kwargs["GlobalSecondaryIndexes"] = [
            _index(i, provisioned) for i in inputs["globalSecondaryIndexes"]
        ]
    if inputs.get("localSecondaryIndexes"):
        local = [
            {**_index(i, False), "KeySchema": _keys(inputs["hashKey"], i["rangeKey"])}
            for i in inputs["localSecondaryIndexes"]
        ]
        kwargs["LocalSecondaryIndexes"] = local
    if inputs.get("streamEnabled"):
        kwargs["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": str(inputs["streamViewType"]),
        }
    if inputs.get("tableClass"):
        kwargs["TableClass"] = str(inputs["tableClass"])
    if input_tags(inputs):
        kwargs["Tags"] = _TAGGING.wire(input_tags(inputs))
    return str(dynamodb.create_table(**kwargs)["TableDescription"]["TableName"])


def _outputs(table: Answer, ctx: CloudContext) -> Props:
    return {
        "arn": table["TableArn"],
        "streamArn": table.get("LatestStreamArn", ""),
        "streamLabel": table.get("LatestStreamLabel", ""),
    }


def _observed(table: Answer, state: Props) -> Props:
    keys = {k["KeyType"]: k["AttributeName"] for k in table.get("KeySchema", [])}
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
    throughput = table.get("ProvisionedThroughput") or {}
    stream = table.get("StreamSpecification") or {}
    attributes = [
        {"name": a["AttributeName"], "type": a["AttributeType"]}
        for a in table.get("AttributeDefinitions", [])
    ]
    observed: Props = {
        "name": table["TableName"],
        "hashKey": keys.get("HASH"),
        "rangeKey": keys.get("RANGE"),
        "billingMode": billing,
        "attributes": same_members(attributes, state.get("attributes")),
        "streamEnabled": bool(stream.get("StreamEnabled")),
        "streamViewType": stream.get("StreamViewType"),
    }
    if billing == "PROVISIONED":
        observed["readCapacity"] = throughput.get("ReadCapacityUnits")
        observed["writeCapacity"] = throughput.get("WriteCapacityUnits")
    return observed


def _update(dynamodb: Any, name: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    kwargs: dict[str, Any] = {"TableName": name}
    if changed & {"billingMode", "readCapacity", "writeCapacity"}:
        provisioned = _provisioned(inputs)
        kwargs["BillingMode"] = "PROVISIONED" if provisioned else "PAY_PER_REQUEST"
        if provisioned:
            kwargs["ProvisionedThroughput"] = _throughput(inputs)
    if changed & {"streamEnabled", "streamViewType"}:
        spec: dict[str, Any] = {"StreamEnabled": bool(inputs.get("streamEnabled"))}
        if inputs.get("streamEnabled"):
            spec["StreamViewType"] = str(inputs["streamViewType"])
        kwargs["StreamSpecification"] = spec
    if len(kwargs) > 1:
        dynamodb.update_table(**kwargs)


SHAPE = Shape(
    token=TABLE,
    service="dynamodb",
    inputs=(
        "name",
        "attributes",
        "hashKey",
        "rangeKey",
        "billingMode",
        "readCapacity",
        "writeCapacity",
        "globalSecondaryIndexes",
        "localSecondaryIndexes",
        "streamEnabled",
        "streamViewType",
        "tableClass",
        "tags",
    ),
    create=_create,
    describe=lambda dynamodb, name, state: dynamodb.describe_table(TableName=name)["Table"],
    gone=("ResourceNotFoundException",),
    outputs=_outputs,
    observed=_observed,
    update=_update,
    delete=lambda dynamodb, name, state: dynamodb.delete_table(TableName=name),
    tagging=_TAGGING,
    computed=("arn", "streamArn", "streamLabel"),
)


def get_table(ctx: CloudContext, args: Props) -> Props:
    """aws:dynamodb/getTable: a table by name, in pulumi-aws's result shape."""
    table = ctx.client("dynamodb").describe_table(TableName=str(args["name"]))["Table"]
    return {**_observed(table, {}), **_outputs(table, ctx), "id": table["TableName"]}


def register(aws: Registry) -> None:
    """Add the DynamoDB table type and getTable."""
    aws.add(
        SHAPE.type(
            force_new={"name", "hashKey", "rangeKey", "localSecondaryIndexes", "attributes"},
            auto_name="name",
            defaults={"billingMode": "PROVISIONED"},
        )
    )
    aws.function(GET_TABLE)(get_table)
