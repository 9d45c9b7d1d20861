"""Lambda functions in the local cloud, with their code archives (created, read, updated and
deleted; nothing here invokes them: moto would need Docker for that). A function's id is its
name, as in pulumi-aws; its code is the zip the program's archive makes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props, Registry, ResourceType, tags_of
from stackflow.localcloud.resources._assets import archive_zip
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    observe,
    refuse_unserved,
    same_members,
    tag_changes,
    tag_outputs,
    unless_gone,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

FUNCTION = "aws:lambda/function:Function"
_GONE = ("ResourceNotFoundException",)
_INPUTS = (
    "name",
    "role",
    "handler",
    "runtime",
    "code",
    "sourceCodeHash",
    "packageType",
    "memorySize",
    "timeout",
    "description",
    "environment",
    "architectures",
    "publish",
    "skipDestroy",
    "tags",
)
# Configuration inputs: wire name -> (API name, type); a change is UpdateFunctionConfiguration.
_CONFIG = {
    "role": ("Role", str),
    "handler": ("Handler", str),
    "runtime": ("Runtime", str),
    "memorySize": ("MemorySize", int),
    "timeout": ("Timeout", int),
    "description": ("Description", str),
}
_COMPUTED = (
    "arn",
    "invokeArn",
    "qualifiedArn",
    "qualifiedInvokeArn",
    "version",
    "lastModified",
    "codeSha256",
    "sourceCodeHash",
    "sourceCodeSize",
    "tagsAll",
)


def _lambda(ctx: CloudContext) -> Any:
    return ctx.client("lambda")


def _code(inputs: Props) -> bytes:
    if not inputs.get("code"):
        raise NotImplementedError(
            f"the local cloud's aws provider serves {FUNCTION} with `code` (a zip archive) only; "
            "s3Bucket/s3Key and imageUri are not served yet"
        )
    return archive_zip(inputs["code"])


def _outputs(ctx: CloudContext, config: dict[str, Any], inputs: Props) -> Props:
    arn = str(config["FunctionArn"]).split(":$LATEST")[0]
    version = str(config.get("Version") or "$LATEST")
    invoke = f"arn:aws:apigateway:{ctx.region}:lambda:path/2015-03-31/functions/{{}}/invocations"
    sha = str(config.get("CodeSha256", ""))
    out: Props = {
        "arn": arn,
        "invokeArn": invoke.format(arn),
        "qualifiedArn": f"{arn}:{version}",
        "qualifiedInvokeArn": invoke.format(f"{arn}:{version}"),
        "version": version,
        "lastModified": str(config.get("LastModified", "")),
        "codeSha256": sha,
        "sourceCodeSize": int(config.get("CodeSize") or 0),
    }
    if not inputs.get("sourceCodeHash"):
        out["sourceCodeHash"] = sha
    return out


def _environment(inputs: Props) -> dict[str, Any]:
    variables = (inputs.get("environment") or {}).get("variables") or {}
    return {"Variables": {str(k): str(v) for k, v in variables.items()}}


def _create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, FUNCTION, inputs, _INPUTS)
    kwargs: dict[str, Any] = {
        "FunctionName": str(inputs["name"]),
        "Code": {"ZipFile": _code(inputs)},
        "PackageType": str(inputs.get("packageType") or "Zip"),
        "Publish": bool(inputs.get("publish")),
    }
    for wire, (api, kind) in _CONFIG.items():
        if inputs.get(wire) is not None:
            kwargs[api] = kind(inputs[wire])
    if inputs.get("environment"):
        kwargs["Environment"] = _environment(inputs)
    if inputs.get("architectures"):
        kwargs["Architectures"] = [str(a) for a in inputs["architectures"]]
    tags = input_tags(inputs)
    if tags:
        kwargs["Tags"] = tags
    config = _lambda(ctx).create_function(**kwargs)
    return str(config["FunctionName"]), {**_outputs(ctx, config, inputs), "tagsAll": tags}


def _read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    try:
        found = _lambda(ctx).get_function(FunctionName=id)
    except ClientError as exc:
        if error_code(exc) in _GONE:
            return None
        raise
    config = found["Configuration"]
    observed: Props = {
        "name": config["FunctionName"],
        "role": config.get("Role"),
        "handler": config.get("Handler"),
        "runtime": config.get("Runtime"),
        "memorySize": config.get("MemorySize"),
        "timeout": config.get("Timeout"),
        "description": config.get("Description", ""),
        "packageType": config.get("PackageType"),
        "architectures": same_members(
            list(config.get("Architectures") or []), state.get("architectures")
        ),
    }
    variables = (config.get("Environment") or {}).get("Variables")
    if variables is not None or state.get("environment"):
        observed["environment"] = {"variables": dict(variables or {})}
    computed = _outputs(ctx, config, state)
    if state.get("version") and computed["version"] == "$LATEST":
        computed["version"] = state["version"]  # the published version the state names
        computed["qualifiedArn"] = state.get("qualifiedArn", computed["qualifiedArn"])
        computed["qualifiedInvokeArn"] = state.get(
            "qualifiedInvokeArn", computed["qualifiedInvokeArn"]
        )
    return {
        **observe(state, observed),
        **computed,
        **tag_outputs(
            state, tags_of([{"Key": k, "Value": v} for k, v in found.get("Tags", {}).items()])
        ),
    }


def _update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, FUNCTION, inputs, _INPUTS)
    client = _lambda(ctx)
    config_changes: dict[str, Any] = {
        api: kind(inputs[wire])
        for wire, (api, kind) in _CONFIG.items()
        if wire in changed and inputs.get(wire) is not None
    }
    if "environment" in changed:
        config_changes["Environment"] = _environment(inputs)
    if config_changes:
        client.update_function_configuration(FunctionName=id, **config_changes)
    if changed & {"code", "sourceCodeHash", "architectures", "publish"}:
        extra: dict[str, Any] = {}
        if inputs.get("architectures"):
            extra["Architectures"] = [str(a) for a in inputs["architectures"]]
        client.update_function_code(
            FunctionName=id, ZipFile=_code(inputs), Publish=bool(inputs.get("publish")), **extra
        )
    arn = str(state.get("arn"))
    current = client.list_tags(Resource=arn).get("Tags", {})
    upsert, remove = tag_changes(current, inputs)
    if remove:
        client.untag_resource(Resource=arn, TagKeys=remove)
    if upsert:
        client.tag_resource(Resource=arn, Tags=upsert)
    config = client.get_function(FunctionName=id)["Configuration"]
    return {**_outputs(ctx, config, inputs), "tagsAll": input_tags(inputs)}


def _delete(ctx: CloudContext, id: str, state: Props) -> None:
    if state.get("skipDestroy"):
        return
    with unless_gone(_GONE):
        _lambda(ctx).delete_function(FunctionName=id)


def register(aws: Registry) -> None:
    """Add the Lambda function type to the aws registry."""
    aws.add(
        ResourceType(
            token=FUNCTION,
            create=_create,
            read=_read,
            update=_update,
            delete=_delete,
            force_new=frozenset({"name", "packageType", "region"}),
            computed=_COMPUTED,
            auto_name="name",
            auto_name_max=64,
            drift_inputs=frozenset({"tags"}),
            defaults={
                "memorySize": 128,
                "timeout": 3,
                "packageType": "Zip",
                "publish": False,
                "description": "",
            },
        )
    )
