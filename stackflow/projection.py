"""A stack's outputs as data: typed by its node's outputs model (`parse_outputs`), or as its
preview projects them for the previews downstream (`project_outputs`). A node without a model of
its own (a project node that declares none) hands on its exports as they are (`Untyped`)."""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, SecretStr, TypeAdapter

from programs.common import UNKNOWN, contains_unknown
from stackflow.engine.base import UNKNOWN_WIRE, OutputValue
from stackflow.errors import MissingOutputError
from stackflow.settings import Settings


class Node(Protocol):
    """What a projection reads of a graph node (`stackflow.dag.Node`, which builds on this
    module): its name, its outputs model and the outputs known from settings."""

    @property
    def name(self) -> str: ...

    @property
    def outputs(self) -> type[BaseModel] | None: ...

    @property
    def known(self) -> Callable[[Settings], Mapping[str, Any]] | None: ...


class Untyped(BaseModel):
    """A stack's exports when its node declares no outputs model: every export as it is (a
    secret text as a SecretStr), read as attributes (`up["web"].url`)."""

    model_config = ConfigDict(extra="allow", frozen=True)


def untyped(node: Node) -> bool:
    """Whether the node hands on its exports without a model of its own."""
    return node.outputs is None or node.outputs is Untyped


def parse_outputs(node: Node, outputs: Mapping[str, OutputValue]) -> BaseModel:
    """Typed outputs of a stack from its raw outputs.

    Raises:
        MissingOutputError: naming the stack and the missing keys.
    """
    if untyped(node):  # every export as it is; a secret text stays a secret
        return Untyped.model_validate(
            {
                k: SecretStr(v.value) if v.secret and isinstance(v.value, str) else v.value
                for k, v in outputs.items()
            }
        )
    assert node.outputs is not None
    missing = [k for k in node.outputs.model_fields if k not in outputs]
    if missing:
        raise MissingOutputError(
            node.name, f"outputs lack {', '.join(missing)} (is the stack deployed? run `up` for it)"
        )
    return node.outputs.model_validate({k: outputs[k].value for k in node.outputs.model_fields})


@dataclass(frozen=True)
class Projection:
    """A stack's outputs as its previewed update would leave them: what the previews of the
    stacks that read them are given, so they show what that update will change in them too.

    `outputs` is built without validation: an output the preview cannot know is Pulumi's
    `UNKNOWN` there (whole, or an item of a list), which the programs' arguments take
    (`programs.common.Unknown`) and Pulumi shows as "known after apply".
    """

    outputs: BaseModel
    unknown: tuple[str, ...] = ()  # known only after the update
    changed: tuple[str, ...] = ()  # the update changes them to a value the preview knows

    @property
    def moves(self) -> bool:
        """Whether any output would differ from what is deployed (or is not deployed yet)."""
        return bool(self.unknown or self.changed)

    def describe(self) -> str:
        """Which outputs move, e.g. `port changes; private_subnet_ids known after its up`."""
        parts = [f"{', '.join(self.changed)} changes"] if self.changed else []
        if self.unknown:
            parts.append(f"{', '.join(self.unknown)} known after its up")
        return "; ".join(parts)


def project_outputs(
    node: Node,
    settings: Settings,
    stored: Mapping[str, OutputValue],
    previewed: Mapping[str, OutputValue],
) -> Projection:
    """A stack's outputs as its preview projects them (see `Projection`).

    Per output: the value the preview projects (`UNKNOWN_WIRE` where it cannot know it); for a
    secret the preview hides, or an output it does not report: the deployed value, else the
    value known from settings (`node.known`), else unknown.

    Args:
        stored: the outputs deployed now ({} for a stack not deployed yet).
        previewed: the outputs the preview reported (`OperationResult.projected`).
    """
    known = dict(node.known(settings)) if node.known is not None else {}
    values: dict[str, Any] = {}
    unknown: list[str] = []
    changed: list[str] = []
    model = Untyped if untyped(node) or node.outputs is None else node.outputs
    fields = (
        {name: Any for name in [*stored, *(k for k in previewed if k not in stored)]}
        if model is Untyped
        else {name: info.annotation for name, info in model.model_fields.items()}
    )
    for name, annotation in fields.items():
        seen, before = previewed.get(name), stored.get(name)
        if seen is not None and seen.value is not None:
            raw = seen.value
        elif before is not None:
            raw = before.value
        else:
            raw = known.get(name, UNKNOWN_WIRE)
        values[name] = _typed(annotation, raw)
        if contains_unknown(values[name]):
            unknown.append(name)
        elif before is not None and values[name] != _typed(annotation, before.value):
            changed.append(name)
    return Projection(model.model_construct(**values), tuple(unknown), tuple(changed))


def _typed(annotation: Any, value: Any) -> Any:
    """`value` as the outputs model's field holds it; a value not known yet is UNKNOWN."""
    if isinstance(value, list) and typing.get_origin(annotation) in (list, tuple):
        (inner,) = typing.get_args(annotation)[:1] or (Any,)
        return [_typed(inner, item) for item in value]  # a list's items may be unknown alone
    if (isinstance(value, str) and value == UNKNOWN_WIRE) or contains_unknown(value):
        return UNKNOWN
    return TypeAdapter(annotation).validate_python(value)
