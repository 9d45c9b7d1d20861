"""A stack's `up` that starts before some of its upstream nodes end (graph `Node.early`).

The walk hands the stack task those nodes' futures unresolved (`EarlyUpstream`). The task then
decides, with no `pulumi` process:

- the stack runs whatever they hand it (not deployed yet, its own inputs changed, forced, drifted):
  its `up` starts now, with their outputs as `stackflow.later.Later` values that arrive when they
  end (`EarlyStart`); what needs none of them is created meanwhile;
- it might be unchanged: it waits for them, as a stack always did, and may still be skipped.

Either way its stamp records the fingerprint of the arguments built from the real outputs, so the
next run's skip decision is the same as if it had waited.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
from collections.abc import Mapping
from typing import Any

from prefect.exceptions import UpstreamTaskError
from prefect.futures import PrefectFuture
from pydantic import BaseModel, ValidationError

from stackflow import fingerprint
from stackflow.dag import NodeKind, project_outputs, user_outputs
from stackflow.engine import Operation
from stackflow.engine.base import OutputValue, StackSpec
from stackflow.engine.envelope import is_secret
from stackflow.errors import StackError
from stackflow.later import LaterValueUsed, late_program, placeholders
from stackflow.outcome import NodeOutcome
from tasks.context import RunContext

EarlyUpstream = Mapping[str, PrefectFuture[NodeOutcome]]
"""The futures of the upstream nodes a stack may start before, by node name."""


class UpstreamStopped(StackError):
    """An upstream node a stack started before did not complete: the stack's update stopped
    where it needed that node (what it created meanwhile stays in its state)."""


STOPPED = "what reads its outputs was not created or changed"
"""What an early start did when an upstream it started before did not complete."""


def wait(early: EarlyUpstream) -> dict[str, NodeOutcome]:
    """Their outcomes, once every one has ended (a stack that did not start early).

    Raises:
        UpstreamTaskError: one of them did not complete (the walk says "not run").
    """
    outcomes: dict[str, NodeOutcome] = {}
    for name, future in early.items():
        try:
            outcomes[name] = future.result()
        except Exception:
            raise UpstreamTaskError(f"{name} did not complete") from None
    return outcomes


@dataclasses.dataclass
class EarlyStart:
    """An `up` started before its early upstream nodes ended.

    `spec` runs the program with the later values bound; `arrived` gets the program's arguments
    built from the real outputs, `fingerprint` their fingerprint (what the update's stamp
    records), both when every early upstream node has completed. When they cannot be built, both
    fail with a `pulumi.RunError` (the update ends on its one line, no traceback) and `cause`
    holds the error itself.
    """

    spec: StackSpec
    args: BaseModel
    arrived: concurrent.futures.Future[BaseModel]
    fingerprint: concurrent.futures.Future[str] = dataclasses.field(
        default_factory=concurrent.futures.Future
    )
    cause: BaseException | None = None

    def stopped(self, started: bool) -> BaseException | None:
        """What to raise when the real arguments never arrived (None when they did): an upstream
        node that did not complete is `UpstreamStopped` once the update began (the walk says
        "stopped"), `UpstreamTaskError` before ("not run"); any other cause as it is."""
        cause = self.cause
        if started and isinstance(cause, UpstreamTaskError):
            return UpstreamStopped(
                self.spec.label, f"{cause}: {STOPPED} (what needs only the other stacks was)"
            )
        return cause


def begin(
    ctx: RunContext,
    node: str,
    read: Mapping[str, BaseModel],
    early: EarlyUpstream,
    force: bool,
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> EarlyStart | None:
    """Start `node`'s `up` before `early` ends, when it runs whatever they hand it; None: wait.

    `read`: the outputs of the upstream stacks that have ended (or were read from state).
    """
    graph, settings = ctx.graph, ctx.settings
    stacks = [n for n in early if graph[n].kind is NodeKind.STACK]
    why = _runs_anyway(ctx, node, read, stacks, force)
    if not why:
        return None
    if not _begun(ctx, node, early, stacks):
        return None  # one of them ended before it began: wait, and say what it did
    later = {n: placeholders(n, graph[n].outputs) for n in stacks}  # type: ignore[arg-type]
    try:
        spec, args = graph.spec(node, settings, {**read, **later})
    except (LaterValueUsed, ValidationError) as exc:
        # its arguments do more with an upstream output than pass it on: wait for the value
        # (a validation error quotes the values it refused: only where, never what, is logged)
        why = (
            str(exc)
            if isinstance(exc, LaterValueUsed)
            else "its arguments refuse a value still to come: "
            + ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
        )
        logger.info("%s waits for %s: %s", f"{settings.environment}/{node}", ", ".join(early), why)
        return None
    arrived: concurrent.futures.Future[BaseModel] = concurrent.futures.Future()
    program = late_program(graph[node].program, args, arrived)  # type: ignore[arg-type]
    start = EarlyStart(dataclasses.replace(spec, program=program), args, arrived)
    threading.Thread(
        target=_arrive,
        args=(ctx, node, read, early, start),
        name=f"early-{node}",
        daemon=True,
    ).start()
    logger.info(
        "%s starts beside %s (%s): what reads their outputs waits for them",
        spec.label,
        ", ".join(early),
        why,
    )
    return start


def _begun(ctx: RunContext, node: str, early: EarlyUpstream, stacks: list[str]) -> bool:
    """Wait until each early upstream stack's update has begun (its first resource event: the
    engine opened its state), so bad input that refuses it at the start (a wrong passphrase)
    stops this stack before it starts too. False: one of them ended first."""
    from stackflow.progress import NodeState

    ctx.publish(node, NodeState.WAITING, detail=f"for {', '.join(stacks)} to begin")
    for name in stacks:
        begun, ended = ctx.begun(name), threading.Event()

        def end(_: object, begun: threading.Event = begun, ended: threading.Event = ended) -> None:
            ended.set()
            begun.set()

        early[name].add_done_callback(end)
        begun.wait()
        if ended.is_set():
            return False
    ctx.publish(node, NodeState.RUNNING)
    return True


def _runs_anyway(
    ctx: RunContext, node: str, read: Mapping[str, BaseModel], stacks: list[str], force: bool
) -> str:
    """Why the stack's up runs whatever its early upstream stacks hand it ("" when it might be
    unchanged): computed with their outputs deployed now, read from their checkpoints (no
    `pulumi` process, no secret opened: a secret output the arguments read is unknown here, and
    the stack then runs, which only costs what waiting would have saved)."""
    if force:
        return "forced"
    settings = ctx.settings
    if ctx.drift.marked(ctx.graph.bare_spec(settings, node)):
        return "drift found earlier"
    stored = dict(read)
    try:
        for name in stacks:
            state = ctx.engine.state(ctx.graph.bare_spec(settings, name))
            plain = {
                k: OutputValue(v)
                for k, v in (state.outputs if state is not None else {}).items()
                if not is_secret(v)
            }
            if not user_outputs(plain):
                return f"{name} is not deployed yet"
            stored[name] = project_outputs(ctx.graph[name], settings, plain, {}).outputs
        spec, args = ctx.graph.spec(node, settings, stored)
    except Exception:  # a read that fails here decides nothing; the stack task says it after
        return ""
    fp = fingerprint.compute(
        spec, args, ctx.graph[node].sources, ctx.engine.name, ctx.engine.versions()
    )
    return fingerprint.why_not_unchanged(ctx.engine.state(spec), fp)


def _arrive(
    ctx: RunContext,
    node: str,
    read: Mapping[str, BaseModel],
    early: EarlyUpstream,
    start: EarlyStart,
) -> None:
    """Wait for every early upstream node; hand the program the arguments their outputs build
    (or the reason it gets none: the resources reading them fail, and the update with them)."""
    import pulumi

    try:
        outcomes = wait(early)
        real = dict(read)
        for name, outcome in outcomes.items():
            typed = outcome.read_by(Operation.UP)
            if typed is not None:
                real[name] = typed
        spec, args = ctx.graph.spec(node, ctx.settings, real)
        fp = fingerprint.compute(
            spec, args, ctx.graph[node].sources, ctx.engine.name, ctx.engine.versions()
        )
    except BaseException as exc:  # handed to the program and the task
        start.cause = exc
        said = pulumi.RunError(
            f"{exc}: {STOPPED}" if isinstance(exc, UpstreamTaskError) else ctx.redactor(str(exc))
        )
        start.fingerprint.set_exception(said)
        start.arrived.set_exception(said)
        return
    start.fingerprint.set_result(fp)
    start.arrived.set_result(args)
