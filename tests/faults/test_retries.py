"""Retries: a transient fault is retried exactly as often as it happens; a permanent one never."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.client.schemas.objects import TaskRun
from prefect.client.schemas.sorting import TaskRunSort

from stackflow.engine.simulated import inject_fault, read_journal
from tests.faults.helpers import FaultEnv, statuses

pytestmark = pytest.mark.faults


def task_runs(state: Any) -> dict[str, TaskRun]:
    """The flow run's task runs by name (e.g. up-database), read from the Prefect server."""
    flow_run_id: UUID = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            sort=TaskRunSort.EXPECTED_START_TIME_ASC,
            limit=100,
        )
    return {run.name: run for run in runs}


def ups_started(fault_env: FaultEnv, stack: str) -> int:
    return sum(
        1
        for j in read_journal(fault_env.state_dir)
        if j["stack"] == f"dev/{stack}" and j["op"] == "up" and j["phase"] == "start"
    )


def test_transient_fault_is_retried_exactly_n_times_then_succeeds_simulated(
    fault_env: FaultEnv,
) -> None:
    """Two injected transient faults (a simulated lock conflict) on the database stack: three
    engine calls, the third succeeds, and the deploy completes."""
    from flows.pipeline import deploy

    inject_fault(fault_env.state_dir, "database", transient=2, operations=("up",))
    state = deploy(environment="dev", return_state=True)
    assert state.is_completed(), state
    summary = state.result()
    assert summary["engine_calls"].count("up:database") == 3, summary["engine_calls"]
    assert summary["engine_calls"].count("up:networking") == 1
    assert statuses(summary)["database"] == "updated"
    assert task_runs(state)["up-database"].run_count == 3
    assert ups_started(fault_env, "database") == 1  # only the successful call ran the operation
    faults = json.loads((fault_env.state_dir / "simulated" / "faults.json").read_text())
    assert faults["database"]["transient"] == 0  # both injected faults were consumed


def test_permanent_fault_is_not_retried_simulated(fault_env: FaultEnv) -> None:
    """A permanent fault (a simulated program error) on the app stack: exactly one engine call,
    the deploy fails naming the stack, no retry is announced."""
    from flows.pipeline import PipelineFailed, deploy

    inject_fault(fault_env.state_dir, "app", permanent=True, operations=("up",))
    state = deploy(environment="dev", return_state=True)
    assert state.is_failed(), state
    with pytest.raises(PipelineFailed, match=r"stack 'dev/app'.*injected permanent fault"):
        state.result()
    runs = task_runs(state)
    assert runs["up-app"].run_count == 1, runs["up-app"]
    assert runs["up-app"].state is not None and runs["up-app"].state.is_failed()
    assert runs["up-database"].run_count == 1
    assert ups_started(fault_env, "app") == 0


def test_transient_fault_beyond_the_retry_budget_fails_naming_the_stack_simulated(
    fault_env: FaultEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More transient faults than STACKFLOW_STACK_RETRIES allows: retries stop at the budget
    (1 retry: two engine calls) and the deploy fails naming the stack and the conflict."""
    from flows.pipeline import PipelineFailed, deploy

    monkeypatch.setenv("STACKFLOW_STACK_RETRIES", "1")
    inject_fault(fault_env.state_dir, "networking", transient=5, operations=("up",))
    state = deploy(environment="dev", return_state=True)
    with pytest.raises(PipelineFailed, match=r"stack 'dev/networking'.*Conflict"):
        state.result()
    assert task_runs(state)["up-networking"].run_count == 2
    faults = json.loads((fault_env.state_dir / "simulated" / "faults.json").read_text())
    assert faults["networking"]["transient"] == 3
