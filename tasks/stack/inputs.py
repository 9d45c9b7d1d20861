"""The stack task's first phase: what the stack runs with. Its spec and program arguments, built
from its upstream stacks' outputs (or started before some of them end: `tasks.early`; a project
node reads what is deployed: `tasks.projects`), the fingerprint of those inputs, the drift found
on it earlier, and what the upstream previews say will move."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from stackflow import fingerprint
from stackflow.drift import DriftMark
from stackflow.engine import Operation
from stackflow.engine.base import StackSpec
from stackflow.outcome import NodeOutcome, PreviewResult
from stackflow.progress import NodeState
from tasks.early import EarlyStart, EarlyUpstream
from tasks.early import begin as begin_early
from tasks.early import wait as wait_early
from tasks.projects import project_read
from tasks.stack.call import StackCall


@dataclass(frozen=True)
class Inputs:
    """What one operation on one stack runs with."""

    spec: StackSpec
    args: BaseModel | None = None  # None: the operation does not run the program
    fingerprint: str = ""  # of spec and args; "" when not computed (see `started`)
    started: EarlyStart | None = None  # an up started before its early upstream nodes ended
    drift: DriftMark | None = None  # why its next up may not be skipped (up, a gated plan)
    note: str = ""  # of the upstream: what their previews move (a project node: what it omits)
    absent: tuple[str, ...] = ()  # a project node's upstream stacks not deployed yet

    def stamp(self) -> dict[str, Any] | None:
        """What an up records in the stack's checkpoint (an early start's fingerprint is a
        future: its inputs arrive while the update runs)."""
        if self.started is not None:
            return fingerprint.stamp(self.started.fingerprint)
        return fingerprint.stamp(self.fingerprint) if self.fingerprint else None


def gather(
    call: StackCall,
    upstream: Mapping[str, NodeOutcome],
    early: EarlyUpstream | None,
    force: bool,
) -> Inputs:
    """What the stack runs with. A refresh, a drift check and a destroy do not run the program:
    they need no upstream outputs. An up with `early` upstream nodes may start before they end;
    otherwise it waits for them here (and may still be skipped)."""
    ctx, node, operation = call.ctx, call.node, call.operation
    if operation not in (Operation.UP, Operation.PREVIEW):
        return Inputs(ctx.graph.bare_spec(ctx.settings, node))
    if ctx.graph[node].project is not None:
        return _project(call, upstream)
    read = _read(upstream, operation)
    started = None
    if early:
        started = begin_early(ctx, node, read, early, force, call.logger)
        if started is None:
            call.say(NodeState.WAITING, detail=f"for {', '.join(early)}")
            upstream = {**upstream, **wait_early(early)}
            call.say(NodeState.RUNNING)
            read = _read(upstream, operation)
    if started is not None:
        spec, args = started.spec, started.args
    else:
        spec, args = ctx.graph.spec(node, ctx.settings, read)
    mark = ctx.drift.marked(spec) if operation is Operation.UP or call.planning else None
    found = "" if started is not None else _fingerprint(call, spec, args)
    return Inputs(spec, args, found, started, mark, _moves(upstream))


def _project(call: StackCall, upstream: Mapping[str, NodeOutcome]) -> Inputs:
    """A project node's inputs: the upstream outputs deployed now, also for a preview (whose
    note says which upstream changes it does not show); none before they are deployed."""
    ctx, node, operation = call.ctx, call.node, call.operation
    seen = project_read(upstream, operation)
    if seen.absent and operation is Operation.PREVIEW:
        return Inputs(ctx.graph.bare_spec(ctx.settings, node), absent=seen.absent)
    spec, args = ctx.graph.spec(node, ctx.settings, seen.outputs, seen.secrets)
    mark = ctx.drift.marked(spec) if operation is Operation.UP or call.planning else None
    note = seen.note if operation is Operation.PREVIEW else ""
    return Inputs(spec, args, _fingerprint(call, spec, args), drift=mark, note=note)


def _read(upstream: Mapping[str, NodeOutcome], operation: Operation) -> dict[str, BaseModel]:
    """The outputs an operation reads from each upstream stack (steps hand on none)."""
    read = {k: v.read_by(operation) for k, v in upstream.items()}
    return {k: v for k, v in read.items() if v is not None}


def _fingerprint(call: StackCall, spec: StackSpec, args: BaseModel) -> str:
    """The stamp an up records; a preview plans the one its up will (an early start's comes
    when its inputs do)."""
    engine = call.ctx.engine
    sources = call.ctx.graph[call.node].sources
    return fingerprint.compute(spec, args, sources, engine.name, engine.versions())


def _moves(upstream: Mapping[str, NodeOutcome]) -> str:
    """Which upstream stacks' previews move an output this stack reads, in words ("" if none)."""
    moves = [
        f"{name}: {o.result.moves}"
        for name, o in upstream.items()
        if isinstance(o.result, PreviewResult) and o.result.moves
    ]
    return "upstream previews: " + "; ".join(moves) if moves else ""
