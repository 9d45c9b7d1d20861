"""Register and serve stackflow's deployments in one process: `python deployments/serve.py`.

Per environment the project declares (environments/<name>.toml): deploy, preview and destroy (on
demand from the UI or `prefect deployment run`) and drift on a cron (nightly by default), each
acting on that environment only; preview also runs, through a Prefect automation, when a
`stackflow.drift.detected` event names its environment. For the ephemeral kind (pr-<n>, ...):
deploy, preview and destroy that accept names of that kind only, and the hourly cleanup of
expired ones. Runs execute in this process; for work pools and workers, deployments/prefect.yaml
declares the same set (`--write-prefect-yaml` regenerates it from this module).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events import DeploymentEventTrigger

from deployments.specs import (  # noqa: F401  (what callers import from here)
    DEFAULT_CLEANUP_CRON,
    DEFAULT_DRIFT_CRON,
    DRIFT_EVENT,
    PREFECT_YAML,
    TIMEZONE,
    TRIGGER_WITHIN_S,
    DeploymentSpec,
    deployment_specs,
)


def build_deployments(
    environments: list[str] | None = None,
    drift_cron: str = DEFAULT_DRIFT_CRON,
    cleanup_cron: str = DEFAULT_CLEANUP_CRON,
) -> list[RunnerDeployment]:
    """The RunnerDeployments to serve; the environment parameter of an environment's own
    deployments is frozen, so the UI refuses a run that asks for another.

    Raises:
        ValueError: an invalid or undeclared environment name, or an invalid cron string.
    """
    from prefect.schedules import Cron, Interval
    from prefect.types.entrypoint import EntrypointType
    from prefect.utilities.annotations import freeze

    from flows.cleanup import cleanup_expired
    from flows.pipeline import deploy, destroy, drift, preview
    from flows.review import review_branches
    from flows.sync import sync_environment

    flows = {
        f.name: f
        for f in (
            deploy,
            preview,
            destroy,
            drift,
            cleanup_expired,
            sync_environment,
            review_branches,
        )
    }

    def schedules(spec: DeploymentSpec) -> list[Any] | None:
        if spec.cron:
            return [Cron(spec.cron, timezone=TIMEZONE)]
        if spec.interval_s:
            return [Interval(timedelta(seconds=spec.interval_s))]
        return None

    # to_deployment is dispatched: called from sync code it returns the deployment itself
    return [
        cast(
            "RunnerDeployment",
            flows[spec.flow].to_deployment(
                name=spec.name,
                parameters={k: freeze(v) for k, v in spec.parameters.items()},
                tags=list(spec.tags),
                description=spec.description,
                schedules=schedules(spec),
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
        help="environment to serve (repeatable; default: every environment the project declares)",
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
    parser.add_argument(
        "--write-prefect-yaml",
        action="store_true",
        help="regenerate deployments/prefect.yaml (work pools) from the same data, then exit",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.write_prefect_yaml:
        from deployments.prefect_yaml import prefect_yaml

        PREFECT_YAML.write_text(prefect_yaml(deployment_specs(None)))
        print(f"wrote {PREFECT_YAML}")
        return 0
    from stackflow import arenas
    from stackflow.crashes import send_heartbeats

    send_heartbeats()  # runs this process starts inherit it: the zombie automation spares them
    arenas.limit()
    for name, value in arenas.environment().items():  # and the runs it starts: two arenas
        os.environ.setdefault(name, value)
    from prefect import serve

    try:
        deployments = build_deployments(args.environments, args.drift_cron, args.cleanup_cron)
    except ValueError as exc:  # a bad environment name or cron: say which, serve nothing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    serve(*deployments, limit=args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
