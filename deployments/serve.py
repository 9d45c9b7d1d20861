"""Register and serve stackflow's deployments in one process: `python deployments/serve.py`.

Per environment: deploy, preview and destroy (run on demand from the UI or `prefect deployment
run`) and drift on a cron (nightly by default); preview also runs, through a Prefect automation,
when a `stackflow.drift.detected` event names its environment; plus one hourly cleanup of expired
ephemeral environments. Runs execute in this process's machine with its STACKFLOW_* settings; for work pools
use deployments/prefect.yaml instead.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events import DeploymentEventTrigger

DEFAULT_DRIFT_CRON = "0 3 * * *"
DEFAULT_CLEANUP_CRON = "0 * * * *"
TIMEZONE = "UTC"
DRIFT_EVENT = "stackflow.drift.detected"
# One drift run emits one event per drifted stack; the automation fires on the first and then
# stays quiet for this long, so one drift run starts one preview.
TRIGGER_WITHIN_S = 600


@dataclass(frozen=True)
class DeploymentSpec:
    """One served deployment as data: `<flow>/<name>`, its fixed parameters and its cron (or none).

    deployments/prefect.yaml declares the same set for work pools; a test keeps the two in step.
    """

    flow: str
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    cron: str | None = None
    description: str = ""
    tags: tuple[str, ...] = ("stackflow",)
    triggered_by: str | None = None  # an event that also runs it, when it names this environment

    @property
    def full_name(self) -> str:
        return f"{self.flow}/{self.name}"


def deployment_specs(
    environments: list[str],
    drift_cron: str = DEFAULT_DRIFT_CRON,
    cleanup_cron: str = DEFAULT_CLEANUP_CRON,
) -> list[DeploymentSpec]:
    """The deployments to serve, as data (no Prefect objects): names are `<flow>/<environment>`.

    Raises:
        ValueError: an invalid environment name or cron string (the message names it).
    """
    from prefect._internal.schemas.validators import validate_cron_string

    from stackflow.settings import validate_environment_name

    for cron in (drift_cron, cleanup_cron):
        validate_cron_string(cron)
    specs = []
    for env in dict.fromkeys(environments):  # keep order, drop repeats
        validate_environment_name(env)
        tags = ("stackflow", f"env:{env}")
        params = {"environment": env}
        for what in ("deploy", "preview", "destroy"):
            specs.append(
                DeploymentSpec(
                    what,
                    env,
                    params,
                    None,
                    f"{what} the {env} environment (on demand"
                    + (f"; and on {DRIFT_EVENT})" if what == "preview" else ")"),
                    tags,
                    DRIFT_EVENT if what == "preview" else None,
                )
            )
        specs.append(
            DeploymentSpec(
                "drift",
                env,
                params,
                drift_cron,
                f"drift check of {env} ({drift_cron} {TIMEZONE}): drift fails the run and "
                "emits a stackflow.drift.detected event",
                tags,
            )
        )
    specs.append(
        DeploymentSpec(
            "cleanup-expired",
            "hourly",
            {},
            cleanup_cron,
            "destroy ephemeral environments (pr-123, ...) whose TTL has passed",
        )
    )
    return specs


def build_deployments(
    environments: list[str],
    drift_cron: str = DEFAULT_DRIFT_CRON,
    cleanup_cron: str = DEFAULT_CLEANUP_CRON,
) -> list[RunnerDeployment]:
    """The RunnerDeployments to serve; names are `<flow>/<environment>`.

    Entrypoints are module paths (`flows.pipeline.deploy`), so serving works from any folder.

    Raises:
        ValueError: an invalid environment name or cron string.
    """
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    from flows.cleanup import cleanup_expired
    from flows.pipeline import deploy, destroy, drift, preview

    flows = {f.name: f for f in (deploy, preview, destroy, drift, cleanup_expired)}
    # to_deployment is dispatched: called from sync code it returns the deployment itself
    return [
        cast(
            "RunnerDeployment",
            flows[spec.flow].to_deployment(
                name=spec.name,
                parameters=dict(spec.parameters),
                tags=list(spec.tags),
                description=spec.description,
                schedules=[Cron(spec.cron, timezone=TIMEZONE)] if spec.cron else None,
                entrypoint_type=EntrypointType.MODULE_PATH,
                triggers=[trigger(spec)] if spec.triggered_by else None,
            ),
        )
        for spec in deployment_specs(environments, drift_cron, cleanup_cron)
    ]


def trigger(spec: DeploymentSpec) -> DeploymentEventTrigger:
    """The automation that runs `spec` when its event names the spec's environment."""
    from prefect.events import DeploymentEventTrigger

    env = spec.parameters["environment"]
    return DeploymentEventTrigger(
        name=f"{spec.full_name} on {spec.triggered_by}",
        description=f"run {spec.full_name} when {spec.triggered_by} names environment {env}",
        expect={spec.triggered_by},
        match={"stackflow.environment": env},
        posture="Reactive",
        threshold=1,
        within=timedelta(seconds=TRIGGER_WITHIN_S),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python deployments/serve.py", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--env",
        "-e",
        action="append",
        dest="environments",
        help="environment to serve (repeatable; default: dev)",
    )
    parser.add_argument(
        "--drift-cron",
        default=DEFAULT_DRIFT_CRON,
        help=f"cron for drift, {TIMEZONE} (default '{DEFAULT_DRIFT_CRON}': nightly at 03:00)",
    )
    parser.add_argument(
        "--cleanup-cron",
        default=DEFAULT_CLEANUP_CRON,
        help=f"cron for cleanup, {TIMEZONE} (default '{DEFAULT_CLEANUP_CRON}': hourly)",
    )
    parser.add_argument("--limit", type=int, default=4, help="flow runs at once (default 4)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from prefect import serve

    try:
        deployments = build_deployments(
            args.environments or ["dev"], args.drift_cron, args.cleanup_cron
        )
    except ValueError as exc:  # a bad environment name or cron: say which, serve nothing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    serve(*deployments, limit=args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
