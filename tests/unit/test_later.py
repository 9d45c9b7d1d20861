"""Program arguments that arrive while the update runs (`stackflow.later`): what an argument
builder may do with them, and the app program run under Pulumi's mock runtime with the database's
outputs still to come (no engine, no cloud: the mocks answer every resource).

Values that never arrive (an upstream that did not complete) are tested on the real engine
(`test_cli`, `test_migration_failure`): a program failing under the mock runtime leaves state in
the SDK that breaks the next mock run in the same process."""

from __future__ import annotations

import concurrent.futures
import threading
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from programs.app import app
from programs.database import DatabaseOutputs
from programs.networking import NetworkingOutputs
from stackflow.dag import GraphError, Node, NodeKind, StackGraph
from stackflow.later import Later, LaterValueUsed, holds_later, late_program, placeholders
from stackflow.settings import get_settings
from tests.fixtures.template import TEMPLATE, template_graph
from tests.unit.pulumi_mocks import AwsMocks, run_program
from tests.unit.test_programs import PROJECT, REGION, app_args

pytestmark = pytest.mark.unit
GRAPH = template_graph()  # the fixture project's graph, never the team's own

NEEDS_ONLY_NETWORKING = {
    "aws:ecs/cluster:Cluster",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:iam/role:Role",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:lb/loadBalancer:LoadBalancer",
    "aws:lb/targetGroup:TargetGroup",
    "aws:lb/listener:Listener",
}
READS_THE_DATABASE = {
    "aws:iam/rolePolicy:RolePolicy",  # the DB secret's ARN
    "aws:ecs/taskDefinition:TaskDefinition",  # the container's DB_* variables
    "aws:ecs/service:Service",  # after the task definition
}


def test_a_later_value_can_only_be_passed_on() -> None:
    value = Later("database", "port")
    for use in (str, bool, lambda v: f"{v}", lambda v: v == 3306, lambda v: v != 3306):
        with pytest.raises(LaterValueUsed, match=r"database\.port arrives when database's up"):
            use(value)
    for use in (int, lambda v: v + 1, len, iter):
        with pytest.raises(TypeError):
            use(value)
    assert repr(value) == "Later(database.port)"
    assert holds_later({"a": [1, value]}) and not holds_later({"a": [1, "x"]})


def test_the_app_arguments_take_the_database_outputs_as_later_values() -> None:
    """The graph's own builder: every database value the app reads is a `Later`, the rest real."""
    settings = get_settings("dev", cloud="local", environ={}, project_dir=TEMPLATE)
    net = NetworkingOutputs.model_construct(
        vpc_id="vpc-1",
        vpc_cidr="10.0.0.0/16",
        public_subnet_ids=["subnet-a", "subnet-b"],
        private_subnet_ids=["subnet-c", "subnet-d"],
        alb_security_group_id="sg-alb",
        app_security_group_id="sg-app",
        db_security_group_id="sg-db",
    )
    later = placeholders("database", DatabaseOutputs)
    _, args = GRAPH.spec("app", settings, {"networking": net, "database": later})
    got = typing.cast(Any, args)
    pairs = {
        "db_host": "host",
        "db_port": "port",
        "db_name": "database",
        "db_user": "user",
        "db_password_secret_arn": "password_secret_arn",
    }
    for argument, output in pairs.items():
        assert getattr(got, argument) is getattr(later, output), argument  # passed on as it is
    assert got.vpc_id == "vpc-1" and got.public_subnet_ids == ["subnet-a", "subnet-b"]


def test_a_stack_may_start_early_only_before_its_upstream_nodes() -> None:
    a = Node("a", NodeKind.STACK, "a")
    with pytest.raises(GraphError, match=r"'b' may start early only before its upstream nodes"):
        StackGraph([a, Node("b", NodeKind.STACK, "b", upstream=("a",), early=("c",))], check=False)


class _Recorder(AwsMocks):
    """The mocks, recording which resource types registered before the later values arrived;
    they arrive (`deliver`) once every resource that needs only networking has registered."""

    def __init__(self, deliver: typing.Callable[[], None]) -> None:
        super().__init__(f"{PROJECT}-app", "dev", REGION)
        self.before: set[str] = set()
        self.after: set[str] = set()
        self.delivered = threading.Event()
        self._deliver = deliver

    def new_resource(self, args: Any) -> Any:
        (self.after if self.delivered.is_set() else self.before).add(args.typ)
        if not self.delivered.is_set() and self.before >= NEEDS_ONLY_NETWORKING:
            self.delivered.set()
            self._deliver()
        return super().new_resource(args)


def _early_app_args() -> tuple[BaseModel, BaseModel]:
    later = typing.cast(Any, placeholders("database", DatabaseOutputs))
    fields = ("db_host", "db_port", "db_name", "db_user", "db_password_secret_arn")
    waiting = app_args().model_copy(
        update={
            "db_host": later.host,
            "db_port": later.port,
            "db_name": later.database,
            "db_user": later.user,
            "db_password_secret_arn": later.password_secret_arn,
        }
    )
    real = app_args(db_host="db.arrived.internal")
    assert all(isinstance(getattr(waiting, f), Later) for f in fields)
    return waiting, real


def test_what_needs_only_networking_registers_before_the_database_values_arrive() -> None:
    """Pulumi's mock runtime: the cluster, log group, roles, load balancer, target group and
    listener register while the database's values are still to come; the task definition, the
    role policy on the DB secret and the service only after, with the values that arrived."""
    waiting, real = _early_app_args()
    arrived: concurrent.futures.Future[BaseModel] = concurrent.futures.Future()
    mocks = _Recorder(lambda: arrived.set_result(real))
    run = run_program(
        late_program(app, waiting, arrived), mocks, project=mocks.project, stack="dev"
    )
    assert mocks.delivered.is_set()
    assert mocks.before >= NEEDS_ONLY_NETWORKING, mocks.before
    assert mocks.after >= READS_THE_DATABASE, mocks.after
    assert not (READS_THE_DATABASE & mocks.before), mocks.before
    container = run.one("aws:ecs/taskDefinition:TaskDefinition").inputs["containerDefinitions"]
    assert '"name": "DB_HOST", "value": "db.arrived.internal"' in container, container
    policy = run.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"]
    assert real.db_password_secret_arn in policy  # type: ignore[attr-defined]
