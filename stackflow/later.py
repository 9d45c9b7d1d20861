"""Program arguments an upstream stack has not handed over yet: what lets a stack's `up` start
beside the stacks it reads (graph `Node.early`).

A stack that reads the database's outputs need not wait for the database to create what does not
read them: the app's load balancer, target group, listener, cluster, roles and log group need only
networking. Its `up` starts with each value still to come as a `Later` (an argument type that
takes `| Unknown` takes it, as it takes a preview's unknowns), and the program, when Pulumi runs
it, gets in its place a Pulumi output that resolves when the value arrives. Pulumi creates at once
what needs none of them; a resource that reads one (the task definition, and the service after it)
is registered when it arrives. The graph is unchanged: the same three stacks, the same preview,
approval plan and destroy order.

An argument builder that does anything with such a value but pass it on (format it, test it,
compute with it) raises `LaterValueUsed`, and the stack waits for its upstream as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from typing import Any

from pulumi.output import Unknown as _PulumiUnknown
from pydantic import BaseModel, SecretStr

from programs.common import holds


class LaterValueUsed(TypeError):
    """An argument builder used a value that has not arrived yet (it may only pass it on)."""


class Later(_PulumiUnknown):
    """A value of an upstream stack's output that arrives when that stack's `up` ends.

    A Pulumi `Unknown` to the argument models (so `X | Unknown` takes it); anything else a
    builder could do with it raises.
    """

    def __init__(self, node: str, output: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.node, self.output = node, output

    def _used(self, *_: Any) -> Any:
        raise LaterValueUsed(
            f"{self.node}.{self.output} arrives when {self.node}'s up ends; it can only be passed on"
        )

    # What `object` would answer quietly (arithmetic, iteration and `int()` refuse already).
    __str__ = __format__ = __bool__ = __eq__ = __ne__ = _used
    __hash__ = _PulumiUnknown.__hash__

    def __repr__(self) -> str:
        return f"Later({self.node}.{self.output})"


def placeholders(node: str, outputs: type[BaseModel]) -> BaseModel:
    """An upstream stack's outputs model, every field a `Later` of it (not validated)."""
    values: dict[str, Any] = {name: Later(node, name) for name in outputs.model_fields}
    return outputs.model_construct(**values)


def holds_later(value: Any) -> bool:
    """Whether `value` is, or holds anywhere inside it, a `Later`."""
    return holds(value, lambda item: isinstance(item, Later))


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = getattr(value, step) if isinstance(value, BaseModel) else value[step]
    return value


def bind(args: BaseModel, arrived: concurrent.futures.Future[BaseModel]) -> BaseModel:
    """`args` with every `Later` replaced by a Pulumi output of the same place in the arguments
    that arrive (`arrived`: the same model, built from the upstream's real outputs).

    Called inside the Pulumi program (its event loop runs): the outputs await `arrived` there.
    If `arrived` fails, so does every resource reading one of them, and with it the update.
    """
    import pulumi

    shared: pulumi.Output[BaseModel] = pulumi.Output.from_input(asyncio.wrap_future(arrived))

    def output(path: tuple[Any, ...]) -> pulumi.Output[Any]:
        def pick(real: BaseModel) -> Any:
            value = _at(real, path)
            return (
                pulumi.Output.secret(value.get_secret_value())
                if isinstance(value, SecretStr)
                else value
            )

        return shared.apply(pick)

    def swap(value: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(value, Later):
            return output(path)
        if isinstance(value, Mapping):
            return {k: swap(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(swap(v, (*path, i)) for i, v in enumerate(value))
        return value

    update = {
        name: swap(getattr(args, name), (name,))
        for name in type(args).model_fields
        if holds_later(getattr(args, name))
    }
    return args.model_copy(update=update)


def late_program(
    program: Callable[[Any], Mapping[str, Any]],
    args: BaseModel,
    arrived: concurrent.futures.Future[BaseModel],
) -> Callable[[], Mapping[str, Any]]:
    """The stack's program, run with `args` whose later values are bound when Pulumi runs it."""
    return lambda: program(bind(args, arrived))
