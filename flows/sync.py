"""GitOps flows: `sync` keeps an environment at the commit its branch points at, `review` gives
each review branch (pr/*, ...) an ephemeral environment of its own and destroys it when the branch
is gone.

A sync asks the remote for the branch's commit (`git ls-remote`: no clone, no engine call). When
that commit is not deployed yet (see `stackflow.gitops.sync` for the whole rule: up to date,
back-off after a failure, held after a rejection, reconciling while a run carries it), it exports
the commit's files (refusing, by name, one that holds links out of it, submodules, too much or not
the files a run needs), makes the checks no commit may skip in this worker's own code
(`flows.handoff`: scope, locked dependencies, its environment file, protection), and runs that
commit's own `up` (its code, programs, environment file and migrations) with this worker's
interpreter: `python <checkout>/flows/run.py up --env <env> --approve-in-ui --json`, a flow run of
its own in Prefect (tagged gitops and commit:<id>), through the same graph, gate and approvals.
A newer commit supersedes an older one still running (cancelled) or waiting for approval
(rejected as superseded), so a run never deploys a commit that is no longer the branch's. A run
that exits 0 without the summary the worker expects is recorded as failed, never as deployed.
"""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.client.schemas.objects import State
from prefect.logging import get_run_logger
from prefect.states import Failed

from flows.commitrun import GITOPS_TAG, prune_checkouts, result_of, run_commit
from flows.events import emit_environment_event
from flows.gitnotes import note_outcome, review_url, run_link
from flows.handoff import REQUIRED_FILES, Handoff, check_handoff, verify_summary
from flows.pages import publish_status
from flows.summary import current_flow_run_id, flow_run_going
from flows.trail import sync_reported
from stackflow.audit.who import note_author
from stackflow.environment_records import read as read_environment
from stackflow.environment_records import records_of
from stackflow.errors import SettingsError, StackflowError
from stackflow.gitops import sync
from stackflow.gitops.git import Git, GitError, export_commit, masked_repository
from stackflow.graphs import graph_of
from stackflow.settings import Settings, get_settings


class SyncFailed(StackflowError):
    """The commit a sync ran did not deploy (its run failed, or it was refused)."""


class NotFollowing(SettingsError):
    """The environment's file names no branch (or no repository) to follow."""


def following(settings: Settings) -> tuple[str, str]:
    """(repository, branch) the environment follows.

    Raises:
        NotFollowing: naming the file and the keys to set.
    """
    git = settings.git
    file = settings.source.environment_file or f"environments/{settings.environment}.toml"
    if not git.branch or not git.repository:
        missing = " and ".join(
            k for k, v in (("branch", git.branch), ("repository", git.repository)) if not v
        )
        raise NotFollowing(
            f"environment {settings.environment!r} follows no branch: set {missing} under [git] "
            f"in {file} (repository may also be set once in stackflow.toml). Nothing was run."
        )
    return git.repository, git.branch


def token_of(name: str | None) -> str | None:
    """The HTTPS token in the Prefect Secret block `name` (None: git's own credentials)."""
    if not name:
        return None
    from prefect.blocks.system import Secret

    block: Any = Secret.load(name)  # dispatched: called from sync code it is the block itself
    value = block.get()
    return str(value) if value else None


def attempt_live(attempt: dict[str, Any]) -> bool:
    """Whether the sync run carrying `attempt` still goes (asked of Prefect)."""
    run = attempt.get("sync_run")
    return bool(run) and flow_run_going(str(run))


def supersede(environment: str, head: str) -> list[str]:
    """End the runs of `environment` a sync started for other commits: a run waiting for approval
    is rejected (nothing applied), a running one is cancelled (its operations end cleanly).
    Returns what was done, one line each."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        FlowRunFilterTags,
    )
    from prefect.client.schemas.objects import State, StateType

    from flows.approval import supersede_plan

    done: list[str] = []
    going = [StateType.PENDING, StateType.RUNNING, StateType.PAUSED, StateType.SCHEDULED]
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                tags=FlowRunFilterTags(all_=[GITOPS_TAG, f"gitops-env:{environment}"]),
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=going)),
            )
        )
        for run in runs:
            if f"commit:{head[:12]}" in (run.tags or []):
                continue
            older = next((t[7:] for t in run.tags or [] if t.startswith("commit:")), "?")
            why = f"superseded by commit {head[:12]}"
            if run.state is not None and run.state.is_paused():
                supersede_plan(str(run.id), head, why, timeout_s=10)
                done.append(f"rejected the plan of {older} waiting for approval ({why})")
            else:
                client.set_flow_run_state(
                    run.id, State(type=StateType.CANCELLING, message=why), force=True
                )
                done.append(f"cancelled the run of {older} ({why})")
    return done


def sync_commit(
    settings: Settings,
    git: Git,
    branch: str,
    head: str,
    review: bool = False,
    recreate: bool = False,
) -> dict[str, Any]:
    """Bring `settings.environment` to commit `head` of `branch` (see the module). Returns what
    the sync did (`next`, `why`, `result`, the deploy's summary when one ran). `recreate`: run
    the commit's `up --recreate` now, unless a run carries it already (a person's answer to a
    state-loss refusal, which holds the commit).

    Raises:
        SyncFailed: the commit's run failed or was refused (recorded; retried with back-off).
    """
    logger = get_run_logger()
    env = settings.environment
    records = records_of(settings)
    follows = {"repository": masked_repository(git.repository), "branch": branch, "review": review}
    sync.note_seen(records, env, head, follows)
    record = sync.read(records, env)
    deployed = read_environment(records, env) is not None
    decision = sync.decide(record, head, deployed=deployed, live=attempt_live)
    if recreate and decision.next is not sync.Next.RECONCILING:
        decision = sync.Decision(sync.Next.DEPLOY, "asked to recreate", decision.supersede)
    outcome: dict[str, Any] = {
        "environment": env,
        "branch": branch,
        "commit": head,
        "next": decision.next.value,
        "why": decision.why,
    }
    if decision.next is not sync.Next.DEPLOY:
        logger.info("%s: %s (%s): nothing to run", env, decision.next.value, decision.why)
        return outcome
    attempt = {"sync_run": current_flow_run_id(), "host": socket.gethostname()}
    if not sync.begin(records, env, head, attempt, record):
        logger.info("%s: another sync took %s first: nothing to run", env, head[:12])
        return outcome | {"next": sync.Next.RECONCILING.value, "why": "another sync took it"}
    if decision.supersede is not None:  # this sync carries the environment now: end the older
        for line in supersede(env, head):
            logger.warning("%s: %s", env, line)
    logger.info("%s: deploying commit %s of %s", env, head[:12], branch)
    handoff = Handoff(settings, records, settings.state.checkout(head), head)
    try:
        handoff.checkout = export_commit(
            git,
            settings.state.git_mirrors,
            head,
            handoff.checkout,
            required=REQUIRED_FILES,
            max_files=settings.git.max_export_files,
            max_bytes=settings.git.max_export_mb * 2**20,
        )
        note_author(git, settings.state.git_mirrors, handoff.checkout, head)
        check_handoff(handoff)  # the worker's own checks, before the commit's code runs
    except SettingsError as exc:  # CommitRefused, locks, its file, protection, scope
        sync.finish(records, env, head, sync.Result.REFUSED, str(exc), settings.git.interval_s)
        _report(
            settings,
            git,
            review,
            outcome | {"result": sync.Result.REFUSED.value, "message": str(exc)},
        )
        raise SyncFailed(f"{env}: {exc}") from None
    except (GitError, OSError) as exc:
        why = f"commit {head[:12]} could not be fetched or exported: {exc}"
        sync.finish(records, env, head, sync.Result.FAILED, why, settings.git.interval_s)
        raise SyncFailed(f"{env}: {why}") from None
    checkout = handoff.checkout
    started = time.monotonic()
    code, summary = run_commit(settings, checkout, head, recreate)
    result, message = result_of(code, summary)
    if result is sync.Result.SUCCEEDED:
        short = verify_summary(handoff, code, summary)
        if short:  # never "deployed" on the commit's word alone
            result, message = sync.Result.FAILED, f"its run exited 0, but {short}"
    ran = {"deploy_run": summary.get("ui_url"), "duration_s": round(time.monotonic() - started, 1)}
    saved = sync.finish(records, env, head, result, message, settings.git.interval_s, ran)
    prune_checkouts(settings, checkout)
    outcome |= {"result": result.value, "message": message, "summary": summary}
    if (saved.get("attempted") or {}).get("commit") != head:  # a newer commit took its place
        outcome["result"] = sync.Result.SUPERSEDED.value
        _report(settings, git, review, outcome)
        logger.info("%s: commit %s was superseded: %s", env, head[:12], message)
        return outcome
    _report(settings, git, review, outcome)
    if result is sync.Result.SUCCEEDED:
        return outcome
    retry = saved.get("retry_at")
    then = (
        f"; tried again in {float(retry) - time.time():.0f}s"
        if result is sync.Result.FAILED and retry
        else ""
    )
    raise SyncFailed(f"{env}: commit {head[:12]} {result.value}: {message}{then}")


def _report(settings: Settings, git: Git, review: bool, outcome: dict[str, Any]) -> None:
    """The sync's outcome as a `sync-<env>` artifact, a `stackflow.gitops.synced` event (with
    the links a forge's commit status needs) and the commit's git note."""
    env = settings.environment
    summary = outcome.get("summary") or {}
    stacks = summary.get("stacks") or []
    lines = [
        f"# sync `{env}`: {outcome.get('result', outcome['next'])}",
        "",
        f"- branch: `{outcome['branch']}` at `{outcome['commit']}`",
        f"- {outcome.get('message') or outcome['why']}",
    ]
    if summary.get("ui_url"):
        lines.append(f"- the deploy's run: {summary['ui_url']}")
    if stacks:
        lines += ["", "| stack | status | note |", "|---|---|---|"]
        lines += [f"| {s['stack']} | {s['status']} | {s.get('note') or ''} |" for s in stacks]
    create_markdown_artifact(
        markdown="\n".join(lines) + "\n",
        key=f"sync-{env}",
        description=f"stackflow sync of {env} to {outcome['commit'][:12]}",
    )
    with contextlib.suppress(StackflowError):  # the environment's page says what the sync did
        publish_status(records_of(settings), graph_of(settings).stacks, env)
    run, url = run_link(outcome), review_url(summary) if review else None
    emit_environment_event(
        "stackflow.gitops.synced",
        env,
        {
            "branch": outcome["branch"],
            "commit": outcome["commit"],
            "result": outcome.get("result"),
            "message": str(outcome.get("message") or "")[:1000],
            "stacks": {s["stack"]: s["status"] for s in stacks},
            "run": run,
            "url": url,
        },
    )
    sync_reported(settings, outcome)
    note_outcome(settings, git, outcome, run, url)


@flow(name="sync", flow_run_name="sync-{environment}", log_prints=False, persist_result=False)
def sync_environment(environment: str, recreate: bool = False) -> dict[str, Any] | State:
    """Deploy the commit the environment's branch points at, if it is not deployed yet. A
    commit that did not deploy ends the run Failed with its reason (recorded), no traceback.

    Args:
        environment: an environment whose file names a branch under [git].
        recreate: deploy it now with `up --recreate`: its stacks whose state is gone from the
            backend are deployed anew (a sync's `up` is refused over lost state without it).
    """
    from flows.scope import check_scope

    check_scope(environment)
    settings = get_settings(environment, strict=False)
    repository, branch = following(settings)
    git = Git(repository, token_of(settings.git.credentials_block))
    head = git.head_of(branch)
    try:
        return sync_commit(settings, git, branch, head, recreate=recreate)
    except SyncFailed as exc:  # an expected outcome, recorded: its reason, not a traceback
        get_run_logger().error("%s", exc)
        return Failed(message=str(exc))
