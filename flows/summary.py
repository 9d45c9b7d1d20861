"""How a run ended, as data and as reports: the exceptions a run ends with, its summary (secrets
masked), and the summary published as a Prefect artifact and events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prefect.artifacts import create_markdown_artifact
from prefect.events import emit_event

from flows.approval import Decision
from stackflow.dag import StackGraph
from stackflow.engine import Operation
from stackflow.errors import StackflowError
from stackflow.outcome import DriftResult, NodeOutcome, Status
from stackflow.plan import drift_value, markdown_cell, migrations_markdown
from stackflow.policy.report import policy_markdown


class PipelineError(StackflowError):
    """A run that ended badly; `summary` is its summary (secrets masked), to show what did happen."""

    def __init__(self, message: str, summary: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.summary = summary

    def __reduce__(self) -> tuple[Any, ...]:  # Prefect may pickle the exception with the state
        return (type(self), (str(self), self.summary))


class DriftDetected(PipelineError):
    """A drift check found stacks whose cloud resources differ from their state."""


class PipelineFailed(PipelineError):
    """A node of the pipeline failed; the message names it and why."""


class PolicyRefused(PipelineError):
    """A mandatory policy's violation stopped the run: the message names each stack, resource,
    property and rule (the command line exits 2, as for any refused input)."""


class RunStopped(PipelineError):
    """A run that ended on purpose with nothing (more) applied; the flow run ends Cancelled under
    `state_name`."""

    state_name = "Cancelled"


class RunInterrupted(RunStopped):
    """The run was interrupted (Ctrl-C at the command line that runs it)."""


class ApprovalRejected(RunStopped):
    """The plan was rejected: nothing was applied."""

    state_name = "Rejected"


class ApprovalSuperseded(ApprovalRejected):
    """A newer commit of the branch took the plan's place (its sync rejected it): nothing was
    applied."""

    state_name = "Superseded"


class ApprovalExpired(RunStopped):
    """Nobody approved or rejected the plan in time: nothing was applied."""

    state_name = "ApprovalExpired"


@dataclass
class PipelineSummary:
    """What a run did, per node, with every secret masked."""

    environment: str
    operation: Operation
    engine: str
    outcomes: list[NodeOutcome] = field(default_factory=list)
    failed: str | None = None
    engine_calls: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    target: str = ""  # "local cloud" or "AWS": every report names it
    ui_url: str | None = None  # the flow run's page in the Prefect UI
    approvals: list[Decision] = field(default_factory=list)  # a gated up's decisions, in order
    migrations: dict[str, Any] | None = None  # a preview's pending migrations (migrations_dict)
    stopped: str = ""  # why a run stopped on purpose (rejected, expired, interrupted)
    # which files said what this run deploys, and what overrode them (secrets masked)
    settings: dict[str, Any] = field(default_factory=dict)
    commit: str | None = None  # the project's commit this run deployed (git), when known
    graph: StackGraph | None = field(default=None, repr=False)  # the graph the run walked
    # the policy packs the run checked with, and the rules turned off with their reasons
    policies: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "operation": self.operation.value,
            "engine": self.engine,
            "target": self.target,
            "commit": self.commit,
            "failed": self.failed,
            "engine_calls": list(self.engine_calls),
            "duration_s": round(self.duration_s, 3),
            "stacks": [
                {
                    "stack": o.node,
                    "operation": o.operation.value,
                    "status": o.status.value,
                    "changes": o.changes.as_dict(),
                    "duration_s": round(o.duration_s, 3),
                    "outputs": o.shown_outputs(),
                    "note": o.note,
                    "retries": list(o.retries),
                    "healed": o.healed,
                    "resources": resources_dict(o),
                    "violations": [v.as_dict() for v in o.violations],
                }
                for o in self.outcomes
            ],
            "ui_url": self.ui_url,
            "approvals": [d.as_dict() for d in self.approvals],
            "migrations": self.migrations,
            "stopped": self.stopped,
            "settings": self.settings,
            "policies": self.policies,
        }

    def markdown(self) -> str:
        where = (
            " — **local cloud** (moto's AWS APIs on loopback: nothing was deployed to AWS)"
            if self.target == "local cloud"
            else ""
        )
        head = f"# {self.operation} `{self.environment}`{where}\n\n"
        if self.failed:
            head += f"**Failed:** {markdown_cell(self.failed)}\n\n"
        if self.stopped:
            head += f"**Stopped:** {markdown_cell(self.stopped)}\n\n"
        # the CLI's count, for whoever reads a worker's run in the UI (a skip makes none)
        head += f"engine operations: {len(self.engine_calls)}\n\n"
        if self.commit:
            head += f"commit: `{self.commit}`\n\n"
        rows = [
            "| stack | operation | status | create | update | replace | delete | same | seconds | note |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for o in self.outcomes:
            c = o.changes
            rows.append(
                f"| {o.node} | {o.operation} | {o.status} | {c.create} | {c.update} | {c.replace} | "
                f"{c.delete} | {c.same} | {o.duration_s:.2f} | {markdown_cell(o.note)} |"
            )
        outs = []
        for o in self.outcomes:
            shown = o.shown_outputs()
            if shown:
                outs.append(f"\n**{o.node}**\n")
                outs.extend(f"- `{k}`: `{v}`" for k, v in shown.items())
        return (
            head
            + "\n".join(rows)
            + "\n\n## Graph\n\n"
            + self.graph_markdown()
            + self.story_markdown()
            + self.approvals_markdown()
            + self.changes_markdown()
            + self.policies_markdown()
            + self.migrations_markdown()
            + ("\n\n## Outputs\n" + "\n".join(outs) if outs else "")
            + self.settings_markdown()
            + "\n"
        )

    def settings_markdown(self) -> str:
        """Which file said what this run deploys, and what this machine overrode (masked)."""
        if not self.settings:
            return ""
        env_file = self.settings.get("environment_file") or "?"
        kind = " (its kind's template)" if self.settings.get("template") else ""
        lines = ["", "", "## Settings", "", f"- environment file: `{env_file}`{kind}"]
        if self.settings.get("project_file"):
            lines.append(f"- project file: `{self.settings['project_file']}`")
        for name, where in sorted((self.settings.get("overrides") or {}).items()):
            lines.append(f"- `{name}` = {markdown_cell(where)}")
        for line in self.settings.get("ignored") or []:
            lines.append(f"- ignored: {markdown_cell(line)}")
        return "\n".join(lines)

    def graph_markdown(self) -> str:
        """The graph with each node's status, as a table: the Prefect UI's markdown renders
        tables, not Mermaid. Nodes are listed by stage (a node's stage follows its upstream's)."""
        status = {o.node: o.status for o in self.outcomes}
        stage: dict[str, int] = {}
        rows = ["| stage | node | status | needs |", "|---|---|---|---|"]
        nodes = list(self.graph.nodes.values()) if self.graph is not None else []
        for node in nodes:
            name = node.name
            stage[name] = 1 + max((stage[u] for u in node.upstream), default=0)
            found = status.get(name)
            shown = "not in this run" if found is None else found.value
            shown = f"**{shown}**" if found is not None and found.needs_attention else shown
            needs = ", ".join(node.upstream) or "—"
            rows.append(f"| {stage[name]} | **{name}** | {shown} | {needs} |")
        return "\n".join(rows)

    def story_markdown(self) -> str:
        """Retries and recoveries: what the counts alone do not tell."""
        lines = []
        for o in self.outcomes:
            for i, reason in enumerate(o.retries, 1):
                lines.append(
                    f"- **{o.node}**: attempt {i} failed and was retried: {markdown_cell(reason)}"
                )
            if o.healed:
                lines.append(f"- **{o.node}**: {o.healed}")
        return "\n\n## Retries and recoveries\n\n" + "\n".join(lines) if lines else ""

    def policies_markdown(self) -> str:
        """The policy packs that checked the run, the rules off here and why, each violation."""
        found = [(o.node, [v.as_dict() for v in o.violations]) for o in self.outcomes]
        text = policy_markdown(self.policies, found)
        return "\n\n## Policies\n\n" + text if text else ""

    def migrations_markdown(self) -> str:
        """A preview's pending migrations: files, findings, statements."""
        if self.migrations is None:
            return ""
        return "\n\n## Migrations\n\n" + migrations_markdown(self.migrations)

    def approvals_markdown(self) -> str:
        """Each approval decision: what, by whom where known, through what, when, why."""
        if not self.approvals:
            return ""
        lines = [f"- {markdown_cell(d.line())}" for d in self.approvals]
        return "\n\n## Approval\n\n" + "\n".join(lines)

    def changes_markdown(self) -> str:
        """Per resource, what a preview would change and which properties (values masked); what
        drift found, with the values stored and found."""
        if self.operation is Operation.DRIFT:
            return self.drift_markdown()
        rows = []
        for o in self.outcomes:
            for r in o.resources:
                props = ", ".join(
                    f"`{p.name}`" + (" (forces replacement)" if p.forces_replacement else "")
                    for p in r.properties
                )
                rows.append(f"| {o.node} | {r.change} | `{r.type}` | {r.name} | {props or '—'} |")
        if not rows:
            return ""
        head = "| stack | change | type | resource | properties |\n|---|---|---|---|---|\n"
        return "\n\n## Changes\n\n" + head + "\n".join(rows)

    def drift_markdown(self) -> str:
        """Per drifted resource, each property that moved: the value stored, the value found."""
        rows: list[str] = []
        for o in self.outcomes:
            for r in o.resources:
                found = r.drift_dict()
                props = found["properties"] or [{"name": "—", "stored": "", "found": ""}]
                if found["drift"] == "deleted":
                    props = [{"name": "—", "stored": "(in state)", "found": "(gone)"}]
                rows.extend(
                    f"| {o.node} | {found['drift']} | `{r.type}` | {markdown_cell(r.name)} "
                    f"| `{markdown_cell(p['name'])}` | {markdown_cell(drift_value(p['stored']))} "
                    f"| {markdown_cell(drift_value(p['found']))} |"
                    for p in props
                )
        if not rows:
            return ""
        head = (
            "| stack | drift | type | resource | property | stored | found |\n"
            "|---|---|---|---|---|---|---|\n"
        )
        return "\n\n## Drift\n\n" + head + "\n".join(rows)


def resources_dict(outcome: NodeOutcome) -> list[dict[str, Any]]:
    """An outcome's resources as data: what a preview would change, or what drift found."""
    if isinstance(outcome.result, DriftResult):
        return [r.drift_dict() for r in outcome.result.resources]
    return [r.as_dict() for r in outcome.resources]


def flow_run_going(flow_run_id: str) -> bool:
    """Whether a flow run is not over yet (asked of Prefect; True when it cannot tell)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(UUID(flow_run_id)).state
    except Exception:
        return True  # cannot tell: never treat a live run as gone
    return state is not None and not state.is_final()


def current_flow_run_id() -> str | None:
    """This flow run's id (None outside a flow run)."""
    from prefect.runtime import flow_run

    run_id = flow_run.id
    return str(run_id) if run_id else None


def flow_run_url() -> str | None:
    """This flow run's page in the Prefect UI (None outside a flow run or without a UI)."""
    from prefect.runtime import flow_run
    from prefect.utilities.urls import url_for

    # prefect.runtime's ui_url points at /flow-runs/..., a page this UI version does not have
    run_id = flow_run.id
    return url_for("flow-run", obj_id=run_id) if run_id else None


_EVENTS = {  # the statuses that emit an event about the stack, and its name
    Status.UPDATED: "stack.updated",
    Status.FAILED: "stack.failed",
    Status.DRIFT: "drift.detected",
    Status.PREVIEWED: "stack.previewed",
    Status.DESTROYED: "stack.destroyed",
}


def publish(summary: PipelineSummary) -> None:
    """The summary as a markdown artifact and one Prefect event per stack."""
    create_markdown_artifact(
        markdown=summary.markdown(),
        key=f"{summary.operation}-{summary.environment}",
        description=f"stackflow {summary.operation} of {summary.environment}"
        + (f" ({summary.target})" if summary.target != "AWS" else ""),
    )
    for o in summary.outcomes:
        event = _EVENTS.get(o.status)
        if event is None:
            continue
        emit_event(
            event=f"stackflow.{event}",
            resource={
                "prefect.resource.id": f"stackflow.stack.{summary.environment}.{o.node}",
                "prefect.resource.name": f"{summary.environment}/{o.node}",
                "stackflow.environment": summary.environment,
                "stackflow.stack": o.node,
            },
            payload={
                "operation": o.operation.value,
                "changes": o.changes.as_dict(),
                "target": summary.target,
                "commit": summary.commit,
                "note": o.note,
                "retries": list(o.retries),
                **(
                    {"resources": resources_dict(o)}
                    if o.operation in (Operation.PREVIEW, Operation.DRIFT)
                    else {}
                ),
            },
        )
