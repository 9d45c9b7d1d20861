"""API Gateway REST APIs in the local cloud: the API (from its own settings or an OpenAPI
`body`), resources, deployments and stages (defined, never invoked: nothing answers at the
invoke URL here); methods, integrations and their responses are in apigateway_methods.py. Ids
follow pulumi-aws: the API's, a resource's and a deployment's are AWS's ids, a stage's
`ags-<api>-<stage>`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

REST_API = "aws:apigateway/restApi:RestApi"
RESOURCE = "aws:apigateway/resource:Resource"
DEPLOYMENT = "aws:apigateway/deployment:Deployment"
STAGE = "aws:apigateway/stage:Stage"
GONE = ("NotFoundException",)  # AWS's "not there", for every API Gateway call
_TAGGING = Tagging(
    "get_tags", "tag_resource", "untag_resource", key="resourceArn", described="tags"
)


def _execution_arn(ctx: CloudContext, api: str) -> str:
    return f"arn:aws:execute-api:{ctx.region}:{ctx.account_id}:{api}"


def _invoke_url(ctx: CloudContext, api: str, stage: str = "") -> str:
    return f"https://{api}.execute-api.{ctx.region}.amazonaws.com/{stage}"


def texts(inputs: Props, fields: dict[str, str]) -> dict[str, Any]:
    """The inputs in `fields` that are set, under their API names."""
    return {api: inputs[key] for key, api in fields.items() if inputs.get(key) not in (None, "")}


# --- the API --------------------------------------------------------------------------------


def _api_create(client: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "name": str(inputs["name"]),
        **texts(inputs, {"description": "description", "apiKeySource": "apiKeySource"}),
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
    gone=GONE,
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
    gone=GONE,
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
    gone=GONE,
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
        **texts(inputs, {"description": "description"}),
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
    gone=GONE,
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
        DEPLOYMENT_SHAPE.type(force_new={"restApi", "triggers", "variables"}),
        STAGE_SHAPE.type(force_new={"restApi", "stageName"}),
    )
