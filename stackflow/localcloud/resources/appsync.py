"""AppSync GraphQL APIs and API keys of the local cloud's aws provider. Ids follow pulumi-aws: an
API's id is its API id, a key's `<api id>:<key id>`.

moto 5.2.5 has no AppSync data source or resolver calls (CreateDataSource, CreateResolver), so
those types are not served: a survey names them. A schema is sent with StartSchemaCreation; moto
does not give its text back, so the schema is not read back for drift.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, timestamp

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

API = "aws:appsync/graphQLApi:GraphQLApi"
API_KEY = "aws:appsync/apiKey:ApiKey"
_GONE = ("NotFoundException",)
DEFAULT_DESCRIPTION = "Managed by Pulumi"  # pulumi-aws's default for a key's description
_TAGGING = Tagging("list_tags_for_resource", "tag_resource", "untag_resource", key="resourceArn")


def _log_config(inputs: Props) -> dict[str, Any] | None:
    given = inputs.get("logConfig")
    if not given:
        return None
    found: dict[str, Any] = {
        "cloudWatchLogsRoleArn": str(given["cloudwatchLogsRoleArn"]),
        "fieldLogLevel": str(given["fieldLogLevel"]),
    }
    if given.get("excludeVerboseContent") is not None:
        found["excludeVerboseContent"] = bool(given["excludeVerboseContent"])
    return found


def _settings(inputs: Props) -> dict[str, Any]:
    """The API's settings as both CreateGraphqlApi and UpdateGraphqlApi take them."""
    settings: dict[str, Any] = {
        "name": str(inputs["name"]),
        "authenticationType": str(inputs["authenticationType"]),
        "xrayEnabled": bool(inputs.get("xrayEnabled")),
    }
    log_config = _log_config(inputs)
    if log_config:
        settings["logConfig"] = log_config
    return settings


def _send_schema(appsync: Any, api_id: str, inputs: Props) -> None:
    if inputs.get("schema"):
        appsync.start_schema_creation(apiId=api_id, definition=str(inputs["schema"]).encode())


def _api_create(appsync: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs = _settings(inputs)
    if inputs.get("visibility"):
        kwargs["visibility"] = str(inputs["visibility"])
    if input_tags(inputs):
        kwargs["tags"] = input_tags(inputs)
    api_id = str(appsync.create_graphql_api(**kwargs)["graphqlApi"]["apiId"])
    _send_schema(appsync, api_id, inputs)
    return api_id


def _api_observed(api: Answer, state: Props) -> Props:
    log_config = api.get("logConfig") or {}
    return {
        "name": api["name"],
        "authenticationType": api["authenticationType"],
        "xrayEnabled": bool(api.get("xrayEnabled")),
        "visibility": api.get("visibility"),
        "logConfig": {
            "cloudwatchLogsRoleArn": log_config.get("cloudWatchLogsRoleArn"),
            "fieldLogLevel": log_config.get("fieldLogLevel"),
            "excludeVerboseContent": log_config.get("excludeVerboseContent"),
        }
        if log_config
        else None,
    }


def _api_update(
    appsync: Any, api_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    if changed - {"schema"}:
        appsync.update_graphql_api(apiId=api_id, **_settings(inputs))
    if "schema" in changed:
        _send_schema(appsync, api_id, inputs)


API_SHAPE = Shape(
    token=API,
    service="appsync",
    inputs=(
        "name",
        "authenticationType",
        "schema",
        "xrayEnabled",
        "visibility",
        "logConfig",
        "tags",
    ),
    create=_api_create,
    describe=lambda appsync, api_id, state: appsync.get_graphql_api(apiId=api_id)["graphqlApi"],
    gone=_GONE,
    outputs=lambda api, ctx: {"arn": api["arn"], "uris": dict(api.get("uris") or {})},
    observed=_api_observed,
    update=_api_update,
    delete=lambda appsync, api_id, state: appsync.delete_graphql_api(apiId=api_id),
    tagging=_TAGGING,
    computed=("arn", "uris"),
)


# --- API key -------------------------------------------------------------------------------


def _epoch(rfc3339: Any) -> int:
    return int(datetime.fromisoformat(str(rfc3339).replace("Z", "+00:00")).timestamp())


def _key_create(appsync: Any, inputs: Props, ctx: CloudContext) -> tuple[str, Props]:
    kwargs: dict[str, Any] = {"apiId": str(inputs["apiId"])}
    if inputs.get("description"):
        kwargs["description"] = str(inputs["description"])
    if inputs.get("expires"):
        kwargs["expires"] = _epoch(inputs["expires"])
    key = appsync.create_api_key(**kwargs)["apiKey"]
    return f"{inputs['apiId']}:{key['id']}", {"key": key["id"]}


def _key_describe(appsync: Any, id: str, state: Props) -> Answer | None:
    api_id, key_id = id.split(":", 1)
    for key in appsync.list_api_keys(apiId=api_id)["apiKeys"]:
        if key["id"] == key_id:
            return {**key, "apiId": api_id}
    return None


def _key_observed(key: Answer, state: Props) -> Props:
    cloud, known = int(key["expires"]), state.get("expires")
    same = bool(known) and _epoch(known) == cloud  # the state's spelling of the same moment
    return {
        "apiId": key["apiId"],
        "description": key.get("description") or "",
        "expires": known if same else timestamp(datetime.fromtimestamp(cloud, UTC)),
    }


def _key_update(
    appsync: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    api_id, key_id = id.split(":", 1)
    kwargs: dict[str, Any] = {"apiId": api_id, "id": key_id}
    if "description" in changed:
        kwargs["description"] = str(inputs.get("description") or "")
    if "expires" in changed and inputs.get("expires"):
        kwargs["expires"] = _epoch(inputs["expires"])
    appsync.update_api_key(**kwargs)


KEY_SHAPE = Shape(
    token=API_KEY,
    service="appsync",
    inputs=("apiId", "description", "expires"),
    create=_key_create,
    describe=_key_describe,
    gone=_GONE,
    outputs=lambda key, ctx: {
        "apiKeyId": key["id"],
        "expires": timestamp(datetime.fromtimestamp(int(key["expires"]), UTC)),
    },
    observed=_key_observed,
    update=_key_update,
    delete=lambda appsync, id, state: appsync.delete_api_key(
        apiId=id.split(":", 1)[0], id=id.split(":", 1)[1]
    ),
    computed=("key", "apiKeyId", "expires"),
)


def register(aws: Registry) -> None:
    """Add the AppSync GraphQL API and API key types."""
    aws.add(
        API_SHAPE.type(
            force_new={"visibility"},
            auto_name="name",
            auto_name_max=65536,
        ),
        KEY_SHAPE.type(force_new={"apiId"}, defaults={"description": DEFAULT_DESCRIPTION}),
    )
