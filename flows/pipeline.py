"""The pipeline flows: deploy, preview, refresh, destroy and drift over the stack graph.

Each flow validates its parameters into a `PipelineRequest` and runs `run_pipeline`: one walk over
`GRAPH` (flows.walk), or for `up` of a protected environment the approval gate's rounds
(flows.gate), and ends with a summary (flows.summary): a Prefect markdown artifact, Prefect events,
and the returned dict the CLI prints. What the environment deploys comes from its file in the
project (`environments/<name>.toml`), whoever runs the flow; that machine's variables add only
what belongs to it (state folder, credentials). Parameters carry no secrets.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from prefect import Flow, flow
from pydantic import Field

from flows.approval import end_state
from flows.operation import EnvironmentName, PipelineRequest, run_pipeline
from flows.summary import (
    ApprovalExpired,
    ApprovalRejected,
    DriftDetected,
    PipelineError,
    PipelineFailed,
    PipelineSummary,
    PolicyRefused,
    RunInterrupted,
    RunStopped,
)
from flows.trail import refused
from flows.walk import build_context, retry_delays
from stackflow.engine import Operation
from stackflow.errors import SettingsError, StackflowError
from stackflow.graphs import project_graph

__all__ = [  # what callers import from here, wherever it is defined
    "FLOWS",
    "ApprovalExpired",
    "ApprovalRejected",
    "DriftDetected",
    "PipelineError",
    "PipelineFailed",
    "PipelineRequest",
    "PipelineSummary",
    "PolicyRefused",
    "RunInterrupted",
    "RunStopped",
    "build_context",
    "deploy",
    "destroy",
    "drift",
    "preview",
    "refresh",
    "retry_delays",
    "run_pipeline",
]

# The UI renders an enum as a pick list; its members come from the graph the served project
# declares (its stackflow.toml's `graph`), declared once.
StackName = Enum("StackName", {name: name for name in project_graph().order()}, type=str)  # type: ignore[misc]

Cloud = Annotated[
    Literal["local", "aws"] | None,
    Field(
        description="Where to deploy: leave it empty for what the environment's file says; "
        "'local' rehearses on the local cloud (moto on loopback)."
    ),
]
Stacks = Annotated[
    list[StackName] | None,
    Field(
        description="Run only these stacks; what they need from upstream is read from state. Empty: all."
    ),
]


def _run(request: PipelineRequest) -> Any:
    """The flow's result: the summary, or a Cancelled state of its own for a run that stopped on
    purpose (rejected, expired, interrupted) with the summary as its data."""
    try:
        return run_pipeline(request).as_dict()
    except RunStopped as exc:
        return end_state(exc.state_name, str(exc), exc.summary)
    except StackflowError as exc:
        refused(request.environment, request.cloud, request.operation.value, exc)
        raise


def _request(
    environment: str,
    cloud: str | None,
    operation: Operation,
    stacks: list[Any] | None,
    **kw: bool,
) -> PipelineRequest:
    if stacks is not None and not [s for s in stacks if str(getattr(s, "value", s)).strip()]:
        # "not given" means every stack; an explicit empty list is a mistake, never "all"
        raise SettingsError(
            "stacks: an empty list selects nothing; leave the parameter out (null) to run every "
            f"stack, or name some of: {', '.join(project_graph().order())}"
        )
    return PipelineRequest(
        environment=environment,
        cloud=cloud,
        operation=operation,
        stacks=[getattr(s, "value", s) for s in stacks or []],
        **kw,
    )


@flow(name="deploy", flow_run_name="deploy-{environment}", log_prints=False, persist_result=False)
def deploy(
    environment: EnvironmentName = "dev",
    stacks: Stacks = None,
    force: bool = False,
    cloud: Cloud = None,
    recreate: bool = False,
) -> Any:
    """Bring an environment up: networking, database, migrations, app, verification.

    Args:
        environment: the environment to deploy (dev, staging, prod, pr-123).
        stacks: only these stacks; the rest are read from state.
        cloud: where to deploy; empty: what the environment's file says.
        force: update stacks even when nothing changed since their last successful update.
        recreate: deploy anew the stacks whose state is gone from the backend although they
            were deployed (refused otherwise); nothing left in the cloud is adopted.
    """
    return _run(_request(environment, cloud, Operation.UP, stacks, force=force, recreate=recreate))


@flow(name="preview", flow_run_name="preview-{environment}", log_prints=False, persist_result=False)
def preview(
    environment: EnvironmentName = "dev", stacks: Stacks = None, cloud: Cloud = None
) -> Any:
    """Show what a deploy would change, stack by stack, changing nothing.

    Args:
        environment: the environment to preview.
        stacks: only these stacks.
    """
    return _run(_request(environment, cloud, Operation.PREVIEW, stacks))


@flow(name="refresh", flow_run_name="refresh-{environment}", log_prints=False, persist_result=False)
def refresh(
    environment: EnvironmentName = "dev", stacks: Stacks = None, cloud: Cloud = None
) -> Any:
    """Update each stack's state from what exists in the cloud.

    Args:
        environment: the environment to refresh.
        stacks: only these stacks.
    """
    return _run(_request(environment, cloud, Operation.REFRESH, stacks))


@flow(name="drift", flow_run_name="drift-{environment}", log_prints=False, persist_result=False)
def drift(environment: EnvironmentName = "dev", stacks: Stacks = None, cloud: Cloud = None) -> Any:
    """Check every stack for drift (a refresh preview); drift fails the run and emits an event.

    Args:
        environment: the environment to check.
        stacks: only these stacks.
    """
    return _run(_request(environment, cloud, Operation.DRIFT, stacks))


@flow(name="destroy", flow_run_name="destroy-{environment}", log_prints=False, persist_result=False)
def destroy(
    environment: EnvironmentName = "dev",
    stacks: Stacks = None,
    confirm: Annotated[bool, Field(description="Required to destroy a prod environment.")] = False,
    cloud: Cloud = None,
) -> Any:
    """Destroy an environment's stacks in reverse dependency order.

    Args:
        environment: the environment to destroy.
        stacks: only these stacks.
        confirm: must be true to destroy a protected (prod) environment.
    """
    return _run(_request(environment, cloud, Operation.DESTROY, stacks, confirm=confirm))


FLOWS: dict[str, Flow[..., Any]] = {
    "up": deploy,
    "preview": preview,
    "refresh": refresh,
    "drift": drift,
    "destroy": destroy,
}
