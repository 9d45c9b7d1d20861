"""The stack graph as data: order, reverse, targeting, critical path, picture, typed outputs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from graph import GRAPH
from stackflow.engine import OutputValue
from stackflow.errors import MissingOutputError, UnknownStackError
from stackflow.graph import (
    GraphError,
    Node,
    NodeKind,
    StackGraph,
    parse_outputs,
    placeholder_outputs,
)
from stackflow.settings import get_settings

pytestmark = pytest.mark.unit


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


def _strings(value: Any) -> list[str]:
    if isinstance(value, SecretStr):
        return [value.get_secret_value()]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


@pytest.mark.parametrize("stack", GRAPH.stacks)
def test_placeholder_outputs_are_known_values_or_say_placeholder(stack: str) -> None:
    settings = get_settings(environment="dev")
    node = GRAPH[stack]
    outputs = placeholder_outputs(node, settings)
    known = dict(node.known(settings)) if node.known else {}
    made_up = [
        s
        for name in type(outputs).model_fields
        if name not in known
        for s in _strings(getattr(outputs, name))
    ]
    assert made_up, "every stack has outputs only a deploy can tell"
    for text in made_up:
        assert "placeholder" in text
    for name, value in known.items():
        assert _plain(getattr(outputs, name)) == value


def test_placeholders_follow_the_settings_they_are_known_from() -> None:
    settings = get_settings(environment="prod")  # three AZs, port from the file
    net = placeholder_outputs(GRAPH["networking"], settings)
    assert len(net.private_subnet_ids) == settings.network.az_count == 3  # type: ignore[attr-defined]
    db = placeholder_outputs(GRAPH["database"], settings)
    assert db.port == settings.database.port  # type: ignore[attr-defined]


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
    placeholder = placeholder_outputs(node, get_settings(environment="dev"))
    raw = {
        name: OutputValue(_plain(getattr(placeholder, name)), secret=name == "password")
        for name in node.outputs.model_fields
    }
    assert parse_outputs(node, raw).model_dump().keys() == node.outputs.model_fields.keys()
    del raw["host"]
    with pytest.raises(MissingOutputError) as info:
        parse_outputs(node, raw)
    assert info.value.stack == "database"
    assert "database" in str(info.value) and "host" in str(info.value)
