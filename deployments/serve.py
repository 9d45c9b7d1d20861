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
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events import DeploymentEventTrigger

ROOT = Path(__file__).resolve().parents[1]
PREFECT_YAML = ROOT / "deployments" / "prefect.yaml"
DEFAULT_DRIFT_CRON = "0 3 * * *"
DEFAULT_CLEANUP_CRON = "0 * * * *"
TIMEZONE = "UTC"
DRIFT_EVENT = "stackflow.drift.detected"
# One drift run emits one event per drifted stack; the automation fires on the first and then
# stays quiet for this long, so one drift run starts one preview.
TRIGGER_WITHIN_S = 600
EPHEMERAL = "ephemeral"
POOL = "stackflow"
ENTRYPOINTS = {
    "deploy": "flows/pipeline.py:deploy",
    "preview": "flows/pipeline.py:preview",
    "destroy": "flows/pipeline.py:destroy",
    "drift": "flows/pipeline.py:drift",
    "cleanup-expired": "flows/cleanup.py:cleanup_expired",
    "sync": "flows/sync.py:sync_environment",
    "review": "flows/review.py:review_branches",
}


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment as data: `<flow>/<name>`, its fixed parameters, its scope and cron."""

    flow: str
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    cron: str | None = None
    description: str = ""
    tags: tuple[str, ...] = ("stackflow",)
    triggered_by: str | None = None  # an event that also runs it, when it names this environment
    interval_s: int | None = None  # runs every so many seconds (GitOps: ask the branch)

    @property
    def full_name(self) -> str:
        return f"{self.flow}/{self.name}"

    @property
    def frozen(self) -> bool:
        """Its environment parameter is fixed (the UI refuses a run that changes it)."""
        return "environment" in self.parameters


def deployment_specs(
    environments: list[str] | None = None,
    drift_cron: str = DEFAULT_DRIFT_CRON,
    cleanup_cron: str = DEFAULT_CLEANUP_CRON,
    ephemeral: bool = True,
    project_dir: Path | None = None,
) -> list[DeploymentSpec]:
    """The deployments, as data (no Prefect objects): `<flow>/<environment>` for each of
    `environments` (default: every one the project declares), `<flow>/ephemeral` for the
    ephemeral kind, and `cleanup-expired/hourly`.

    Raises:
        ValueError: a cron string or environment name that is not accepted, or an environment
            the project does not declare (the message names the file to add).
    """
    from prefect._internal.schemas.validators import validate_cron_string

    from flows.scope import KIND_TAG, SCOPE_TAG
    from stackflow.config.sources import environment_file
    from stackflow.settings import (
        UnknownEnvironment,
        declared_environments,
        get_settings,
        is_ephemeral_name,
        project_git,
        validate_environment_name,
    )

    root = project_dir or Path(os.environ.get("STACKFLOW_PROJECT_DIR") or ROOT)
    for cron in (drift_cron, cleanup_cron):
        validate_cron_string(cron)
    chosen = environments if environments is not None else declared_environments(root)
    specs = []
    for env in dict.fromkeys(chosen):  # keep order, drop repeats
        validate_environment_name(env)
        if is_ephemeral_name(env):
            raise UnknownEnvironment(
                f"{env!r} is an ephemeral name: ephemeral environments are served by "
                "deploy/ephemeral, preview/ephemeral and destroy/ephemeral"
            )
        environment_file(root, env)  # UnknownEnvironment: names the file to add
        tags = ("stackflow", f"{SCOPE_TAG}{env}")
        params = {"environment": env}
        for what in ("deploy", "preview", "destroy"):
            specs.append(
                DeploymentSpec(
                    what,
                    env,
                    params,
                    None,
                    f"{what} the {env} environment, and only it (on demand"
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
        git = get_settings(env, project_dir=root, strict=False).git
        if git.branch:
            specs.append(
                DeploymentSpec(
                    "sync",
                    env,
                    params,
                    description=f"GitOps: every {git.interval_s}s, deploy the commit {env}'s "
                    f"branch {git.branch!r} points at, if it is not deployed yet",
                    tags=tags,
                    interval_s=git.interval_s,
                )
            )
    kind_tags = ("stackflow", f"{KIND_TAG}{EPHEMERAL}")
    if ephemeral:
        for what in ("deploy", "preview", "destroy"):
            specs.append(
                DeploymentSpec(
                    what,
                    EPHEMERAL,
                    {},
                    None,
                    f"{what} an ephemeral environment (pr-<n>, eph-<name>, preview-<name>; "
                    "never dev, staging or prod): give its name as `environment`",
                    kind_tags,
                )
            )
    team_git = project_git(root) if ephemeral else None
    if team_git is not None and team_git.review_branches:
        patterns = ", ".join(team_git.review_branches)
        specs.append(
            DeploymentSpec(
                "review",
                "branches",
                {},
                description=f"GitOps: every {team_git.interval_s}s, an ephemeral environment "
                f"per branch matching {patterns} (pr/123 -> pr-123), deployed at each new commit "
                "and destroyed when the branch is gone",
                tags=kind_tags,
                interval_s=team_git.interval_s,
            )
        )
    specs.append(
        DeploymentSpec(
            "cleanup-expired",
            "hourly",
            {},
            cleanup_cron,
            "destroy ephemeral environments (pr-123, ...) whose TTL has passed since their "
            "first deploy began",
            kind_tags,
        )
    )
    return specs


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
    from stackflow.crashes import send_heartbeats

    send_heartbeats()  # runs this process starts inherit it: the zombie automation spares them
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
