"""What a sync tells the repository: the note of the commit it deployed, refused or failed
(`stackflow.gitops.notes`), and the links that note and the `stackflow.gitops.synced` event
carry (the run's page, a review environment's URL) for a forge's commit status."""

from __future__ import annotations

from typing import Any

from prefect.logging import get_run_logger

from flows.summary import flow_run_url
from stackflow.gitops.git import Git, GitError
from stackflow.gitops.notes import NoteLine, write_note
from stackflow.gitops.sync import Result
from stackflow.settings import Settings

# every way an attempt ends but `running` and `cancelled` (tried again at the next sync)
NOTED = frozenset(set(Result) - {Result.RUNNING, Result.CANCELLED})


def review_url(summary: dict[str, Any]) -> str | None:
    """The URL a deploy published (the first stack output named `url`), if any."""
    for stack in summary.get("stacks") or []:
        url = (stack.get("outputs") or {}).get("url")
        if isinstance(url, str) and url:
            return url
    return None


def run_link(outcome: dict[str, Any]) -> str | None:
    """The page of the run that carried the commit: its deploy's, else this sync's."""
    deployed = (outcome.get("summary") or {}).get("ui_url")
    return str(deployed) if deployed else flow_run_url()


def note_outcome(
    settings: Settings, git: Git, outcome: dict[str, Any], run: str | None, url: str | None
) -> None:
    """Write the outcome of a sync into the commit's git note, with its run's page and a review
    environment's URL (`run_link`, `review_url`), and push it (see `stackflow.gitops.notes`). A
    note that cannot be pushed is a warning, never a failed sync."""
    result = str(outcome.get("result") or "")
    if not settings.git.notes or result not in NOTED:
        return
    line = NoteLine(
        settings.environment,
        "deployed" if result == "succeeded" else result,
        run=run,
        url=url,
        message=str(outcome.get("message") or ""),
    )
    try:
        write_note(git, settings.state.git_mirrors, str(outcome["commit"]), line)
    except (GitError, OSError) as exc:  # the mirror's lock or folder, or git itself
        get_run_logger().warning(
            "%s: the note of commit %s was not pushed to the repository (%s); a worker that "
            "may not push sets STACKFLOW_GIT_NOTES=false",
            settings.environment,
            str(outcome["commit"])[:12],
            exc,
        )
