"""Review environments: each branch matching the project's review patterns ([git] review_branches
in stackflow.toml, e.g. pr/*) gets an ephemeral environment of its own (pr/123 -> pr-123; see
`stackflow.gitops.names`), synced to each new commit of it like any followed environment, and
destroyed when the branch is gone. The environment's URL and outputs (secrets masked) are
published as a `review-<env>` artifact and a `stackflow.review.deployed` event. The TTL still
applies: the hourly cleanup destroys one whose TTL passed, and only a newer commit brings it
back."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.logging import get_run_logger

from flows.cleanup import destroy_environment
from flows.events import emit_environment_event
from flows.gitnotes import review_url
from flows.sync import NotFollowing, SyncFailed, sync_commit, token_of
from stackflow.environment_records import check_review_backend, records_of
from stackflow.environment_records import read as read_environment
from stackflow.errors import StackflowError
from stackflow.gitops import sync
from stackflow.gitops.git import Git
from stackflow.gitops.names import matching, review_environments
from stackflow.settings import get_settings, project_git


class ReviewFailed(StackflowError):
    """Some review environments could not be synced or destroyed (each named, with why)."""


def publish_review(name: str, branch: str, outcome: dict[str, Any]) -> None:
    """A deployed review environment's URL and outputs (as the run showed them: secrets masked)."""
    stacks = (outcome.get("summary") or {}).get("stacks") or []
    outputs = {s["stack"]: s.get("outputs") or {} for s in stacks if s.get("outputs")}
    url = review_url(outcome.get("summary") or {})
    lines = [f"# review environment `{name}`", "", f"- branch `{branch}` at `{outcome['commit']}`"]
    if url:
        lines.append(f"- URL: {url}")
    for stack, values in outputs.items():
        lines += ["", f"**{stack}**", ""] + [f"- `{k}`: `{v}`" for k, v in values.items()]
    create_markdown_artifact(
        markdown="\n".join(lines) + "\n",
        key=f"review-{name}",
        description=f"review environment {name} of {branch}",
    )
    emit_environment_event(
        "stackflow.review.deployed",
        name,
        {"branch": branch, "commit": outcome["commit"], "url": url, "outputs": outputs},
    )


@flow(name="review", flow_run_name="review-branches", log_prints=False, persist_result=False)
def review_branches() -> dict[str, Any]:
    """Sync a review environment per matching branch; destroy those whose branch is gone."""
    from flows.scope import check_scope

    logger = get_run_logger()
    settings = get_settings(strict=False)  # the records, the state folder: this machine's
    team = project_git(settings.project_dir)
    patterns, repository = team.review_branches, team.repository
    if not patterns or not repository:
        raise NotFollowing(
            'no review environments: set review_branches (e.g. ["pr/*"]) and repository under '
            "[git] in stackflow.toml. Nothing was run."
        )
    records = records_of(settings)
    check_review_backend(records)  # before any branch's code could run with this backend
    git = Git(repository, token_of(team.credentials_block))
    heads = git.branches()
    wanted = {b: heads[b] for b in matching(heads, patterns)}
    chosen, clashes = review_environments(wanted)
    failed: dict[str, str] = {}
    for line in clashes:
        logger.error("%s", line)
    done: dict[str, Any] = {}
    for name, branch in chosen.items():
        check_scope(name)  # a review deployment acts on ephemeral names only
        owner = (sync.read(records, name).get("branch")) or branch
        if owner != branch:
            failed[name] = f"{name} is the review environment of {owner!r}, not {branch!r}"
            logger.error("%s: %s", name, failed[name])
            continue
        try:
            env_settings = get_settings(name, strict=False)
            outcome = sync_commit(env_settings, git, branch, wanted[branch], review=True)
        except (SyncFailed, StackflowError) as exc:
            failed[name] = str(exc)
            logger.error("%s: %s", name, exc)
            continue
        done[name] = outcome
        if outcome.get("result") == sync.Result.SUCCEEDED:
            publish_review(name, branch, outcome)
    gone = []
    for key in records.list(sync.PREFIX):
        name = key.removeprefix(sync.PREFIX)
        follows = sync.read(records, name)
        if not follows.get("review") or name in chosen:
            continue
        branch = follows.get("branch", "?")
        record = read_environment(records, name)
        if record is not None:  # destroyed already when its TTL passed: only the record is left
            logger.info("%s: its branch %s is gone: destroying it", name, branch)
            try:
                destroy_environment(name, record.cloud, f"its review branch {branch} is gone")
            except StackflowError as exc:
                failed[name] = f"not destroyed: {exc}"
                logger.error("%s: not destroyed: %s", name, exc)
                continue
        sync.forget(records, name)
        gone.append(name)
        emit_environment_event("stackflow.review.destroyed", name, {"branch": branch})
    if failed or clashes:
        raise ReviewFailed(
            "; ".join([*clashes, *(f"{name}: {why}" for name, why in failed.items())])
        )
    synced = {n: {k: v for k, v in o.items() if k != "summary"} for n, o in done.items()}
    return {"environments": synced, "destroyed": gone}
