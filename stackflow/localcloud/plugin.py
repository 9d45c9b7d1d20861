"""The local cloud's provider plugins: Pulumi's provider protocol served over gRPC, generically.

The engine starts `pulumi-resource-aws` (or `-random`) from the project's Pulumi home; that script
runs `python -m stackflow.localcloud.plugin aws`, which prints its port and serves until the engine
closes its stdin. Nothing in here names a resource type: each call looks its type token up in the
package's registry (`resources/`) and applies the same rules to all of them: auto-names in Check,
diffs against the old inputs with the force-new inputs of the entry, unknown computed outputs in
previews, refresh as an overlay of what the cloud shows on what the state holds, and the knobs
(latency, faults) that the cloud server hands out. AWS's refusals go back in pulumi-aws's words.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent import futures
from importlib.metadata import version as package_version
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import empty_pb2

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.errors import FaultInjected
from stackflow.localcloud.registry import UNKNOWN, Props, Registry, ResourceType, auto_name
from stackflow.localcloud.wire import contains_unknown, from_struct, to_struct

T = TypeVar("T")
PACKAGES = {"aws": "pulumi-aws", "random": "pulumi-random"}
ENDPOINT_ENV = "STACKFLOW_LOCALCLOUD_URL"
DEFAULT_REGION = "eu-west-1"
CRASH_EXIT_CODE = 70  # the exit status of a plugin that a `crash` knob ended (EX_SOFTWARE)
_NAME_PREFIX_SUFFIX = 26  # terraform's prefixed unique ids: prefix + 26 characters
_EMPTY: tuple[Any, ...] = (None, "", {}, [])


# The AWS service a type token's module calls, as botocore names it in errors (its service id).
_SERVICE_IDS = {
    "ec2": "EC2",
    "vpc": "EC2",
    "rds": "RDS",
    "ecs": "ECS",
    "lb": "Elastic Load Balancing v2",
    "iam": "IAM",
    "cloudwatch": "CloudWatch Logs",
    "secretsmanager": "Secrets Manager",
}
_VERBS = {"create": "Create", "update": "Modify", "delete": "Delete", "read": "Describe"}


def _api_call_for(token: str, operation: str) -> tuple[str, str]:
    """(service id, operation) a knob's fault is reported as, named after the type:
    aws:ec2/vpc:Vpc + create -> ("EC2", "CreateVpc")."""
    parts = token.split(":")
    module = parts[1].split("/")[0] if len(parts) == 3 else ""
    name = parts[-1]
    return _SERVICE_IDS.get(module, module.upper()), _VERBS.get(operation, "") + name


def _load_registry(package: str) -> Registry:
    from stackflow.localcloud import resources

    return resources.registry(package)


def _node_and_environment(urn: str) -> tuple[str, str]:
    """From urn:pulumi:<stack>::<project>::<type>::<name>: the graph node and the environment."""
    parts = urn.split("::")
    stack = parts[0].rsplit(":", 1)[-1] if parts else ""
    project = parts[1] if len(parts) > 1 else ""
    return project.rsplit("-", 1)[-1], stack.rsplit("/", 1)[-1]


def _logical_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _same(old: Any, new: Any) -> bool:
    if old in _EMPTY and new in _EMPTY:
        return True  # missing, null and empty are one thing to AWS
    return bool(old == new)


def diff_inputs(
    rtype: ResourceType, olds: Mapping[str, Any], news: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """(changed input names, those among them that force replacement), sorted.

    An unknown new value (a preview waiting on another resource) counts as a change. A type
    without an in-place update replaces on any change.
    """
    changed = sorted(
        key
        for key in set(olds) | set(news)
        if not key.startswith("__")
        and (contains_unknown(news.get(key)) or not _same(olds.get(key), news.get(key)))
    )
    replaces = [k for k in changed if rtype.update is None or k in rtype.force_new]
    return changed, replaces


def aws_error_text(exc: Exception, service: str, verb: str, what: str) -> str:
    """An AWS refusal in the shape pulumi-aws prints it, AWS's own code and message unchanged."""
    from botocore.exceptions import ClientError

    if isinstance(exc, FaultInjected):
        status, request_id, code, message = 400, "local-cloud-knob", exc.code, exc.message
        operation = exc.operation or verb
    elif isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode", 400))
        request_id = str(meta.get("RequestId", ""))
        code, message = str(error.get("Code", "Unknown")), str(error.get("Message", ""))
        operation = exc.operation_name
    else:
        return f"{verb} {what}: {exc}"
    return (
        f"{verb} {what}: operation error {service}: {operation}, https response error "
        f"StatusCode: {status}, RequestID: {request_id}, api error {code}: {message}"
    )


class ProviderServicer:
    """Implements the ResourceProvider service for one package (aws or random)."""

    def __init__(self, package: str, registry: Registry, endpoint: str | None) -> None:
        self.package = package
        self.registry = registry
        self.endpoint = endpoint
        self.version = package_version(PACKAGES[package])
        self._ctx: CloudContext | None = None
        self._region = DEFAULT_REGION
        self._service = threading.local()
        self._control: bool | None = None

    # -- plumbing --

    @property
    def ctx(self) -> CloudContext:
        if self._ctx is None:
            if not self.endpoint:
                raise RuntimeError(
                    f"the local cloud's {self.package} plugin needs {ENDPOINT_ENV} (the cloud "
                    "server's URL); stackflow sets it for local-cloud runs"
                )
            self._ctx = CloudContext(self.endpoint, self._region)
            self._ctx.on_call = self._remember_service
        return self._ctx

    def _remember_service(self, service_id: str) -> None:
        self._service.current = service_id

    def _guard(self, context: grpc.ServicerContext, verb: str, what: str, fn: Callable[[], T]) -> T:
        self._service.current = self.package.upper()
        try:
            return fn()
        except NotImplementedError as exc:
            self._abort(context, grpc.StatusCode.UNIMPLEMENTED, str(exc))
        except Exception as exc:
            service = getattr(self._service, "current", self.package.upper())
            self._abort(context, grpc.StatusCode.UNKNOWN, aws_error_text(exc, service, verb, what))

    @staticmethod
    def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, text: str) -> NoReturn:
        context.abort(code, text)
        raise AssertionError("unreachable: abort raises")

    def _knobs(self, urn: str, token: str, operation: str) -> None:
        """Apply the cloud server's latency and faults for this call (never for `random`)."""
        if self.package != "aws" or not self._has_control_api():
            return
        node, environment = _node_and_environment(urn)
        answer = self.ctx.control_api.take_knobs(node, environment, token, operation)
        if not answer:
            return
        delay = float(answer.get("latency_s") or 0)
        if delay > 0:
            time.sleep(delay)
        fault = answer.get("fault")
        if not fault:
            return
        if fault.get("kind") == "hang":
            threading.Event().wait()  # until the engine kills this plugin
        if fault.get("kind") == "crash":
            os._exit(CRASH_EXIT_CODE)  # no answer, no cleanup: the engine sees its provider die
        service, call = _api_call_for(token, operation)
        self._service.current = service
        raise FaultInjected(
            str(fault.get("code") or "InternalFailure"),
            str(fault.get("message") or "injected by the local cloud's knobs"),
            call,
        )

    def _has_control_api(self) -> bool:
        """Whether the endpoint is stackflow's cloud server (a bare moto has no knobs)."""
        if self._control is None:
            answer = self.ctx.control_api.health(timeout_s=10.0)
            self._control = bool(answer and answer.get("ok"))
        return self._control

    # -- the plugin itself --

    def GetPluginInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import plugin_pb2

        return plugin_pb2.PluginInfo(version=self.version)

    def Handshake(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        return provider_pb2.ProviderHandshakeResponse(
            accept_secrets=False, accept_resources=False, accept_outputs=False
        )

    def CheckConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        return provider_pb2.CheckResponse(inputs=request.news)

    def DiffConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        olds, news = from_struct(request.olds), from_struct(request.news)
        changed = sorted(k for k in set(olds) | set(news) if not _same(olds.get(k), news.get(k)))
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME
            if changed
            else provider_pb2.DiffResponse.DIFF_NONE,
            diffs=changed,
        )

    def Configure(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        args = from_struct(request.args) if request.HasField("args") else {}
        region = args.get("region") or request.variables.get(f"{self.package}:config:region")
        if isinstance(region, str) and region:
            self._region = region
            self._ctx = None
        return provider_pb2.ConfigureResponse(
            acceptSecrets=False, supportsPreview=True, acceptResources=False, acceptOutputs=False
        )

    def Cancel(self, request: Any, context: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()

    def Attach(self, request: Any, context: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()

    # -- functions --

    def Invoke(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        fn = self.registry.functions.get(request.tok)
        if fn is None:
            self._abort(
                context,
                grpc.StatusCode.UNIMPLEMENTED,
                f"the local cloud's {self.package} provider does not serve the function "
                f"{request.tok}; served: {', '.join(sorted(self.registry.functions))}",
            )
        args = from_struct(request.args)
        result = self._guard(context, "invoking", request.tok, lambda: fn(self.ctx, args))
        response = provider_pb2.InvokeResponse()
        getattr(response, "return").CopyFrom(to_struct(result))
        return response

    # -- resources --

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        rtype = self._type(context, request.type or request.urn.split("::")[2])
        olds, news = from_struct(request.olds), from_struct(request.news)
        key = rtype.auto_name
        if key and news.get(key) in _EMPTY:
            if olds.get(key) not in _EMPTY and (
                not rtype.name_prefix or olds.get(rtype.name_prefix) == news.get(rtype.name_prefix)
            ):
                news[key] = olds[key]  # a name, once chosen, stays
            else:
                seed = bytes(request.randomSeed) or request.urn.encode()
                prefix = news.get(rtype.name_prefix) if rtype.name_prefix else None
                if isinstance(prefix, str) and prefix:
                    suffix = auto_name("", seed, _NAME_PREFIX_SUFFIX).lstrip("-")
                    news[key] = prefix + suffix
                else:
                    news[key] = auto_name(
                        request.name or _logical_name(request.urn),
                        seed,
                        max_length=rtype.auto_name_max,
                    )
        return provider_pb2.CheckResponse(inputs=to_struct(news))

    def Diff(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        rtype = self._type(context, request.type or request.urn.split("::")[2])
        olds = from_struct(request.old_inputs) if request.HasField("old_inputs") else {}
        if not olds:
            olds = from_struct(request.olds)
        news = from_struct(request.news)
        changed, replaces = diff_inputs(rtype, olds, news)
        kinds = provider_pb2.PropertyDiff
        detailed = {}
        for key in changed:
            replace = key in replaces
            if olds.get(key) in _EMPTY:
                kind = kinds.ADD_REPLACE if replace else kinds.ADD
            elif news.get(key) in _EMPTY:
                kind = kinds.DELETE_REPLACE if replace else kinds.DELETE
            else:
                kind = kinds.UPDATE_REPLACE if replace else kinds.UPDATE
            detailed[key] = kinds(kind=kind, inputDiff=True)
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME
            if changed
            else provider_pb2.DiffResponse.DIFF_NONE,
            replaces=replaces,
            diffs=changed,
            detailedDiff=detailed,
            hasDetailedDiff=True,
            deleteBeforeReplace=bool(replaces) and rtype.delete_before_replace,
        )

    def Create(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        rtype = self._type(context, request.type or request.urn.split("::")[2])
        inputs = from_struct(request.properties)
        if request.preview:
            unknown = {key: UNKNOWN for key in rtype.computed if key not in inputs}
            outputs = {**inputs, **unknown}
            return provider_pb2.CreateResponse(id="", properties=to_struct(outputs))
        what = f"{rtype.token} ({_logical_name(request.urn)})"

        def create() -> tuple[str, Props]:
            self._knobs(request.urn, rtype.token, "create")
            return rtype.create(self.ctx, inputs)

        resource_id, computed = self._guard(context, "creating", what, create)
        outputs = {**inputs, **computed}
        return provider_pb2.CreateResponse(id=resource_id, properties=to_struct(outputs))

    def Read(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        rtype = self._type(context, request.type or request.urn.split("::")[2])
        state, inputs = from_struct(request.properties), from_struct(request.inputs)
        what = f"{rtype.token} ({_logical_name(request.urn)}, {request.id})"

        def read() -> Props | None:
            self._knobs(request.urn, rtype.token, "read")
            return rtype.read(self.ctx, request.id, state)

        observed = self._guard(context, "reading", what, read)
        if observed is None:
            return provider_pb2.ReadResponse(id="")  # gone from the cloud
        outputs = {**state, **observed}
        new_inputs = dict(inputs)
        for key, value in observed.items():
            if key in inputs or (key in rtype.drift_inputs and value not in _EMPTY):
                new_inputs[key] = value
        return provider_pb2.ReadResponse(
            id=request.id, properties=to_struct(outputs), inputs=to_struct(new_inputs)
        )

    def Update(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        rtype = self._type(context, request.type or request.urn.split("::")[2])
        olds, news = from_struct(request.olds), from_struct(request.news)
        old_inputs = from_struct(request.old_inputs) if request.HasField("old_inputs") else {}
        kept = {k: v for k, v in olds.items() if k not in old_inputs and k not in news}
        if request.preview or rtype.update is None:
            return provider_pb2.UpdateResponse(properties=to_struct({**kept, **news}))
        changed, _ = diff_inputs(rtype, old_inputs or olds, news)
        update = rtype.update
        what = f"{rtype.token} ({_logical_name(request.urn)}, {request.id})"

        def run() -> Props:
            self._knobs(request.urn, rtype.token, "update")
            return update(self.ctx, request.id, olds, news, frozenset(changed))

        computed = self._guard(context, "updating", what, run)
        return provider_pb2.UpdateResponse(properties=to_struct({**kept, **news, **computed}))

    def Delete(self, request: Any, context: grpc.ServicerContext) -> Any:
        rtype = self._type(context, request.type or request.urn.split("::")[2])
        state = from_struct(request.properties)
        what = f"{rtype.token} ({_logical_name(request.urn)}, {request.id})"

        def delete() -> None:
            self._knobs(request.urn, rtype.token, "delete")
            rtype.delete(self.ctx, request.id, state)

        self._guard(context, "deleting", what, delete)
        return empty_pb2.Empty()

    def _type(self, context: grpc.ServicerContext, token: str) -> ResourceType:
        try:
            return self.registry.resource(token)
        except NotImplementedError as exc:
            self._abort(context, grpc.StatusCode.UNIMPLEMENTED, str(exc))


def _exit_when_stdin_closes() -> None:
    """The engine closes our stdin when it is done with us; a killed CLI closes it too."""
    try:
        while sys.stdin.buffer.read(65536):
            pass
    finally:
        os._exit(0)


def serve(package: str) -> None:
    """Serve `package`'s provider on a free loopback port; print the port for the engine."""
    from pulumi.runtime.proto import provider_pb2_grpc

    servicer = ProviderServicer(package, _load_registry(package), os.environ.get(ENDPOINT_ENV))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)],
    )
    handler = provider_pb2_grpc.ResourceProviderServicer()
    # Bind our methods over the generated base class's "unimplemented" ones.
    for name in dir(servicer):
        if name[:1].isupper() and hasattr(handler, name):
            setattr(handler, name, getattr(servicer, name))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(handler, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    server.wait_for_termination()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="stackflow's local-cloud provider plugin")
    parser.add_argument("package", choices=sorted(PACKAGES))
    parser.add_argument("engine", nargs="?", help="the engine's address (unused)")
    args, _ = parser.parse_known_args(argv)
    serve(args.package)


if __name__ == "__main__":
    main()
