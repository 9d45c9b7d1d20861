"""Runs a Pulumi program in-process under Pulumi's own mock runtime (`pulumi.runtime.set_mocks`),
for the programs' unit tests: what they declare, with which inputs, and what they export.

Each run gets its own thread, event loop and `contextvars.Context`: the SDK keeps its runtime
settings in context variables, so one run never sees another's resources.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.stack import run_pulumi_func, wait_for_rpcs

from stackflow.engine.base import OutputValue, ProgramFn

# Two mock runs at once deadlock inside the SDK (not all of its state is context-local), so runs
# take turns; each takes milliseconds.
_RUNTIME_LOCK = threading.Lock()

ACCOUNT_ID = "123456789012"  # AWS's documentation account id: obviously not a real account


@dataclass(frozen=True)
class MockedResource:
    """One resource the program declared, with the inputs it gave and the outputs the mock returned."""

    urn: str
    type: str
    name: str
    id: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]


@dataclass
class ProgramRun:
    """Everything one program run under mocks declared."""

    resources: dict[str, MockedResource] = field(default_factory=dict)
    exports: dict[str, OutputValue] = field(default_factory=dict)
    calls: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)

    def of_type(self, type_: str) -> list[MockedResource]:
        """Resources of a type token, e.g. 'aws:ec2/subnet:Subnet'."""
        return [r for r in self.resources.values() if r.type == type_]

    def one(self, type_: str) -> MockedResource:
        """The single resource of a type; raises if there is not exactly one."""
        found = self.of_type(type_)
        if len(found) != 1:
            raise AssertionError(f"expected one {type_}, found {len(found)}")
        return found[0]


def _short_hash(*parts: str, length: int = 8) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:length]


class AwsMocks(pulumi_mocks.Mocks):
    """Deterministic, AWS-shaped ids, ARNs, endpoints and DNS names for the resources we use."""

    def __init__(self, project: str, stack: str, region: str) -> None:
        self.project, self.stack, self.region = project, stack, region
        self.registered: list[tuple[str, str, dict[str, Any]]] = []
        self.calls: list[tuple[str, Mapping[str, Any]]] = []
        self._lock = threading.Lock()

    def _arn(self, service: str, resource: str, regional: bool = True) -> str:
        region = self.region if regional else ""
        return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{resource}"

    def new_resource(
        self, args: pulumi_mocks.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        h = _short_hash(self.project, self.stack, typ, name, length=17)
        out: dict[str, Any] = dict(inputs)
        rid = f"{name}-{h[:8]}"
        physical = str(inputs.get("name") or inputs.get("identifier") or f"{name}-{h[:7]}")
        region = self.region

        if typ.startswith("aws:ec2/"):
            prefix = {
                "aws:ec2/vpc:Vpc": "vpc",
                "aws:ec2/subnet:Subnet": "subnet",
                "aws:ec2/internetGateway:InternetGateway": "igw",
                "aws:ec2/natGateway:NatGateway": "nat",
                "aws:ec2/eip:Eip": "eipalloc",
                "aws:ec2/routeTable:RouteTable": "rtb",
                "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc",
                "aws:ec2/securityGroup:SecurityGroup": "sg",
                "aws:ec2/route:Route": "r",
            }.get(typ)
            if typ.startswith("aws:ec2/securityGroupRule") or typ.startswith(
                "aws:vpc/securityGroup"
            ):
                prefix = "sgr"
            rid = f"{prefix or 'ec2'}-{h}"
            kind = {
                "vpc": "vpc",
                "subnet": "subnet",
                "sg": "security-group",
                "igw": "internet-gateway",
            }.get(prefix or "", "resource")
            out["arn"] = self._arn("ec2", f"{kind}/{rid}")
            if typ == "aws:ec2/eip:Eip":
                n = int(h[:6], 16)
                out["publicIp"] = f"203.0.113.{n % 254 + 1}"  # TEST-NET-3: never routable
            out.setdefault("ownerId", ACCOUNT_ID)
        elif typ == "aws:rds/instance:Instance":
            rid = physical
            out["address"] = f"{physical}.c{h[:12]}.{region}.rds.amazonaws.com"
            out.setdefault("port", 3306)
            out["endpoint"] = f"{out['address']}:{out['port']}"
            out["arn"] = self._arn("rds", f"db:{physical}")
            out["resourceId"] = f"db-{h.upper()[:26]}"
        elif typ.startswith("aws:rds/"):
            rid = physical
            out["arn"] = self._arn("rds", f"{typ.split(':')[-1].lower()}:{physical}")
        elif typ == "aws:secretsmanager/secret:Secret":
            rid = self._arn("secretsmanager", f"secret:{physical}-{h[:6]}")
            out["arn"] = rid
        elif typ == "aws:secretsmanager/secretVersion:SecretVersion":
            rid = f"{inputs.get('secretId', name)}|{h[:32]}"
            out["versionId"] = h[:32]
        elif typ == "aws:iam/role:Role":
            rid = physical
            out["arn"] = self._arn("iam", f"role/{physical}", regional=False)
            out["uniqueId"] = f"AROA{h.upper()[:17]}"
        elif typ.startswith("aws:iam/"):
            rid = f"{physical}-{h[:8]}"
            out["arn"] = self._arn("iam", f"policy/{physical}", regional=False)
        elif typ == "aws:cloudwatch/logGroup:LogGroup":
            rid = physical
            out["arn"] = self._arn("logs", f"log-group:{physical}")
        elif typ == "aws:ecs/cluster:Cluster":
            rid = self._arn("ecs", f"cluster/{physical}")
            out["arn"] = rid
        elif typ == "aws:ecs/taskDefinition:TaskDefinition":
            family = inputs.get("family", physical)
            out["arn"] = self._arn("ecs", f"task-definition/{family}:1")
            out["revision"] = 1
            rid = family
        elif typ == "aws:ecs/service:Service":
            rid = self._arn("ecs", f"service/{physical}")
            out.setdefault("name", physical)
        elif typ == "aws:lb/loadBalancer:LoadBalancer":
            lb_name = physical[:32]
            rid = self._arn("elasticloadbalancing", f"loadbalancer/app/{lb_name}/{h[:16]}")
            out["arn"] = rid
            out["arnSuffix"] = f"app/{lb_name}/{h[:16]}"
            out["dnsName"] = f"{lb_name}-{int(h[:9], 16) % 10**10}.{region}.elb.amazonaws.com"
            out["zoneId"] = "Z32O12XQLNTSW2"
        elif typ == "aws:lb/targetGroup:TargetGroup":
            rid = self._arn("elasticloadbalancing", f"targetgroup/{physical[:32]}/{h[:16]}")
            out["arn"] = rid
            out["arnSuffix"] = f"targetgroup/{physical[:32]}/{h[:16]}"
        elif typ == "aws:lb/listener:Listener":
            rid = self._arn("elasticloadbalancing", f"listener/app/{physical[:32]}/{h[:16]}")
            out["arn"] = rid
        elif typ == "random:index/randomPassword:RandomPassword":
            rid = "none"
            length = int(inputs.get("length", 32))
            out["result"] = hashlib.sha256(f"mock-password:{h}".encode()).hexdigest()[:length]
        with self._lock:
            self.registered.append((typ, name, inputs))
        return rid, out

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        with self._lock:
            self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{c}" for c in "abcdef"]
            return {
                "names": names,
                "zoneIds": [f"euw1-az{i}" for i in range(1, 7)],
                "id": self.region,
            }, []
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": ACCOUNT_ID,
                "arn": self._arn("iam", "user/mocked", False),
                "id": ACCOUNT_ID,
            }, []
        if args.token in ("aws:index/getRegion:getRegion", "aws:index/getRegion:getRegion"):
            return {"name": self.region, "region": self.region, "id": self.region}, []
        if args.token == "aws:iam/getPolicyDocument:getPolicyDocument":
            import json

            return {
                "json": json.dumps(
                    {"Version": "2012-10-17", "Statement": args.args.get("statements", [])}
                )
            }, []
        return {}, []


def run_program(
    program: ProgramFn, mocks: AwsMocks, *, project: str, stack: str, preview: bool = False
) -> ProgramRun:
    """Run `program` under `mocks` and return what it declared and exported.

    Args:
        preview: run it as a preview does (an export that depends on a value only an update
            knows is `UNKNOWN`).

    Raises whatever the program raises (a program error), after the runtime has settled.
    """
    box: dict[str, Any] = {}

    def in_thread() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            box["run"] = _run(program, mocks, project=project, stack=stack, preview=preview)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            loop.close()

    ctx = contextvars.Context()
    thread = threading.Thread(
        target=ctx.run, args=(in_thread,), name=f"pulumi-mock-{project}-{stack}"
    )
    with _RUNTIME_LOCK:
        thread.start()
        thread.join()
    if "error" in box:
        raise box["error"]
    result: ProgramRun = box["run"]
    return result


def _run(
    program: ProgramFn, mocks: AwsMocks, *, project: str, stack: str, preview: bool
) -> ProgramRun:
    monitor = pulumi_mocks.MockMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    exports: dict[str, OutputValue] = {}

    async def body() -> None:
        declared = program()
        for key, value in declared.items():
            out = pulumi.Output.from_input(value)
            resolved = await out.future(with_unknowns=preview)
            secret = await out.is_secret()
            exports[key] = OutputValue(value=_plain(resolved), secret=bool(secret))

    async def main() -> None:
        await run_pulumi_func(body)
        await wait_for_rpcs()

    asyncio.get_event_loop().run_until_complete(main())
    run = ProgramRun(exports=exports, calls=list(mocks.calls))
    by_name = {(t, n): i for t, n, i in mocks.registered}
    for urn, reg in monitor.resources.items():
        typ = urn.split("::")[-2].split("$")[-1]
        name = urn.split("::")[-1]
        run.resources[urn] = MockedResource(
            urn=urn,
            type=typ,
            name=name,
            id=str(reg.id),
            inputs=by_name.get((typ, name), {}),
            outputs=dict(reg.state),
        )
    return run


def _plain(value: Any) -> Any:
    """Outputs as JSON-friendly values (tuples and nested Output-free containers)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
