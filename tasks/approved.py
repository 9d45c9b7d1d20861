"""How an approval binds one stack operation of a gated `up`: the update plan its preview saves,
and the check that what is applied is what the approval showed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stackflow import fingerprint
from stackflow.engine import Listener, Operation
from stackflow.engine.base import StackSpec
from stackflow.errors import PlanChanged
from stackflow.plan import StackPlan
from tasks.context import RunContext


@dataclass(frozen=True)
class Gate:
    """How an approval binds one stack operation of a gated `up`.

    Planning (PREVIEW): the preview saves Pulumi's update plan to `plan_file`, and a stack whose
    inputs match its last successful up is left out of the plan (unchanged). Applying (UP): the
    stack is updated under `approved.plan_file`; if its inputs moved since the preview (an
    upstream stack's new outputs resolved), it is previewed again into `plan_file` and applied
    under that plan only if every change is one the approval showed.
    """

    plan_file: Path
    approved: StackPlan | None = None  # UP: what was approved for this stack (None: nothing)


def approved_plan(
    ctx: RunContext, spec: StackSpec, fp: str, gate: Gate, listener: Listener
) -> Path:
    """The update plan a gated `up` of `spec` applies under.

    Raises:
        PlanChanged: the stack would change although the approval showed no change for it, or
            (re-previewed after its upstream moved) it would make a change the approval did not show.
    """
    approved = gate.approved
    if approved is None or approved.plan_file is None:
        raise PlanChanged(
            spec.label,
            "its inputs changed since the plan was approved, which showed it unchanged",
        )
    if not approved.plan_file.exists():
        raise PlanChanged(spec.label, f"the approved update plan {approved.plan_file} is gone")
    if fp == approved.fingerprint:
        return approved.plan_file
    # Within one run only upstream outputs can move (settings and programs are those of the
    # preview): see whether the changes are still the approved ones, with values resolved.
    listener.line(
        f"{spec.label}: an upstream stack's outputs changed since the preview; previewing again "
        "to check the changes are the approved ones"
    )
    ctx.engine_calls.append(f"{Operation.PREVIEW.value}:{spec.node}")
    again = ctx.engine.run(
        Operation.PREVIEW, spec, listener, plan=gate.plan_file, stamp=fingerprint.stamp(fp)
    )
    beyond = [r for r in again.resource_changes if not approved.allows(r)]
    if beyond:
        shown = "; ".join(
            f"{r.change} {r.type} {r.name}"
            + (f" ({', '.join(p.name for p in r.properties)})" if r.properties else "")
            for r in beyond[:5]
        )
        raise PlanChanged(spec.label, f"changes the approval did not show: {shown}")
    return gate.plan_file
