"""The pipeline flows end to end: simulated engine (the Pulumi engine cannot run here), a real
Prefect server, and a real MariaDB that the simulated database stack is bound to."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from stackflow.engine.simulated import inject_fault, read_journal
from tests.integration.conftest import url_of  # noqa: F401  (tests/faults imports it from here)

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def journal(state_dir: Path, op: str | None = None) -> list[dict[str, Any]]:
    return [j for j in read_journal(state_dir) if op is None or j["op"] == op]


def span(entries: list[dict[str, Any]], stack: str) -> tuple[float, float]:
    starts = [j["t"] for j in entries if j["stack"].endswith("/" + stack) and j["phase"] == "start"]
    ends = [j["t"] for j in entries if j["stack"].endswith("/" + stack) and j["phase"] == "end"]
    return min(starts), max(ends)


def statuses(summary: dict[str, Any]) -> dict[str, str]:
    return {s["stack"]: s["status"] for s in summary["stacks"]}


def test_deploy_runs_in_order_migrates_and_passes_outputs(pipeline_env: dict[str, Any]) -> None:
    from flows.pipeline import deploy

    summary = deploy(environment="dev")
    assert statuses(summary) == {
        "networking": "updated",
        "database": "updated",
        "migrate": "migrated",
        "app": "updated",
        "verify": "skipped",
    }
    assert summary["simulated"] is True
    entries = journal(pipeline_env["state_dir"], "up")
    assert span(entries, "networking")[1] <= span(entries, "database")[0]
    assert span(entries, "database")[1] <= span(entries, "app")[0]
    # the migration really ran on MariaDB
    db = pipeline_env["db"]
    with (
        pymysql.connect(
            host=db.host,
            port=db.port,
            user=db.user,
            password=db.password.get_secret_value(),
            database=db.database,
        ) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SHOW TABLES LIKE 'hello_pulumi'")
        assert cur.fetchone() is not None
    # outputs travelled downstream: the app was built with the database's host
    outputs = {s["stack"]: s["outputs"] for s in summary["stacks"]}
    assert outputs["database"]["host"] == db.host
    assert outputs["database"]["password"] == "[secret]"
    assert (
        outputs["app"]["url"].startswith("http://") and "elb.amazonaws.com" in outputs["app"]["url"]
    )


def test_second_deploy_makes_no_engine_calls(pipeline_env: dict[str, Any]) -> None:
    from flows.pipeline import deploy

    deploy(environment="dev")
    before = len(journal(pipeline_env["state_dir"]))
    again = deploy(environment="dev")
    assert again["engine_calls"] == []
    assert (
        statuses(again)["networking"]
        == statuses(again)["database"]
        == statuses(again)["app"]
        == "unchanged"
    )
    assert statuses(again)["migrate"] == "unchanged"
    assert len(journal(pipeline_env["state_dir"])) == before
    forced = deploy(environment="dev", stacks=["networking"], force=True)
    assert forced["engine_calls"] == ["up:networking"]


def test_targeting_reads_upstream_from_state(
    pipeline_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.pipeline import deploy

    deploy(environment="dev")
    monkeypatch.setenv("STACKFLOW_APP_DESIRED_COUNT", "3")
    summary = deploy(environment="dev", stacks=["app"])
    assert summary["engine_calls"] == ["up:app"]
    assert [s["stack"] for s in summary["stacks"]] == ["app"]
    assert statuses(summary)["app"] == "updated"


def test_destroy_runs_in_reverse_order(pipeline_env: dict[str, Any]) -> None:
    from flows.pipeline import deploy, destroy

    deploy(environment="dev")
    summary = destroy(environment="dev")
    assert {s["stack"]: s["status"] for s in summary["stacks"]} == {
        "app": "destroyed",
        "database": "destroyed",
        "networking": "destroyed",
    }
    entries = journal(pipeline_env["state_dir"], "destroy")
    assert span(entries, "app")[1] <= span(entries, "database")[0]
    assert span(entries, "database")[1] <= span(entries, "networking")[0]


def test_independent_stacks_run_at_the_same_time(
    pipeline_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.pipeline import deploy, refresh

    deploy(environment="dev")
    monkeypatch.setenv("STACKFLOW_SIM_LATENCY_S", '{"*": 3}')
    refresh(environment="dev")
    entries = journal(pipeline_env["state_dir"], "refresh")
    spans = [span(entries, s) for s in ("networking", "database", "app")]
    # refresh does not need upstream outputs: all three stacks overlap in time
    assert max(s for s, _ in spans) < min(e for _, e in spans)


def test_transient_fault_is_retried_then_succeeds(pipeline_env: dict[str, Any]) -> None:
    from flows.pipeline import deploy

    inject_fault(pipeline_env["state_dir"], "database", transient=2, operations=("up",))
    summary = deploy(environment="dev")
    assert summary["engine_calls"].count("up:database") == 3  # two failures, then success
    assert statuses(summary)["database"] == "updated"


def test_permanent_fault_fails_fast_naming_the_stack(pipeline_env: dict[str, Any]) -> None:
    from flows.pipeline import PipelineFailed, deploy

    inject_fault(pipeline_env["state_dir"], "database", permanent=True, operations=("up",))
    started = time.monotonic()
    state = deploy(environment="dev", return_state=True)
    assert state.is_failed()
    with pytest.raises(PipelineFailed, match="database"):
        state.result()
    assert time.monotonic() - started < 30
    ups = [j for j in journal(pipeline_env["state_dir"], "up") if j["phase"] == "start"]
    assert not any(j["stack"].endswith("/app") for j in ups)  # stopped: app never ran


def test_prod_destroy_is_refused_without_confirmation(pipeline_env: dict[str, Any]) -> None:
    from flows.pipeline import destroy
    from stackflow.errors import ConfirmationRequired

    state = destroy(environment="prod", return_state=True)
    with pytest.raises(ConfirmationRequired, match="prod"):
        state.result()
    assert journal(pipeline_env["state_dir"]) == []


def test_preview_of_a_new_environment_uses_marked_placeholders(
    pipeline_env: dict[str, Any],
) -> None:
    from flows.pipeline import preview

    summary = preview(environment="dev")
    by = {s["stack"]: s for s in summary["stacks"]}
    assert by["networking"]["changes"]["create"] > 0
    assert "placeholder outputs of networking" in by["database"]["note"]
    assert "placeholder" in by["app"]["note"]
    assert not Path(pipeline_env["state_dir"], "environments").exists()  # preview changed nothing


def test_drift_fails_the_run_and_names_the_stack(
    pipeline_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.pipeline import DriftDetected, deploy, drift

    deploy(environment="dev")
    assert drift(environment="dev")["engine_calls"].count("drift:networking") == 1
    monkeypatch.setenv("STACKFLOW_SIM_DRIFT", '["networking"]')
    state = drift(environment="dev", return_state=True)
    with pytest.raises(DriftDetected, match="networking"):
        state.result()


def test_two_runs_on_one_environment_never_overlap_on_a_stack(pipeline_env: dict[str, Any]) -> None:
    env = {**os.environ, **pipeline_env["env"], "STACKFLOW_SIM_LATENCY_S": '{"*": 1.0}'}
    cmd = [sys.executable, str(ROOT / "flows" / "run.py"), "up", "--env", "dev", "--force"]
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    # the concurrency limit serialises them before the engine's own lock is ever met
    assert all("currently locked" not in o for o in outs), outs
    entries = journal(pipeline_env["state_dir"], "up")
    for stack in ("networking", "database", "app"):
        intervals = []
        for pid in {j["pid"] for j in entries}:
            mine = [j for j in entries if j["pid"] == pid and j["stack"].endswith("/" + stack)]
            intervals += [(a["t"], b["t"]) for a, b in zip(mine[::2], mine[1::2], strict=True)]
        intervals.sort()
        assert len(intervals) == 2
        assert intervals[0][1] <= intervals[1][0], f"{stack}: two operations overlapped"
