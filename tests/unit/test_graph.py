"""The stack graph as data: order, reverse, targeting, critical path, picture, typed outputs, on
the fixture project's graph (tests/fixtures/template/nodes.py: the template as it ships)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from programs.common import UNKNOWN, UNKNOWN_WIRE
from stackflow.dag import (
    GraphError,
    Node,
    NodeKind,
    StackGraph,
    parse_outputs,
    project_outputs,
)
from stackflow.engine import OutputValue
from stackflow.errors import MissingOutputError, UnknownStackError
from stackflow.settings import get_settings
from tests.fixtures.template import template_graph

pytestmark = pytest.mark.unit
GRAPH = template_graph()  # the fixture project's graph, never the team's own


def _graph(*nodes: tuple[str, tuple[str, ...]]) -> StackGraph:
    return StackGraph(
        (Node(name, NodeKind.STACK, name, upstream=up) for name, up in nodes), check=False
    )


def test_order_puts_every_node_after_its_upstream() -> None:
    order = GRAPH.order()
    assert sorted(order) == sorted(GRAPH.nodes)
    for name in order:
        for up in GRAPH[name].upstream:
            assert order.index(up) < order.index(name), f"{up} must come before {name}"


def test_reverse_is_the_exact_reverse() -> None:
    assert GRAPH.reverse() == list(reversed(GRAPH.order()))


def test_an_upstream_declared_later_is_rejected() -> None:
    with pytest.raises(ValueError, match="'b'"):
        _graph(("a", ("b",)), ("b", ()))


def test_select_returns_targets_in_graph_order() -> None:
    assert GRAPH.select(None) == GRAPH.order()
    assert GRAPH.select([]) == GRAPH.order()
    assert GRAPH.select([" app ", "networking"]) == ["networking", "app"]


def test_select_names_the_unknown_stack_and_the_accepted_ones() -> None:
    with pytest.raises(UnknownStackError) as info:
        GRAPH.select(["app", "netwrk"])
    message = str(info.value)
    assert "'netwrk'" in message
    for name in GRAPH.order():
        assert name in message
    with pytest.raises(UnknownStackError, match="accepted"):
        GRAPH["nope"]


def test_critical_path_of_the_chain_is_the_sum_along_it() -> None:
    weights = {"networking": 2.0, "database": 4.0, "app": 3.0}
    assert GRAPH.critical_path(weights) == pytest.approx(9.0)
    assert GRAPH.critical_path({**weights, "migrate": 1.5, "verify": 0.5}) == pytest.approx(11.0)
    assert GRAPH.critical_path({}) == 0.0


def test_critical_path_takes_the_longest_branch_not_the_sum() -> None:
    two = _graph(("a", ()), ("b", ()))
    assert two.critical_path({"a": 2.0, "b": 5.0}) == pytest.approx(5.0)
    joined = _graph(("a", ()), ("b", ()), ("c", ("a", "b")))
    assert joined.critical_path({"a": 2.0, "b": 5.0, "c": 1.0}) == pytest.approx(6.0)


def test_mermaid_draws_every_node_and_edge() -> None:
    text = GRAPH.mermaid()
    assert text.startswith("flowchart LR")
    for node in GRAPH.nodes.values():
        assert node.name in text
        for up in node.upstream:
            assert f"    {up} --> {node.name}" in text.splitlines()
    assert 'migrate(["migrate"])' in text  # steps are drawn rounded, stacks square
    assert 'app["app"]' in text


SUBNETS = {
    "public_subnet_ids": ["subnet-p0", "subnet-p1"],
    "private_subnet_ids": ["subnet-a", "subnet-b"],
}
NETWORKING = {
    "vpc_id": "vpc-1",
    "vpc_cidr": "10.0.0.0/16",
    **SUBNETS,
    "alb_security_group_id": "sg-alb",
    "app_security_group_id": "sg-app",
    "db_security_group_id": "sg-db",
}
DATABASE = {
    "host": "10.0.0.5",
    "port": 3306,
    "database": "app",
    "user": "stackflow",
    "password": "hunter2-secret",
    "password_secret_arn": "arn:aws:secretsmanager:eu-west-1:1:secret:pw",
    "instance_id": "stackflow-dev-mysql",
}


def _values(raw: dict[str, Any], secret: str = "password") -> dict[str, OutputValue]:
    return {k: OutputValue(v, secret=k == secret) for k, v in raw.items()}


@pytest.mark.parametrize("stack", GRAPH.stacks)
def test_a_stack_not_deployed_projects_what_settings_know_and_the_rest_unknown(stack: str) -> None:
    """A preview that reported nothing (and nothing deployed): each output is known from settings
    or Pulumi's UNKNOWN, never a made-up value, and the projection names the unknown ones."""
    settings = get_settings(environment="dev")
    node = GRAPH[stack]
    projection = project_outputs(node, settings, {}, {})
    known = dict(node.known(settings)) if node.known else {}
    assert projection.unknown and not projection.changed and projection.moves
    for name in type(projection.outputs).model_fields:
        value = getattr(projection.outputs, name)
        if name in known:
            assert value == known[name]
        else:
            assert value is UNKNOWN and name in projection.unknown


def test_a_preview_projects_its_new_values_and_unknowns_over_what_is_deployed() -> None:
    """A third AZ: the two subnets that stay are known, the new one is unknown (the whole list
    when the preview says so); a new port is a known change; a secret the preview hides keeps
    its deployed value; what the preview does not report stays as deployed."""
    settings = get_settings(environment="dev")
    net = project_outputs(
        GRAPH["networking"],
        settings,
        _values(NETWORKING),
        _values({**NETWORKING, "private_subnet_ids": ["subnet-a", "subnet-b", UNKNOWN_WIRE]})
        | {"public_subnet_ids": OutputValue(UNKNOWN_WIRE)},
    )
    assert net.unknown == ("public_subnet_ids", "private_subnet_ids") and net.changed == ()
    outputs: Any = net.outputs
    assert outputs.private_subnet_ids == ["subnet-a", "subnet-b", UNKNOWN]
    assert outputs.public_subnet_ids is UNKNOWN and outputs.vpc_id == "vpc-1"
    assert "private_subnet_ids known after its up" in net.describe()

    db = project_outputs(
        GRAPH["database"],
        settings,
        _values(DATABASE),
        {"port": OutputValue(3307), "password": OutputValue(None, secret=True)},
    )
    assert db.changed == ("port",) and db.unknown == ()
    assert db.outputs.port == 3307  # type: ignore[attr-defined]
    assert db.outputs.password.get_secret_value() == "hunter2-secret"  # type: ignore[attr-defined]
    assert db.describe() == "port changes"
    same = project_outputs(GRAPH["database"], settings, _values(DATABASE), _values(DATABASE))
    assert not same.moves and same.describe() == ""


def test_program_arguments_take_unknowns_a_fingerprint_records_and_still_refuse_bad_values() -> (
    None
):
    """The database's arguments built from a projection hold UNKNOWN where networking's preview
    could not know; their fingerprint says so (it can never match a deployed stamp), and a value
    that is known is still checked."""
    settings = get_settings(environment="dev")
    networking = project_outputs(GRAPH["networking"], settings, {}, {})
    spec, args = GRAPH.spec("database", settings, {"networking": networking.outputs})
    assert spec.node == "database"
    dumped = json.loads(args.model_dump_json())
    assert dumped["private_subnet_ids"] == [UNKNOWN_WIRE, UNKNOWN_WIRE]
    assert dumped["db_security_group_id"] == UNKNOWN_WIRE
    known = project_outputs(GRAPH["networking"], settings, _values(NETWORKING), {})
    _, resolved = GRAPH.spec("database", settings, {"networking": known.outputs})
    assert json.loads(resolved.model_dump_json())["private_subnet_ids"] == ["subnet-a", "subnet-b"]
    bad = {**NETWORKING, "private_subnet_ids": ["subnet-a"]}
    with pytest.raises(ValidationError, match="at least 2"):
        GRAPH.spec(
            "database", settings, {"networking": parse_outputs(GRAPH["networking"], _values(bad))}
        )


def test_a_step_without_a_task_is_refused_when_the_graph_is_declared() -> None:
    with pytest.raises(GraphError, match="step 'check' names no task"):
        StackGraph([Node("check", NodeKind.STEP, "a check")])
    with pytest.raises(GraphError, match="stack 'cache' declares no outputs, inputs, program"):
        StackGraph([Node("cache", NodeKind.STACK, "a cache")])
    with pytest.raises(GraphError, match="declared twice"):
        StackGraph([Node("a", NodeKind.STACK, "a")] * 2, check=False)


def test_the_walker_and_the_flows_name_no_node() -> None:
    """Steps are data: the walker, the gate and the flows find nodes through the graph."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for module in ("flows/walk.py", "flows/pipeline.py", "flows/gate.py", "flows/summary.py"):
        text = (root / module).read_text()
        for name in GRAPH.order():
            assert f'"{name}"' not in text, f"{module} names node {name!r}"


def test_parse_outputs_names_the_stack_and_the_missing_key() -> None:
    node = GRAPH["database"]
    assert node.outputs is not None
    raw = _values(DATABASE)
    assert parse_outputs(node, raw).model_dump().keys() == node.outputs.model_fields.keys()
    del raw["host"]
    with pytest.raises(MissingOutputError) as info:
        parse_outputs(node, raw)
    assert info.value.stack == "database"
    assert "database" in str(info.value) and "host" in str(info.value)


def test_a_program_whose_arguments_refuse_an_unknown_is_named_with_what_to_do() -> None:
    """A stack added with plain `str` arguments for another stack's outputs: its preview against
    an upstream not deployed yet fails naming the stack, the argument and the type to use."""
    from pydantic import BaseModel

    from stackflow.dag import Upstream
    from stackflow.errors import PermanentStackError

    class Args(BaseModel):
        vpc_id: str

    def inputs(_: Any, up: Upstream) -> Args:
        return Args(vpc_id=up["networking"].vpc_id)

    graph = StackGraph(
        [
            GRAPH["networking"],
            Node("audit", NodeKind.STACK, "a", ("networking",), Args, inputs, program=dict),
        ],
        check=False,
    )
    settings = get_settings(environment="dev")
    unknown = project_outputs(GRAPH["networking"], settings, {}, {}).outputs
    with pytest.raises(PermanentStackError) as info:
        graph.spec("audit", settings, {"networking": unknown})
    text = str(info.value)
    assert "dev/audit" in text and "(vpc_id)" in text and "networking" in text
    assert "| Unknown" in text
    _, args = graph.spec(
        "audit", settings, {"networking": parse_outputs(GRAPH["networking"], _values(NETWORKING))}
    )
    assert args.vpc_id == "vpc-1"  # type: ignore[attr-defined]
