"""stackflow's deployments as data (no Prefect objects): which exist, their parameters, scope,
schedule and triggers. `deployments/serve.py` serves them in one process and
`deployments/prefect_yaml.py` writes the same set as prefect.yaml for work pools."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
# Review, ephemeral and cleanup runs go to workers of their own (their own host or OS user, their
# own variables, a backend that never holds prod's state): docs/operations/trust-model.md
REVIEW_POOL = "stackflow-review"
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
    def review(self) -> bool:
        """It runs on the review workers: review branches' code, ephemeral environments and their
        cleanup, kept away from the backend and secrets of the protected environments."""
        return self.flow == "review" or any(t.endswith(f":{EPHEMERAL}") for t in self.tags)

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
