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
# What scripts/git-hooks/post-receive (or a forge's webhook relay) sends when a branch moves or
# is deleted: a nudge to ask the repository now, never trusted for the commit itself.
PUSH_EVENT = "stackflow.git.pushed"
DELETED_EVENT = "stackflow.git.deleted"
BRANCH_LABEL = "stackflow.branch"
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
    "gitops": "flows/poll.py:poll_branches",
}


@dataclass(frozen=True)
class EventTrigger:
    """An automation that runs a deployment when an event's resource has these labels.

    Args:
        events: the event names it expects.
        match: resource labels and the values (a trailing `*` matches a prefix) they must have.
        within_s: 0 fires on every event; more fires on the first and then stays quiet that long.
    """

    events: tuple[str, ...]
    match: dict[str, str | list[str]]
    within_s: int
    about: str  # what names it in the UI: "when ... names environment dev"


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment as data: `<flow>/<name>`, its fixed parameters, its scope and cron."""

    flow: str
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    cron: str | None = None
    description: str = ""
    tags: tuple[str, ...] = ("stackflow",)
    triggers: tuple[EventTrigger, ...] = ()  # events that also run it
    interval_s: int | None = None  # runs every so many seconds (GitOps: ask the branches)

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
    followed: dict[str, int] = {}  # environment -> its [git] interval_s
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
                    (_drift_trigger(env),) if what == "preview" else (),
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
            followed[env] = git.interval_s
            specs.append(_sync_spec(env, git.branch, tags))
    if followed:
        specs.append(_poll_spec(followed))
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
                description=f"GitOps: every {team_git.interval_s}s, and at once when a branch "
                f"matching {patterns} is pushed or deleted ({PUSH_EVENT}), an ephemeral "
                "environment per such branch (pr/123 -> pr-123), deployed at each new commit "
                "and destroyed when the branch is gone",
                tags=kind_tags,
                triggers=(
                    EventTrigger(
                        (PUSH_EVENT, DELETED_EVENT),
                        {BRANCH_LABEL: [_prefix_pattern(p) for p in team_git.review_branches]},
                        0,
                        f"a branch matching {patterns} moves",
                    ),
                ),
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


def _drift_trigger(environment: str) -> EventTrigger:
    return EventTrigger(
        (DRIFT_EVENT,),
        {"stackflow.environment": environment},
        TRIGGER_WITHIN_S,
        f"{DRIFT_EVENT} names environment {environment}",
    )


def _sync_spec(environment: str, branch: str, tags: tuple[str, ...]) -> DeploymentSpec:
    """sync/<env>: no schedule of its own (gitops/poll asks for every environment at once), and
    at once on every push of its branch."""
    return DeploymentSpec(
        "sync",
        environment,
        {"environment": environment},
        description=f"GitOps: deploy the commit {environment}'s branch {branch!r} points at, if "
        f"it is not deployed yet; started at once by {PUSH_EVENT} naming {branch!r}, and by "
        "gitops/poll when it finds the branch moved",
        tags=tags,
        triggers=(
            EventTrigger((PUSH_EVENT,), {BRANCH_LABEL: branch}, 0, f"branch {branch!r} moves"),
        ),
    )


def _poll_spec(followed: dict[str, int]) -> DeploymentSpec:
    """gitops/poll: one run per interval for every environment that follows a branch (the
    shortest of their intervals), starting sync/<env> only where the branch moved."""
    interval = min(followed.values())
    return DeploymentSpec(
        "gitops",
        "poll",
        {"environments": sorted(followed)},
        description=f"GitOps fallback: every {interval}s, ask each followed repository once "
        f"(git ls-remote) and start sync/<env> for the environments whose branch moved "
        f"({len(followed)} followed); an unchanged branch starts no run",
        interval_s=interval,
    )


def _prefix_pattern(pattern: str) -> str:
    """An event match for a branch pattern: Prefect matches a literal or a prefix ending in `*`,
    so a pattern's literal start and `*` (review/branches then applies the whole pattern)."""
    cut = min((i for i, c in enumerate(pattern) if c in "*?["), default=len(pattern))
    return pattern if cut == len(pattern) else pattern[:cut] + "*"
