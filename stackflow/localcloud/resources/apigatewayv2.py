"""API Gateway v2 (HTTP and WebSocket) APIs in the local cloud: the API, integrations, routes
and stages (defined, never invoked). Ids follow pulumi-aws: AWS's ids for the API, an
integration and a route; a stage's id is its name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

API = "aws:apigatewayv2/api:Api"
INTEGRATION = "aws:apigatewayv2/integration:Integration"
ROUTE = "aws:apigatewayv2/route:Route"
STAGE = "aws:apigatewayv2/stage:Stage"
_GONE = ("NotFoundException",)


def _fields(
    inputs: Props, fields: dict[str, tuple[str, type]], keys: frozenset[str] | None = None
) -> dict[str, Any]:
    """The inputs in `fields` that are set (and in `keys`, when given), under their API names."""
    return {
        api: kind(inputs[key])
        for key, (api, kind) in fields.items()
        if inputs.get(key) not in (None, "") and (keys is None or key in keys)
    }


def _observed(fields: dict[str, tuple[str, type]]) -> Any:
    def observed(found: Answer, state: Props) -> Props:
        return {key: kind(found[api]) for key, (api, kind) in fields.items() if api in found}

    return observed


def _api_arn(ctx: CloudContext, api: str) -> str:
    return f"arn:aws:apigateway:{ctx.region}::/apis/{api}"


def _execution_arn(ctx: CloudContext, api: str) -> str:
    return f"arn:aws:execute-api:{ctx.region}:{ctx.account_id}:{api}"


# --- the API --------------------------------------------------------------------------------

_API_FIELDS: dict[str, tuple[str, type]] = {
    "name": ("Name", str),
    "protocolType": ("ProtocolType", str),
    "description": ("Description", str),
    "routeSelectionExpression": ("RouteSelectionExpression", str),
    "apiKeySelectionExpression": ("ApiKeySelectionExpression", str),
    "disableExecuteApiEndpoint": ("DisableExecuteApiEndpoint", bool),
    "version": ("Version", str),
}


def _api_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs = _fields(inputs, _API_FIELDS)
    for key, api in (
        ("routeKey", "RouteKey"),
        ("target", "Target"),
        ("credentialsArn", "CredentialsArn"),
    ):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    if input_tags(inputs):
        kwargs["Tags"] = input_tags(inputs)
    return str(client.create_api(**kwargs)["ApiId"])


API_SHAPE = Shape(
    token=API,
    service="apigatewayv2",
    inputs=(*_API_FIELDS, "routeKey", "target", "credentialsArn", "tags"),
    create=_api_create,
    describe=lambda client, id, state: client.get_api(ApiId=id),
    gone=_GONE,
    outputs=lambda api, ctx: {
        "apiEndpoint": api.get("ApiEndpoint", ""),
        "arn": _api_arn(ctx, str(api["ApiId"])),
        "executionArn": _execution_arn(ctx, str(api["ApiId"])),
    },
    observed=_observed({k: v for k, v in _API_FIELDS.items() if k != "disableExecuteApiEndpoint"}),
    update=lambda client, id, state, inputs, changed: client.update_api(
        ApiId=id, **_fields(inputs, _API_FIELDS, changed - {"protocolType"})
    ),
    delete=lambda client, id, state: client.delete_api(ApiId=id),
    tagging=Tagging(
        "get_tags",
        "tag_resource",
        "untag_resource",
        key="ResourceArn",
        field="Tags",
        keys="TagKeys",
        described="Tags",
    ),
    computed=("apiEndpoint", "arn", "executionArn"),
)


# --- integrations and routes ----------------------------------------------------------------

_INTEGRATION_FIELDS: dict[str, tuple[str, type]] = {
    "integrationType": ("IntegrationType", str),
    "integrationUri": ("IntegrationUri", str),
    "integrationMethod": ("IntegrationMethod", str),
    "connectionType": ("ConnectionType", str),
    "connectionId": ("ConnectionId", str),
    "description": ("Description", str),
    "passthroughBehavior": ("PassthroughBehavior", str),
    "payloadFormatVersion": ("PayloadFormatVersion", str),
    "timeoutMilliseconds": ("TimeoutInMillis", int),
    "credentialsArn": ("CredentialsArn", str),
    "integrationSubtype": ("IntegrationSubtype", str),
    "templateSelectionExpression": ("TemplateSelectionExpression", str),
    "contentHandlingStrategy": ("ContentHandlingStrategy", str),
}
_ROUTE_FIELDS: dict[str, tuple[str, type]] = {
    "routeKey": ("RouteKey", str),
    "target": ("Target", str),
    "authorizationType": ("AuthorizationType", str),
    "authorizerId": ("AuthorizerId", str),
    "apiKeyRequired": ("ApiKeyRequired", bool),
    "operationName": ("OperationName", str),
    "routeResponseSelectionExpression": ("RouteResponseSelectionExpression", str),
    "modelSelectionExpression": ("ModelSelectionExpression", str),
}


def _part(token: str, kind: str, id_field: str, fields: dict[str, tuple[str, type]]) -> Shape:
    """An API's integration or route (`kind`): made, got, updated and deleted by its id."""
    title = kind.title()

    def create(client: Any, inputs: Props, ctx: CloudContext) -> str:
        made = getattr(client, f"create_{kind}")(
            ApiId=str(inputs["apiId"]), **_fields(inputs, fields)
        )
        return str(made[id_field])

    return Shape(
        token=token,
        service="apigatewayv2",
        inputs=("apiId", *fields, "requestParameters", "requestTemplates"),
        create=create,
        describe=lambda client, id, state: getattr(client, f"get_{kind}")(
            ApiId=str(state["apiId"]), **{f"{title}Id": id}
        ),
        gone=_GONE,
        outputs=lambda found, ctx: {},
        observed=_observed(fields),
        update=lambda client, id, state, inputs, changed: getattr(client, f"update_{kind}")(
            ApiId=str(inputs["apiId"]), **{f"{title}Id": id}, **_fields(inputs, fields, changed)
        ),
        delete=lambda client, id, state: getattr(client, f"delete_{kind}")(
            ApiId=str(state["apiId"]), **{f"{title}Id": id}
        ),
    )


INTEGRATION_SHAPE = _part(INTEGRATION, "integration", "IntegrationId", _INTEGRATION_FIELDS)
ROUTE_SHAPE = _part(ROUTE, "route", "RouteId", _ROUTE_FIELDS)


# --- stages ---------------------------------------------------------------------------------


def _route_settings(given: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setting in given or []:
        entry: dict[str, Any] = {}
        if setting.get("throttlingBurstLimit") is not None:
            entry["ThrottlingBurstLimit"] = int(setting["throttlingBurstLimit"])
        if setting.get("throttlingRateLimit") is not None:
            entry["ThrottlingRateLimit"] = float(setting["throttlingRateLimit"])
        out[str(setting["routeKey"])] = entry
    return out


def _stage_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "ApiId": str(inputs["apiId"]),
        "StageName": str(inputs["name"]),
        "AutoDeploy": bool(inputs.get("autoDeploy")),
    }
    if inputs.get("description"):
        kwargs["Description"] = str(inputs["description"])
    if inputs.get("deploymentId"):
        kwargs["DeploymentId"] = str(inputs["deploymentId"])
    if inputs.get("stageVariables"):
        kwargs["StageVariables"] = {str(k): str(v) for k, v in inputs["stageVariables"].items()}
    if inputs.get("routeSettings"):
        kwargs["RouteSettings"] = _route_settings(inputs["routeSettings"])
    if input_tags(inputs):
        kwargs["Tags"] = input_tags(inputs)
    client.create_stage(**kwargs)
    return str(inputs["name"])


def _stage_outputs(stage: Answer, ctx: CloudContext) -> Props:
    api, name = str(stage["ApiId"]), str(stage["StageName"])
    return {
        "arn": f"{_api_arn(ctx, api)}/stages/{name}",
        "executionArn": f"{_execution_arn(ctx, api)}/{name}",
        "invokeUrl": f"https://{api}.execute-api.{ctx.region}.amazonaws.com/{name}",
    }


STAGE_SHAPE = Shape(
    token=STAGE,
    service="apigatewayv2",
    inputs=(
        "apiId",
        "name",
        "autoDeploy",
        "description",
        "deploymentId",
        "stageVariables",
        "routeSettings",
        "defaultRouteSettings",
        "tags",
    ),
    create=_stage_create,
    describe=lambda client, name, state: {
        **client.get_stage(ApiId=str(state["apiId"]), StageName=name),
        "ApiId": state["apiId"],
        "StageName": name,
    },
    gone=_GONE,
    outputs=_stage_outputs,
    observed=lambda stage, state: {
        "autoDeploy": bool(stage.get("AutoDeploy")),
        "description": stage.get("Description", ""),
    },
    delete=lambda client, name, state: client.delete_stage(
        ApiId=str(state["apiId"]), StageName=name
    ),
    tagging=Tagging(
        "get_tags",
        "tag_resource",
        "untag_resource",
        key="ResourceArn",
        field="Tags",
        keys="TagKeys",
        described="Tags",
    ),
    computed=("arn", "executionArn", "invokeUrl"),
)


def register(aws: Registry) -> None:
    """Add the API Gateway v2 API, integration, route and stage types."""
    aws.add(
        API_SHAPE.type(
            force_new={"protocolType"},
            auto_name="name",
            defaults={
                "apiKeySelectionExpression": "$request.header.x-api-key",
                "routeSelectionExpression": "$request.method $request.path",
            },
        ),
        INTEGRATION_SHAPE.type(
            force_new={"apiId", "integrationType"},
            defaults={"connectionType": "INTERNET"},
        ),
        ROUTE_SHAPE.type(
            force_new={"apiId"},
            defaults={"authorizationType": "NONE", "apiKeyRequired": False},
        ),
        # moto 5.2.5 routes no tag calls for a stage's ARN: new tags make a new stage.
        STAGE_SHAPE.type(
            force_new={"tags"}, auto_name="name", auto_name_max=128, defaults={"autoDeploy": False}
        ),
    )
