"""What the load balancing modules (`elb`, `elb_target_groups`, `elb_listeners`) share: the tag
calls of elbv2, and how a load balancer or target group is created and described with its
attributes (pulumi-aws's inputs; AWS keeps them as {Key, Value} strings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stackflow.localcloud.registry import Props
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Tagging
from stackflow.localcloud.resources._shared import input_tags

# Every elbv2 resource's id is its ARN.
ELB_TAGGING = Tagging(
    "describe_tags",
    "add_tags",
    "remove_tags",
    key="ResourceArns",
    by="id",
    field="Tags",
    keys="TagKeys",
    item=KEY_VALUE,
    answer="TagDescriptions.Tags",
    listed=True,
)

# wire name -> (attribute key, type)
Attributes = Mapping[str, tuple[str, type]]


def _to_attribute(kind: type, value: Any) -> str:
    if kind is bool:
        return "true" if value else "false"
    return str(int(value)) if kind is int else str(value)


def _from_attribute(kind: type, text: str) -> Any:
    if kind is bool:
        return text.lower() == "true"
    return int(text) if kind is int else text


def _attributes(
    table: Attributes, inputs: Mapping[str, Any], only: frozenset[str] | None
) -> list[dict[str, str]]:
    """The inputs of `table` that are set (and in `only`, when given) as AWS's attributes."""
    return [
        {"Key": key, "Value": _to_attribute(kind, inputs[wire])}
        for wire, (key, kind) in table.items()
        if inputs.get(wire) is not None and (only is None or wire in only)
    ]


def _observed_attributes(table: Attributes, items: list[Mapping[str, str]]) -> Props:
    """AWS's attributes as the inputs of `table` (an empty value is not set)."""
    by_key = {str(item["Key"]): str(item["Value"]) for item in items}
    return {
        wire: _from_attribute(kind, by_key[key])
        for wire, (key, kind) in table.items()
        if key in by_key and by_key[key] != ""
    }


@dataclass(frozen=True)
class Attributed:
    """A load balancer or a target group: both are created, described and given attributes by
    calls named alike (`create_load_balancer`, `describe_load_balancer_attributes`, ...).

    Attributes:
        kind: the calls' name for it ("load_balancer", "target_group").
        listed: the answer's list of them ("LoadBalancers").
        arn: the field and argument that holds its ARN ("LoadBalancerArn").
        table: the inputs that are its attributes.
    """

    kind: str
    listed: str
    arn: str
    table: Attributes

    def create(self, elbv2: Any, kwargs: dict[str, Any], inputs: Props) -> str:
        """Create it from `kwargs` and the `tags` input, then set the attributes the inputs
        give; its ARN."""
        if input_tags(inputs):
            kwargs["Tags"] = ELB_TAGGING.wire(input_tags(inputs))
        made = getattr(elbv2, f"create_{self.kind}")(**kwargs)[self.listed][0]
        self.set_attributes(elbv2, str(made[self.arn]), inputs, None)
        return str(made[self.arn])

    def describe(self, elbv2: Any, arn: str) -> Answer:
        """It as AWS describes it, with its attributes under "Attributes"."""
        found = getattr(elbv2, f"describe_{self.kind}s")(**{f"{self.arn}s": [arn]})
        listed = getattr(elbv2, f"describe_{self.kind}_attributes")(**{self.arn: arn})
        return {**found[self.listed][0], "Attributes": listed["Attributes"]}

    def set_attributes(
        self, elbv2: Any, arn: str, inputs: Props, only: frozenset[str] | None
    ) -> None:
        """Set the attributes the inputs give (those in `only`, when given)."""
        changes = _attributes(self.table, inputs, only)
        if changes:
            getattr(elbv2, f"modify_{self.kind}_attributes")(**{self.arn: arn}, Attributes=changes)

    def observed(self, answer: Answer) -> Props:
        """The attribute inputs as `describe` answered them."""
        return _observed_attributes(self.table, answer["Attributes"])
