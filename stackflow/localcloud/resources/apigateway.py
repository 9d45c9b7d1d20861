"""API Gateway REST APIs in the local cloud: the API (from its own settings or an OpenAPI
`body`), resources, methods, integrations, their responses, deployments and stages (defined,
never invoked: nothing answers at the invoke URL here). Ids follow pulumi-aws: the API's,
a resource's and a deployment's are AWS's ids; a method's `agm-<api>-<resource>-<method>`, an
integration's `agi-...`, their responses' `agmr-...-<status>` and `agir-...-<status>`, a stage's
`ags-<api>-<stage>`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

REST_API = "aws:apigateway/restApi:RestApi"
RESOURCE = "aws:apigateway/resource:Resource"
METHOD = "aws:apigateway/method:Method"
INTEGRATION = "aws:apigateway/integration:Integration"
METHOD_RESPONSE = "aws:apigateway/methodResponse:MethodResponse"
INTEGRATION_RESPONSE = "aws:apigateway/integrationResponse:IntegrationResponse"
DEPLOYMENT = "aws:apigateway/deployment:Deployment"
STAGE = "aws:apigateway/stage:Stage"
_GONE = ("NotFoundException",)
_TAGGING = Tagging(
    "get_tags", "tag_resource", "untag_resource", key="resourceArn", described="tags"
)


def _execution_arn(ctx: CloudContext, api: str) -> str:
    return f"arn:aws:execute-api:{ctx.region}:{ctx.account_id}:{api}"


def _invoke_url(ctx: CloudContext, api: str, stage: str = "") -> str:
    return f"https://{api}.execute-api.{ctx.region}.amazonaws.com/{stage}"


def _texts(inputs: Props, fields: dict[str, str]) -> dict[str, Any]:
    """The inputs in `fields` that are set, under their API names."""
    return {api: inputs[key] for key, api in fields.items() if inputs.get(key) not in (None, "")}


# --- the API --------------------------------------------------------------------------------


def _api_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "name": str(inputs["name"]),
        **_texts(inputs, {"description": "description", "apiKeySource": "apiKeySource"}),
    }
    if inputs.get("binaryMediaTypes"):
        kwargs["binaryMediaTypes"] = [str(t) for t in inputs["binaryMediaTypes"]]
    endpoint = inputs.get("endpointConfiguration") or {}
    if endpoint.get("types"):
        kwargs["endpointConfiguration"] = {"types": [str(t) for t in endpoint["types"]]}
    if input_tags(inputs):
        kwargs["tags"] = input_tags(inputs)
    api_id = str(client.create_rest_api(**kwargs)["id"])
    if inputs.get("body"):
        _api_body(client, api_id, inputs)
    return api_id


def _api_body(client: Any, api_id: str, inputs: Props) -> None:
    client.put_rest_api(
        restApiId=api_id,
        mode=str(inputs.get("putRestApiMode") or "overwrite"),
        failOnWarnings=bool(inputs.get("failOnWarnings")),
        body=_openapi3(str(inputs["body"])).encode(),
    )


def _openapi3(body: str) -> str:
    """The body as moto 5.2.5 imports it: OpenAPI 3 only, where AWS takes Swagger 2.0 too (the
    paths and their `x-amazon-apigateway-*` extensions, all that is read here, are the same)."""
    try:
        document = json.loads(body)
    except ValueError:
        return body  # YAML, or not a document: AWS's (moto's) own refusal says which
    if not isinstance(document, dict) or "swagger" not in document:
        return body
    document = {k: v for k, v in document.items() if k != "swagger"}
    return json.dumps({"openapi": "3.0.1", **document})


def _api_describe(client: Any, api_id: str, state: Props) -> Answer:
    api = dict(client.get_rest_api(restApiId=api_id))
    resources = client.get_resources(restApiId=api_id, limit=500)["items"]
    api["rootResourceId"] = next((r["id"] for r in resources if r.get("path") == "/"), "")
    return api


def _api_outputs(api: Answer, ctx: CloudContext) -> Props:
    created: Any = api.get("createdDate")
    return {
        "rootResourceId": api["rootResourceId"],
        "createdDate": created.isoformat() if hasattr(created, "isoformat") else str(created),
        "executionArn": _execution_arn(ctx, str(api["id"])),
        "arn": f"arn:aws:apigateway:{ctx.region}::/restapis/{api['id']}",
    }


def _api_update(
    client: Any, api_id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    operations = [
        {"op": "replace", "path": f"/{key}", "value": str(inputs.get(key) or "")}
        for key in ("name", "description", "apiKeySource")
        if key in changed
    ]
    if operations:
        client.update_rest_api(restApiId=api_id, patchOperations=operations)
    if "body" in changed and inputs.get("body"):
        _api_body(client, api_id, inputs)


API_SHAPE = Shape(
    token=REST_API,
    service="apigateway",
    inputs=(
        "name",
        "description",
        "body",
        "apiKeySource",
        "binaryMediaTypes",
        "endpointConfiguration",
        "putRestApiMode",
        "failOnWarnings",
        "disableExecuteApiEndpoint",
        "tags",
    ),
    create=_api_create,
    describe=_api_describe,
    gone=_GONE,
    outputs=_api_outputs,
    observed=lambda api, state: {"name": api["name"], "description": api.get("description", "")},
    update=_api_update,
    delete=lambda client, api_id, state: client.delete_rest_api(restApiId=api_id),
    tagging=_TAGGING,
    computed=("rootResourceId", "createdDate", "executionArn", "arn"),
)


# --- resources ------------------------------------------------------------------------------


def _resource_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    answer = client.create_resource(
        restApiId=str(inputs["restApi"]),
        parentId=str(inputs["parentId"]),
        pathPart=str(inputs["pathPart"]),
    )
    return str(answer["id"])


RESOURCE_SHAPE = Shape(
    token=RESOURCE,
    service="apigateway",
    inputs=("restApi", "parentId", "pathPart"),
    create=_resource_create,
    describe=lambda client, id, state: client.get_resource(
        restApiId=str(state["restApi"]), resourceId=id
    ),
    gone=_GONE,
    outputs=lambda resource, ctx: {"path": resource.get("path", "")},
    observed=lambda resource, state: {
        "parentId": resource.get("parentId"),
        "pathPart": resource.get("pathPart"),
    },
    delete=lambda client, id, state: client.delete_resource(
        restApiId=str(state["restApi"]), resourceId=id
    ),
    computed=("path",),
)


# --- methods, integrations and their responses: one shape each, keyed the same way ----------


def _where(given: Props) -> dict[str, str]:
    return {
        "restApiId": str(given["restApi"]),
        "resourceId": str(given["resourceId"]),
        "httpMethod": str(given["httpMethod"]),
    }


def _keyed(prefix: str, given: Props) -> str:
    where = _where(given)
    key = f"{prefix}-{where['restApiId']}-{where['resourceId']}-{where['httpMethod']}"
    return f"{key}-{given['statusCode']}" if "statusCode" in given else key


def _put(
    call: str, prefix: str, fields: dict[str, str], extra: Callable[[Props], dict[str, Any]]
) -> Callable[..., str]:
    """A create (and update) that puts the whole thing again: AWS's put calls replace it."""

    def put(client: Any, inputs: Props, ctx: CloudContext | None = None) -> str:
        kwargs = {**_where(inputs), **_texts(inputs, fields), **extra(inputs)}
        getattr(client, call)(**kwargs)
        return _keyed(prefix, inputs)

    return put


def _status(inputs: Props) -> dict[str, Any]:
    return {"statusCode": str(inputs["statusCode"])}


def _get(client: Any, kind: str, state: Props) -> Answer | None:
    """A method's or integration's part; a response read from its method or integration (moto
    5.2.5 answers a missing response's own get with a 500)."""
    if not kind.endswith("_response"):
        found: Answer = getattr(client, f"get_{kind}")(**_where(state))
        return found if found.get("httpMethod") or found.get("type") else None  # moto: {} gone
    parent = getattr(client, f"get_{kind.removesuffix('_response')}")(**_where(state))
    field = "methodResponses" if kind == "method_response" else "integrationResponses"
    response: Answer | None = (parent.get(field) or {}).get(str(state["statusCode"]))
    return response


def _sub(
    token: str,
    prefix: str,
    kind: str,
    fields: dict[str, str],
    extra: Callable[[Props], dict[str, Any]],
    inputs: tuple[str, ...],
    updates: bool,
) -> Shape:
    """A method's or integration's part (`kind`: method, integration, method_response,
    integration_response), all four put, got and deleted with the same arguments."""
    put = _put(f"put_{kind}", prefix, fields, extra)
    status = kind.endswith("response")

    def where(state: Props) -> dict[str, Any]:
        return {**_where(state), **(_status(state) if status else {})}

    def observed(found: Answer, state: Props) -> Props:
        return {key: found.get(api) for key, api in fields.items() if api in found}

    return Shape(
        token=token,
        service="apigateway",
        inputs=(
            "restApi",
            "resourceId",
            "httpMethod",
            *(("statusCode",) if status else ()),
            *inputs,
        ),
        create=put,
        describe=lambda client, id, state: _get(client, kind, state),
        gone=_GONE,
        outputs=lambda found, ctx: {},
        observed=observed,
        update=(lambda client, id, state, inputs, changed: put(client, inputs))
        if updates
        else None,
        delete=lambda client, id, state: _delete(client, kind, where(state), state),
    )


def _delete(client: Any, kind: str, where: dict[str, Any], state: Props) -> None:
    # Gone already (a put of its integration replaces the responses): moto 5.2.5 answers a
    # delete of what is not there with a 500, AWS with NotFound.
    if _get(client, kind, state) is not None:
        getattr(client, f"delete_{kind}")(**where)


METHOD_SHAPE = _sub(
    METHOD,
    "agm",
    "method",
    {
        "authorization": "authorizationType",
        "authorizerId": "authorizerId",
        "operationName": "operationName",
    },
    lambda inputs: {
        "apiKeyRequired": bool(inputs.get("apiKeyRequired")),
        **(
            {"requestParameters": inputs["requestParameters"]}
            if inputs.get("requestParameters")
            else {}
        ),
        **({"requestModels": inputs["requestModels"]} if inputs.get("requestModels") else {}),
    },
    (
        "authorization",
        "authorizerId",
        "operationName",
        "apiKeyRequired",
        "requestParameters",
        "requestModels",
    ),
    updates=False,
)
_INTEGRATION_FIELDS = {
    "type": "type",
    "integrationHttpMethod": "httpMethod",
    "uri": "uri",
    "passthroughBehavior": "passthroughBehavior",
    "contentHandling": "contentHandling",
    "connectionType": "connectionType",
    "connectionId": "connectionId",
    "credentials": "credentials",
}
INTEGRATION_SHAPE = _sub(
    INTEGRATION,
    "agi",
    "integration",
    {k: v for k, v in _INTEGRATION_FIELDS.items() if k != "integrationHttpMethod"},
    lambda inputs: {
        **(
            {"integrationHttpMethod": str(inputs["integrationHttpMethod"])}
            if inputs.get("integrationHttpMethod")
            else {}
        ),
        **(
            {"requestTemplates": inputs["requestTemplates"]}
            if inputs.get("requestTemplates")
            else {}
        ),
        **(
            {"requestParameters": inputs["requestParameters"]}
            if inputs.get("requestParameters")
            else {}
        ),
        **(
            {"timeoutInMillis": int(inputs["timeoutMilliseconds"])}
            if inputs.get("timeoutMilliseconds")
            else {}
        ),
    },
    (
        *_INTEGRATION_FIELDS,
        "requestTemplates",
        "requestParameters",
        "timeoutMilliseconds",
        "cacheKeyParameters",
        "cacheNamespace",
    ),
    updates=True,
)
METHOD_RESPONSE_SHAPE = _sub(
    METHOD_RESPONSE,
    "agmr",
    "method_response",
    {},
    lambda inputs: {
        **_status(inputs),
        **({"responseModels": inputs["responseModels"]} if inputs.get("responseModels") else {}),
        **(
            {"responseParameters": inputs["responseParameters"]}
            if inputs.get("responseParameters")
            else {}
        ),
    },
    ("responseModels", "responseParameters"),
    updates=True,
)
INTEGRATION_RESPONSE_SHAPE = _sub(
    INTEGRATION_RESPONSE,
    "agir",
    "integration_response",
    {"selectionPattern": "selectionPattern", "contentHandling": "contentHandling"},
    lambda inputs: {
        **_status(inputs),
        **(
            {"responseTemplates": inputs["responseTemplates"]}
            if inputs.get("responseTemplates")
            else {}
        ),
        **(
            {"responseParameters": inputs["responseParameters"]}
            if inputs.get("responseParameters")
            else {}
        ),
    },
    ("selectionPattern", "contentHandling", "responseTemplates", "responseParameters"),
    updates=True,
)


# --- deployments and stages -----------------------------------------------------------------


def _deployment_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {"restApiId": str(inputs["restApi"])}
    if inputs.get("description"):
        kwargs["description"] = str(inputs["description"])
    if inputs.get("variables"):
        kwargs["variables"] = {str(k): str(v) for k, v in inputs["variables"].items()}
    return str(client.create_deployment(**kwargs)["id"])


def _deployment_outputs(deployment: Answer, ctx: CloudContext) -> Props:
    created: Any = deployment.get("createdDate")
    api = str(deployment["restApiId"])
    return {
        "createdDate": created.isoformat() if hasattr(created, "isoformat") else str(created),
        "executionArn": _execution_arn(ctx, api),
        "invokeUrl": _invoke_url(ctx, api),
    }


def _deployment_describe(client: Any, id: str, state: Props) -> Answer | None:
    # Listed, not got: moto 5.2.5 answers GetDeployment of a deleted deployment with a 500.
    listed = client.get_deployments(restApiId=str(state["restApi"]), limit=500)["items"]
    found = next((d for d in listed if d["id"] == id), None)
    return {**found, "restApiId": state["restApi"]} if found else None


DEPLOYMENT_SHAPE = Shape(
    token=DEPLOYMENT,
    service="apigateway",
    inputs=("restApi", "description", "triggers", "variables"),
    create=_deployment_create,
    describe=_deployment_describe,
    gone=_GONE,
    outputs=_deployment_outputs,
    update=lambda client, id, state, inputs, changed: client.update_deployment(
        restApiId=str(inputs["restApi"]),
        deploymentId=id,
        patchOperations=[
            {"op": "replace", "path": "/description", "value": str(inputs.get("description") or "")}
        ],
    ),
    delete=lambda client, id, state: client.delete_deployment(
        restApiId=str(state["restApi"]), deploymentId=id
    ),
    computed=("createdDate", "executionArn", "invokeUrl"),
)


def _stage_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    api, name = str(inputs["restApi"]), str(inputs["stageName"])
    kwargs: dict[str, Any] = {
        "restApiId": api,
        "stageName": name,
        "deploymentId": str(inputs["deployment"]),
        **_texts(inputs, {"description": "description"}),
    }
    if inputs.get("variables"):
        kwargs["variables"] = {str(k): str(v) for k, v in inputs["variables"].items()}
    if inputs.get("cacheClusterEnabled"):
        kwargs["cacheClusterEnabled"] = True
    if input_tags(inputs):
        kwargs["tags"] = input_tags(inputs)
    client.create_stage(**kwargs)
    return f"ags-{api}-{name}"


def _stage_outputs(stage: Answer, ctx: CloudContext) -> Props:
    api, name = str(stage["restApiId"]), str(stage["stageName"])
    return {
        "arn": f"arn:aws:apigateway:{ctx.region}::/restapis/{api}/stages/{name}",
        "invokeUrl": _invoke_url(ctx, api, name),
        "executionArn": f"{_execution_arn(ctx, api)}/{name}",
        "webAclArn": "",
    }


def _stage_update(
    client: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    fields = {"deployment": "/deploymentId", "description": "/description"}
    operations = [
        {"op": "replace", "path": path, "value": str(inputs.get(key) or "")}
        for key, path in fields.items()
        if key in changed
    ]
    if operations:
        client.update_stage(
            restApiId=str(inputs["restApi"]),
            stageName=str(inputs["stageName"]),
            patchOperations=operations,
        )


STAGE_SHAPE = Shape(
    token=STAGE,
    service="apigateway",
    inputs=(
        "restApi",
        "stageName",
        "deployment",
        "description",
        "variables",
        "cacheClusterEnabled",
        "xrayTracingEnabled",
        "tags",
    ),
    create=_stage_create,
    describe=lambda client, id, state: {
        **client.get_stage(restApiId=str(state["restApi"]), stageName=str(state["stageName"])),
        "restApiId": state["restApi"],
        "stageName": state["stageName"],
    },
    gone=_GONE,
    outputs=_stage_outputs,
    observed=lambda stage, state: {
        "deployment": stage.get("deploymentId"),
        "description": stage.get("description", ""),
    },
    update=_stage_update,
    delete=lambda client, id, state: client.delete_stage(
        restApiId=str(state["restApi"]), stageName=str(state["stageName"])
    ),
    tagging=_TAGGING,
    computed=("arn", "invokeUrl", "executionArn", "webAclArn"),
)


def register(aws: Registry) -> None:
    """Add the API Gateway REST API types."""
    aws.add(
        API_SHAPE.type(
            # moto 5.2.5 routes no tag calls for a REST API's ARN: new tags make a new API.
            force_new={"tags"},
            auto_name="name",
            defaults={"putRestApiMode": "overwrite", "failOnWarnings": False},
        ),
        RESOURCE_SHAPE.type(),
        METHOD_SHAPE.type(defaults={"apiKeyRequired": False}),
        INTEGRATION_SHAPE.type(
            force_new={"restApi", "resourceId", "httpMethod"},
            defaults={"connectionType": "INTERNET"},
        ),
        METHOD_RESPONSE_SHAPE.type(force_new={"restApi", "resourceId", "httpMethod", "statusCode"}),
        INTEGRATION_RESPONSE_SHAPE.type(
            force_new={"restApi", "resourceId", "httpMethod", "statusCode"}
        ),
        DEPLOYMENT_SHAPE.type(force_new={"restApi", "triggers", "variables"}),
        STAGE_SHAPE.type(force_new={"restApi", "stageName"}),
    )
