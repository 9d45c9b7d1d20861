"""What a run leaves for `status` and the Prefect UI's environments pages: the run in the
environment's history (with each stack's failure, drift and outputs, masked), then the overview
artifact `stackflow-status` and the environment's own page, `environment-<name>` (one key per
environment, so the UI keeps each version: its history)."""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_markdown_artifact

from flows.summary import PipelineSummary, flow_run_going
from stackflow.outcome import Status
from stackflow.status.history import RunEntry, RunResult, record_history


def run_result(summary: PipelineSummary) -> RunResult:
    """How a run ended: succeeded, failed, stopped, or drift (a drift check that found some)."""
    if summary.failed:
        return RunResult.FAILED
    if summary.stopped:
        return RunResult.STOPPED
    if any(o.status is Status.DRIFT for o in summary.outcomes):
        return RunResult.DRIFT
    return RunResult.SUCCEEDED


def record_run_history(
    records: Any, summary: PipelineSummary, run: str | None, stacks: list[str]
) -> None:
    """The run at the head of its environment's history (see `stackflow.status.history`)."""
    entry = RunEntry(
        run=run,
        operation=summary.operation,
        result=run_result(summary),
        commit=summary.commit,
        url=summary.ui_url,
        message=summary.failed or summary.stopped or "",
        duration_s=summary.duration_s,
    )
    record_history(records, summary.environment, entry, summary.outcomes, stacks)


def _ui_url() -> str | None:
    from prefect.settings import get_current_settings

    return get_current_settings().ui_url


def publish_status(records: Any, stacks: list[str], environment: str | None = None) -> None:
    """Every recorded environment's status as the `stackflow-status` artifact, and, for
    `environment`, its own page (each run refreshes both, so the UI shows what `status`
    prints).

    Args:
        stacks: the graph's stacks, in order (the rows of each environment).
    """
    from stackflow.status.pages import (
        OVERVIEW_KEY,
        environment_page,
        gone_page,
        headline,
        overview,
        page_key,
    )
    from stackflow.status.report import collect

    found = collect(records, stacks, flow_run_going)
    ui = _ui_url()
    create_markdown_artifact(
        markdown=overview(found, ui),
        key=OVERVIEW_KEY,
        description=f"stackflow: {len(found)} environment(s)",
    )
    if environment is None:
        return
    mine = next((e for e in found if e.environment == environment), None)
    create_markdown_artifact(
        markdown=environment_page(mine, ui) if mine is not None else gone_page(environment),
        key=page_key(environment),
        description=headline(mine) if mine is not None else f"`{environment}`: destroyed",
    )
