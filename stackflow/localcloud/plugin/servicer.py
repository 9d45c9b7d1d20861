"""The gRPC servicer of the local cloud's provider plugins: Pulumi's provider protocol, generically.

Nothing in here names a resource type: each call looks its type token up in the package's registry
(`resources/`) and applies the same rules to all of them (rules.py): auto-names in Check, diffs
against the old inputs with the force-new inputs of the entry, unknown computed outputs in
previews, refresh as an overlay of what the cloud shows on what the state holds, and the knobs
(latency, faults) that the cloud server hands out (faults.py). AWS's refusals go back in
pulumi-aws's words (awserrors.py). In a survey preview (survey.py), a type or function the registry
does not serve is written down and answered with what the program gave, so the preview goes on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from importlib.metadata import version as package_version
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import empty_pb2

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.errors import FaultInjected
from stackflow.localcloud.plugin.awserrors import api_call_for, aws_error_text
from stackflow.localcloud.plugin.faults import with_knobs
from stackflow.localcloud.plugin.packages import DEFAULT_REGION, ENDPOINT_ENV, PACKAGES
from stackflow.localcloud.plugin.rules import (
    EMPTY,
    diff_inputs,
    logical_name,
    same,
    with_auto_name,
    with_defaults,
)
from stackflow.localcloud.plugin.survey import FUNCTION, RESOURCE, Survey
from stackflow.localcloud.registry import UNKNOWN, Props, Registry, ResourceType
from stackflow.localcloud.wire import from_struct, to_struct

T = TypeVar("T")


class ProviderServicer:
    """Implements the ResourceProvider service for one package (aws or random)."""

    def __init__(self, package: str, registry: Registry, endpoint: str | None) -> None:
        self.package = package
        self.registry = registry
        self.endpoint = endpoint
        self.version = package_version(PACKAGES[package])
        self._ctx: CloudContext | None = None
        self._region = DEFAULT_REGION
        self._assume_roles: tuple[dict[str, Any], ...] = ()
        self._service = threading.local()
        self._control: bool | None = None
        self.survey = Survey.from_environment()

    # -- plumbing --

    @property
    def ctx(self) -> CloudContext:
        if self._ctx is None:
            if not self.endpoint:
                raise RuntimeError(
                    f"the local cloud's {self.package} plugin needs {ENDPOINT_ENV} (the cloud "
                    "server's URL); stackflow sets it for local-cloud runs"
                )
            self._ctx = CloudContext(self.endpoint, self._region, self._assume_roles)
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

    def _surveyed(self, kind: str, token: str) -> bool:
        """In a survey preview: whether `token` is unserved (then it is written down)."""
        if self.survey is None:
            return False
        find = self.registry.find if kind == RESOURCE else self.registry.find_function
        if find(token) is not None:
            return False
        self.survey.record(kind, token)
        return True

    @staticmethod
    def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, text: str) -> NoReturn:
        context.abort(code, text)
        raise AssertionError("unreachable: abort raises")

    def _knobs(self, urn: str, token: str, operation: str, call: Callable[[], T]) -> T:
        """Run `call` under the cloud server's latency and faults for it (never for `random`)."""
        if self.package != "aws" or not self._has_control_api():
            return call()
        try:
            return with_knobs(self.ctx.control_api, urn, token, operation, call)
        except FaultInjected:
            self._service.current = api_call_for(token, operation)[0]  # the error names it
            raise

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
        changed = sorted(k for k in set(olds) | set(news) if not same(olds.get(k), news.get(k)))
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
        roles = args.get("assumeRoles") or request.variables.get("aws:config:assumeRoles")
        if self.package == "aws" and roles:
            self._assume_roles = assume_roles(roles)
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

        fn = self.registry.find_function(request.tok)
        if fn is None and self._surveyed(FUNCTION, request.tok):
            return provider_pb2.InvokeResponse()  # an empty result: the program goes on
        if fn is None:
            self._abort(
                context,
                grpc.StatusCode.UNIMPLEMENTED,
                f"the local cloud's {self.package} provider does not serve the function "
                f"{request.tok}; served: {', '.join(sorted(self.registry.everything().functions))}",
            )
        args = from_struct(request.args)
        result = self._guard(context, "invoking", request.tok, lambda: fn(self.ctx, args))
        response = provider_pb2.InvokeResponse()
        getattr(response, "return").CopyFrom(to_struct(result))
        return response

    # -- resources --

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        if self._surveyed(RESOURCE, _token(request)):
            return provider_pb2.CheckResponse(inputs=request.news)
        rtype = self._type(context, _token(request))
        olds, news = from_struct(request.olds), from_struct(request.news)
        seed = bytes(request.randomSeed) or request.urn.encode()
        news = with_auto_name(rtype, olds, news, seed, request.name or logical_name(request.urn))
        news = with_defaults(rtype, news)
        return provider_pb2.CheckResponse(inputs=to_struct(news))

    def Diff(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        if self._surveyed(RESOURCE, _token(request)):
            return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)
        rtype = self._type(context, _token(request))
        # The old inputs when the engine sends them, even empty (a resource the program gives
        # no inputs, an elastic IP): the old outputs would read as inputs that went away.
        has_inputs = request.HasField("old_inputs")
        olds = from_struct(request.old_inputs if has_inputs else request.olds)
        news = from_struct(request.news)
        changed, replaces = diff_inputs(rtype, olds, news)
        kinds = provider_pb2.PropertyDiff
        detailed = {}
        for key in changed:
            replace = key in replaces
            if olds.get(key) in EMPTY:
                kind = kinds.ADD_REPLACE if replace else kinds.ADD
            elif news.get(key) in EMPTY:
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

        if request.preview and self._surveyed(RESOURCE, _token(request)):
            return provider_pb2.CreateResponse(id="", properties=request.properties)
        rtype = self._type(context, _token(request))
        inputs = from_struct(request.properties)
        if request.preview:
            unknown = {key: UNKNOWN for key in rtype.computed if key not in inputs}
            outputs = {**inputs, **unknown}
            return provider_pb2.CreateResponse(id="", properties=to_struct(outputs))
        what = f"{rtype.token} ({logical_name(request.urn)})"

        def create() -> tuple[str, Props]:
            return self._knobs(
                request.urn, rtype.token, "create", lambda: rtype.create(self.ctx, inputs)
            )

        resource_id, computed = self._guard(context, "creating", what, create)
        outputs = {**inputs, **computed}
        return provider_pb2.CreateResponse(id=resource_id, properties=to_struct(outputs))

    def Read(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        if self._surveyed(RESOURCE, _token(request)):  # `Resource.get` in a survey preview
            return provider_pb2.ReadResponse(
                id=request.id, properties=request.properties, inputs=request.inputs
            )
        rtype = self._type(context, _token(request))
        state, inputs = from_struct(request.properties), from_struct(request.inputs)
        what = f"{rtype.token} ({logical_name(request.urn)}, {request.id})"

        def read() -> Props | None:
            return self._knobs(
                request.urn, rtype.token, "read", lambda: rtype.read(self.ctx, request.id, state)
            )

        observed = self._guard(context, "reading", what, read)
        if observed is None:
            return provider_pb2.ReadResponse(id="")  # gone from the cloud
        outputs = {**state, **observed}
        new_inputs = dict(inputs)
        for key, value in observed.items():
            if key in inputs or (key in rtype.drift_inputs and value not in EMPTY):
                new_inputs[key] = value
        return provider_pb2.ReadResponse(
            id=request.id, properties=to_struct(outputs), inputs=to_struct(new_inputs)
        )

    def Update(self, request: Any, context: grpc.ServicerContext) -> Any:
        from pulumi.runtime.proto import provider_pb2

        if request.preview and self._surveyed(RESOURCE, _token(request)):
            return provider_pb2.UpdateResponse(properties=request.news)
        rtype = self._type(context, _token(request))
        olds, news = from_struct(request.olds), from_struct(request.news)
        has_inputs = request.HasField("old_inputs")
        old_inputs = from_struct(request.old_inputs) if has_inputs else {}
        kept = {k: v for k, v in olds.items() if k not in old_inputs and k not in news}
        if request.preview or rtype.update is None:
            return provider_pb2.UpdateResponse(properties=to_struct({**kept, **news}))
        changed, _ = diff_inputs(rtype, old_inputs if has_inputs else olds, news)
        update = rtype.update
        what = f"{rtype.token} ({logical_name(request.urn)}, {request.id})"

        def run() -> Props:
            return self._knobs(
                request.urn,
                rtype.token,
                "update",
                lambda: update(self.ctx, request.id, olds, news, frozenset(changed)),
            )

        computed = self._guard(context, "updating", what, run)
        return provider_pb2.UpdateResponse(properties=to_struct({**kept, **news, **computed}))

    def Delete(self, request: Any, context: grpc.ServicerContext) -> Any:
        rtype = self._type(context, _token(request))
        state = from_struct(request.properties)
        what = f"{rtype.token} ({logical_name(request.urn)}, {request.id})"

        def delete() -> None:
            self._knobs(
                request.urn,
                rtype.token,
                "delete",
                lambda: rtype.delete(self.ctx, request.id, state),
            )

        self._guard(context, "deleting", what, delete)
        return empty_pb2.Empty()

    def _type(self, context: grpc.ServicerContext, token: str) -> ResourceType:
        try:
            return self.registry.resource(token)
        except NotImplementedError as exc:
            self._abort(context, grpc.StatusCode.UNIMPLEMENTED, str(exc))


def assume_roles(given: Any) -> tuple[dict[str, Any], ...]:
    """The provider's `assumeRoles` as the engine sends them (a list, or its JSON text; each
    role's keys camelCase or, from a plain dict in the program, snake_case), camelCase."""
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            return ()
    roles = []
    for role in given if isinstance(given, list) else []:
        if isinstance(role, dict):
            camel = {_camel(str(k)): v for k, v in role.items()}
            if camel.get("roleArn"):
                roles.append(camel)
    return tuple(roles)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _token(request: Any) -> str:
    """The type token of a resource request (older engines send only the URN)."""
    return str(request.type or request.urn.split("::")[2])
