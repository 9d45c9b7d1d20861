"""gitops/poll: the fallback that finds a moved branch when no push event said so, in one flow
run per interval for every environment that follows a branch (never one run per environment).

Each followed repository is asked once (`git ls-remote`), and each environment's branch commit is
weighed against its sync record as the sync itself would (`stackflow.gitops.sync.decide`: up to
date, held, waiting out a back-off, reconciling). Only an environment with something to deploy
gets a `sync/<env>` run, and not when one is already scheduled or about to start (a push event's,
say): an unchanged branch costs no run of its own. The sync run asks the branch again itself:
what the poll saw is a reason to look, never the commit it deploys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prefect import flow
from prefect.exceptions import ObjectNotFound
from prefect.logging import get_run_logger

from flows.sync import attempt_live, token_of
from stackflow.environment_records import read as read_environment
from stackflow.environment_records import records_of
from stackflow.errors import StackflowError
from stackflow.gitops import sync
from stackflow.gitops.git import Git, GitError
from stackflow.records import Records
from stackflow.settings import Settings, get_settings

SYNC_FLOW = "sync"


class PollFailed(StackflowError):
    """Some followed environments could not be asked about (each named, with why)."""


@dataclass(frozen=True)
class Followed:
    """An environment that follows a branch, with what its sync reads."""

    settings: Settings
    repository: str
    branch: str

    @property
    def remote(self) -> tuple[str, str | None]:
        """Environments that share this are answered by one `git ls-remote`."""
        return self.repository, self.settings.git.credentials_block


def _followed(environments: list[str], problems: dict[str, str]) -> dict[str, Followed]:
    found = {}
    for env in dict.fromkeys(environments):
        try:
            settings = get_settings(env, strict=False)
        except StackflowError as exc:
            problems[env] = str(exc)
            continue
        git = settings.git
        if git.branch and git.repository:
            found[env] = Followed(settings, git.repository, git.branch)
        else:
            problems[env] = "its file names no branch and repository under [git] any more"
    return found


def _heads(followed: dict[str, Followed], problems: dict[str, str]) -> dict[str, str]:
    """environment -> the commit its branch points at, asking each repository once."""
    remotes: dict[tuple[str, str | None], dict[str, str] | str] = {}
    heads = {}
    for env, one in followed.items():
        if one.remote not in remotes:
            repository, block = one.remote
            try:
                remotes[one.remote] = Git(repository, token_of(block)).branches()
            except GitError as exc:
                remotes[one.remote] = str(exc)
        answer = remotes[one.remote]
        if isinstance(answer, str):
            problems[env] = answer
        elif one.branch not in answer:
            problems[env] = f"{one.repository} has no branch {one.branch!r}"
        else:
            heads[env] = answer[one.branch]
    return heads


def _about_to_start() -> set[str]:
    """Environments with a sync run scheduled or pending: it asks the branch itself soon."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[SYNC_FLOW])),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType.SCHEDULED, StateType.PENDING])
                )
            ),
        )
    return {str((r.parameters or {}).get("environment")) for r in runs}


def _start_sync(environment: str) -> str:
    """Start the environment's sync/<env> deployment now; the run's id."""
    from prefect.deployments import run_deployment

    run: Any = run_deployment(
        f"{SYNC_FLOW}/{environment}", timeout=0, as_subflow=False, tags=["gitops-poll"]
    )
    return str(run.id)


@flow(name="gitops", flow_run_name="poll-branches", log_prints=False, persist_result=False)
def poll_branches(environments: list[str]) -> dict[str, Any]:
    """Start sync/<env> for each environment whose branch moved (or whose failed commit's
    back-off is over); an environment with nothing to deploy gets no run.

    Args:
        environments: the environments that follow a branch (the deployment lists them).

    Raises:
        PollFailed: an environment's settings or repository could not be read (the others
            were still polled).
    """
    logger = get_run_logger()
    problems: dict[str, str] = {}
    followed = _followed(environments, problems)
    heads = _heads(followed, problems)
    pending = _about_to_start() if heads else set()
    stores: dict[tuple[str, str], Records] = {}
    started: dict[str, dict[str, str]] = {}
    quiet: dict[str, int] = {}
    for env, head in heads.items():
        settings = followed[env].settings
        place = (settings.resolved_records_url, settings.project)
        records = stores.get(place) or stores.setdefault(place, records_of(settings))
        decision = sync.decide(
            sync.read(records, env),
            head,
            deployed=read_environment(records, env) is not None,
            live=attempt_live,
        )
        if decision.next is not sync.Next.DEPLOY or env in pending:
            reason = decision.next.value if env not in pending else "about to start"
            quiet[reason] = quiet.get(reason, 0) + 1
            continue
        try:
            run = _start_sync(env)
        except ObjectNotFound:  # not served (any more): say which, start the others
            problems[env] = f"sync/{env} is not a deployment on this Prefect server: serve it"
            continue
        started[env] = {"commit": head, "why": decision.why, "run": run}
        logger.info("%s: %s: started sync/%s (%s)", env, decision.why, env, run)
    for env, why in problems.items():
        logger.error("%s: %s", env, why)
    if problems:
        raise PollFailed("; ".join(f"{env}: {why}" for env, why in sorted(problems.items())))
    logger.info("started %d sync run(s); nothing to do: %s", len(started), quiet or "none")
    return {"started": started, "quiet": quiet}
