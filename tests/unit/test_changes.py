"""What a preview and a drift check say about each resource, from the engine's step events:
down to the leaf that moved (a key, a list item, a key inside a JSON document), values masked."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi.automation.events import StepEventMetadata

from stackflow.engine.automation import resource_change
from stackflow.engine.automation.drift import drifted, drifted_resource
from stackflow.engine.base import UNKNOWN_WIRE
from stackflow.redact import MASK, Redactor

pytestmark = pytest.mark.unit
SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's signature key of a secret value
URN = "urn:pulumi:dev::p::aws:rds/instance:Instance::mysql"


def _step(
    op: str,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    outputs: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
    **extra: Any,
) -> StepEventMetadata:
    """An engine step as Pulumi's JSON event stream carries it."""

    def state(inputs: dict[str, Any], outs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "aws:rds/instance:Instance", "urn": URN, "inputs": inputs, "outputs": outs}

    return StepEventMetadata.from_json(
        {
            "op": op,
            "urn": URN,
            "type": "aws:rds/instance:Instance",
            "provider": "",
            **({"old": state(old, outputs[0])} if old is not None else {}),
            **({"new": state(new, outputs[1])} if new is not None else {}),
            **extra,
        }
    )


def test_a_create_names_each_input_with_what_is_known_of_it() -> None:
    """A new environment's preview shows the values settings decide; an input another resource
    decides says "known after apply"; secrets are masked; provider bookkeeping is left out."""
    inputs = {
        "port": 3306,
        "subnetIds": ["subnet-a", UNKNOWN_WIRE],
        "password": {SIG: "1b47061264138c4ac30d75fd1eb44270", "plaintext": "hunter2-secret"},
        "__defaults": [],
    }
    change = resource_change(_step("create", None, inputs), Redactor())
    assert change is not None
    shown = {p.name: (p.kind, p.new) for p in change.properties}
    assert shown == {
        "password": ("add", MASK),
        "port": ("add", 3306),
        "subnetIds": ("add", ["subnet-a", "(known after apply)"]),
    }


def test_an_update_names_the_leaves_that_move_inside_lists_and_json_documents() -> None:
    """One more subnet: the item added (unknown until networking's up) is the leaf; a new port
    inside container definitions (a JSON document held as a string) is named down to its key."""
    containers = [{"name": "app", "environment": [{"name": "DB_PORT", "value": "3306"}]}]
    moved = [{"name": "app", "environment": [{"name": "DB_PORT", "value": "3307"}]}]
    old = {"subnets": ["s-a", "s-b"], "defs": json.dumps(containers), "cpu": "256"}
    new = {"subnets": ["s-a", "s-b", UNKNOWN_WIRE], "defs": json.dumps(moved), "cpu": "256"}
    detailed = {
        "subnets": {"diffKind": "update", "inputDiff": True},
        "defs": {"diffKind": "update-replace", "inputDiff": True},
    }
    change = resource_change(_step("replace", old, new, detailedDiff=detailed), Redactor())
    assert change is not None
    props = {p.name: p for p in change.properties}
    assert set(props) == {"subnets[2]", "defs[0].environment[0].value"}
    assert (props["subnets[2]"].kind, props["subnets[2]"].new) == ("add", "(known after apply)")
    leaf = props["defs[0].environment[0].value"]
    assert (leaf.old, leaf.new, leaf.forces_replacement) == ("3306", "3307", True)
    assert change.replaced_by == ["defs[0].environment[0].value"]


def test_drift_names_each_moved_key_with_the_stored_and_found_values_secrets_masked() -> None:
    """A refresh preview's step: the tag added behind our back (stored: none), a tag changed, and
    a password pasted into a tag (masked by the redactor); a secret input never shows."""
    secret = {SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "[secret]"}
    old = {"tags": {"team": "a"}, "password": secret, "port": 3306}
    new = {"tags": {"team": "b", "console-edit": "yes", "note": "hunter2-secret"}}
    new |= {"password": secret, "port": 3306}
    step = _step("update", old, new, diffs=["tags"], detailedDiff={"tags": {"diffKind": "update"}})
    assert drifted(step)
    found = drifted_resource(step, Redactor(["hunter2-secret"]))
    assert found.change == "update" and found.type == "aws:rds/instance:Instance"
    by = {p["name"]: (p["stored"], p["found"]) for p in found.drift_dict()["properties"]}
    assert by == {
        'tags["console-edit"]': (None, "yes"),
        "tags.note": (None, MASK),
        "tags.team": ("a", "b"),
    }
    assert found.drift_dict()["drift"] == "changed"
    assert "hunter2-secret" not in json.dumps(found.drift_dict())


def test_a_resource_gone_from_the_cloud_is_drift_and_an_unmoved_one_is_not() -> None:
    gone = _step("delete", {"name": "/ecs/app"}, None)
    assert drifted(gone)
    assert drifted_resource(gone, Redactor()).drift_dict() == {
        "urn": URN,
        "type": "aws:rds/instance:Instance",
        "name": "mysql",
        "drift": "deleted",
        "properties": [],
    }
    assert not drifted(_step("refresh", {"a": 1}, {"a": 1}))
    assert not drifted(_step("same", {"a": 1}, {"a": 1}))
