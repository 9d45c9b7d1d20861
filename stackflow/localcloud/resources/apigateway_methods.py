"""API Gateway REST API methods, integrations and their responses in the local cloud, one
shape each, keyed the same way (pulumi-aws's ids: a method's `agm-<api>-<resource>-<method>`, an
integration's `agi-...`, their responses' `agmr-...-<status>` and `agir-...-<status>`). The API,
its resources, deployments and stages are in apigateway.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape
from stackflow.localcloud.resources.apigateway import GONE, texts

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

METHOD = "aws:apigateway/method:Method"
INTEGRATION = "aws:apigateway/integration:Integration"
METHOD_RESPONSE = "aws:apigateway/methodResponse:MethodResponse"
INTEGRATION_RESPONSE = "aws:apigateway/integrationResponse:IntegrationResponse"


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
        kwargs = {**_where(inputs), **texts(inputs, fields), **extra(inputs)}
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
        gone=GONE,
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


def register(aws: Registry) -> None:
    """Add the API Gateway REST API method, integration and response types."""
    aws.add(
        METHOD_SHAPE.type(defaults={"apiKeyRequired": False}),
        INTEGRATION_SHAPE.type(
            force_new={"restApi", "resourceId", "httpMethod"},
            defaults={"connectionType": "INTERNET"},
        ),
        METHOD_RESPONSE_SHAPE.type(force_new={"restApi", "resourceId", "httpMethod", "statusCode"}),
        INTEGRATION_RESPONSE_SHAPE.type(
            force_new={"restApi", "resourceId", "httpMethod", "statusCode"}
        ),
    )
