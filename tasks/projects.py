"""What a project node's operation reads from its upstream stacks (see `stackflow.projectnodes`).

A project node receives upstream outputs as stack config and through `pulumi.StackReference`.
Config cannot hold an unknown value, and a StackReference reads what is deployed: so a project
node's preview reads the upstream outputs deployed now, never what an upstream preview projects.
When an upstream update will change them, its preview says "upstream changes not projected"
(it shows the values deployed now); a gated up then previews it again once they are applied, and
holds that to the approval as it does for any unknown (`tasks.approved`). Before its upstream
stacks exist at all, a project node cannot be previewed: said plainly, never a failure of the
whole preview.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, SecretStr

from programs.common import UNKNOWN
from stackflow.dag import Node, Projection, Untyped
from stackflow.engine import Operation
from stackflow.outcome import NodeOutcome, PreviewResult, Status
from stackflow.progress import NodeState
from tasks.context import RunContext

NOT_PROJECTED = "upstream changes not projected"


@dataclass(frozen=True)
class ProjectRead:
    """The upstream outputs one operation of a project node reads, and what a preview says."""

    outputs: dict[str, BaseModel] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()  # the secret values among them (its config holds them secure)
    note: str = ""  # a preview's: which upstream changes it does not show
    absent: tuple[str, ...] = ()  # upstream stacks not deployed yet: nothing to preview against


def project_read(upstream: Mapping[str, NodeOutcome], operation: Operation) -> ProjectRead:
    """What a project node's `operation` reads from its upstream outcomes (steps hand on none):
    the outputs deployed now, also for a preview (see the module)."""
    outputs: dict[str, BaseModel] = {}
    secrets: list[str] = []
    moving: list[str] = []
    absent: list[str] = []
    for name, outcome in upstream.items():
        if outcome.typed is None:
            continue  # a step
        if operation is Operation.PREVIEW and outcome.placeholder:
            absent.append(name)
            continue
        outputs[name] = outcome.typed
        secrets += [str(v.value) for v in outcome.outputs.values() if v.secret]
        secrets += [
            v.get_secret_value() for v in dict(outcome.typed).values() if isinstance(v, SecretStr)
        ]
        found = outcome.result
        if operation is Operation.PREVIEW and isinstance(found, PreviewResult) and found.moves:
            moving.append(f"{name}: {found.moves}")
    note = (
        f"{NOT_PROJECTED} ({'; '.join(moving)}): it shows the values deployed now, and is "
        "previewed again once they are applied"
        if moving
        else ""
    )
    return ProjectRead(outputs, tuple(secrets), note, tuple(absent))


def not_previewable(ctx: RunContext, node: Node, absent: tuple[str, ...]) -> NodeOutcome:
    """The outcome of a project node's preview before its upstream stacks (`absent`) exist: no
    engine call, its outputs unknown to the previews downstream of it."""
    waits = ", ".join(absent)
    note = (
        f"not previewable until {waits} {'is' if len(absent) == 1 else 'are'} deployed: a "
        "project reads its upstream outputs as config and through StackReferences, which hold "
        "deployed values only; it is previewed once they are applied"
    )
    ctx.publish(node.name, NodeState.DONE, status=Status.PREVIEWED, detail=note)
    model = node.outputs if node.outputs is not None else Untyped
    values: dict[str, Any] = {name: UNKNOWN for name in model.model_fields}
    unknown = model.model_construct(None, **values)
    moves = Projection(unknown, unknown=tuple(model.model_fields)).describe()
    found = PreviewResult((), unknown, moves=moves)  # not deployed: a placeholder
    return NodeOutcome(node.name, Operation.PREVIEW, Status.PREVIEWED, note=note, result=found)
