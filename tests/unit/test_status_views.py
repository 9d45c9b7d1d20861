"""`status` from records written the way runs and syncs write them (tests/statusdata.py): what
it answers per environment in text, JSON, the Prefect pages and the Prometheus file, and that the
shipped alert rules and dashboard read only metrics the file has."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from prometheus_client.parser import text_string_to_metric_families

from stackflow.records import Records
from stackflow.status.metrics import prometheus
from stackflow.status.pages import environment_page, overview, page_key
from stackflow.status.report import EnvironmentStatus, collect
from stackflow.status.text import environment_lines
from tests.statusdata import DEPLOYED, REASON, REFUSED, STACKS, UI, build_records

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def records(tmp_path: Path) -> Records:
    return build_records(tmp_path)


def _found(records: Records) -> dict[str, EnvironmentStatus]:
    return {e.environment: e for e in collect(records, STACKS, lambda _run: False)}


def test_status_says_why_an_environment_is_behind_its_branch_in_every_view(
    records: Records,
) -> None:
    """The refused head and its reason, the deployed commit, health, drift and migrations: in
    the terminal, the JSON, the environment's page and the overview."""
    staging = _found(records)["staging-a"]
    assert staging.commit == DEPLOYED
    branch = staging.branch
    assert branch is not None and branch["head"] == REFUSED and branch["behind"] is True
    assert branch["refused"] == {"commit": REFUSED, "result": "refused", "reason": REASON}
    assert branch["behind_s"] >= 0 and branch["behind_since"] is not None
    assert staging.condition == "drifted"
    assert "its last drift check found drift in app" in staging.why
    assert f"behind main: commit {REFUSED[:12]} refused: {REASON}" in staging.why
    assert staging.health is not None and staging.health["answer"] == 200
    assert staging.url == "http://staging.example"
    assert staging.drift is not None and staging.drift["found"] == ["app"]
    assert staging.drift["checked"] == STACKS  # the check's stacks, all of them
    assert [r["operation"] for r in staging.runs] == ["drift", "up"]  # newest first

    text = "\n".join(environment_lines(staging))
    assert f"staging-a  drifted  (staging, local cloud, deployed {DEPLOYED[:12]})" in text
    assert REASON in text
    assert f"branch: main at {REFUSED[:12]}, behind for" in text
    assert "app: http://staging.example  healthy (200," in text
    assert "drift: checked" in text and "drift in app" in text
    assert "migrations: version 2" in text

    shown = json.loads(json.dumps(staging.as_dict()))
    assert shown["branch"]["refused"]["reason"] == REASON
    assert shown["gitops"]["attempted"]["message"] == REASON
    assert shown["health"]["healthy"] is True

    page = environment_page(staging, UI)
    assert page.startswith("# `staging-a`: drifted")
    assert REASON in page and f"`{DEPLOYED[:12]}`" in page and f"`{REFUSED[:12]}`" in page
    assert "| app | `url` | http://staging.example |" in page
    assert "| app | `db_password` | [secret] |" in page
    assert f"[run-1]({UI}/runs/flow-run/run-1)" in page
    listing = overview(list(_found(records).values()), UI)
    row = next(line for line in listing.splitlines() if line.startswith("| [staging-a]"))
    assert f"({UI}/artifacts/key/{page_key('staging-a')})" in row and REASON in row


def test_an_ephemeral_environment_shows_its_expiry_failure_and_health(records: Records) -> None:
    pr = _found(records)["pr-7"]
    assert pr.condition == "failed" and pr.expires_at is not None
    assert pr.expires_at == pytest.approx(pr.created + 2 * 3600)
    assert "app: up failed: ECS said no" in pr.why
    assert "the app was not healthy at its last check" in pr.why
    app = pr.stacks[2]
    assert app.last_failure is not None and app.last_failure["note"] == "ECS said no"
    assert app.last_success_at is not None and app.last_success_at <= app.last_failure["at"]
    text = "\n".join(environment_lines(pr))
    assert "expires:" in text and "(in 1h 59m)" in text
    assert "NOT healthy (503," in text
    assert "expires" in environment_page(pr) and "ECS said no" in environment_page(pr)


def _samples(text: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def test_the_prometheus_file_carries_what_alerts_need(records: Records) -> None:
    now = time.time()
    text = prometheus(list(_found(records).values()), now=now)
    samples = _samples(text)  # parsed as Prometheus parses it: the format is valid
    [refused] = samples["stackflow_gitops_commit_refused"]
    assert refused.labels["environment"] == "staging-a" and refused.value == 1
    assert refused.labels["reason"] == REASON and refused.labels["commit"] == REFUSED[:12]
    [behind] = samples["stackflow_gitops_behind_since_timestamp_seconds"]
    assert behind.value <= now
    health = {s.labels["environment"]: s.value for s in samples["stackflow_app_healthy"]}
    assert health == {"staging-a": 1, "pr-7": 0}
    [expiry] = samples["stackflow_environment_expires_timestamp_seconds"]
    assert expiry.labels == {"environment": "pr-7"} and expiry.value > now
    drift = {s.labels["stack"]: s.value for s in samples["stackflow_drift_detected"]}
    assert drift == {"networking": 0, "database": 0, "app": 1}
    [since] = samples["stackflow_drift_since_timestamp_seconds"]
    assert since.labels == {"environment": "staging-a", "stack": "app"}
    failures = samples["stackflow_stack_last_failure_timestamp_seconds"]
    assert [(s.labels["environment"], s.labels["stack"]) for s in failures] == [("pr-7", "app")]
    successes = samples["stackflow_stack_last_success_timestamp_seconds"]
    assert len(successes) == 6 and all(s.value <= now for s in successes)
    assert samples["stackflow_status_timestamp_seconds"][0].value == pytest.approx(now)


def _rule_metrics() -> set[str]:
    rules = yaml.safe_load((ROOT / "monitoring/prometheus/stackflow-alerts.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    dashboard = json.loads((ROOT / "monitoring/grafana/stackflow-dashboard.json").read_text())
    exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    return {m for e in exprs for m in re.findall(r"\bstackflow_[a-z_]+\b", e)}


def test_the_alert_rules_and_dashboard_read_only_metrics_the_file_has(records: Records) -> None:
    written = {
        f.name for f in text_string_to_metric_families(prometheus(list(_found(records).values())))
    }
    used = _rule_metrics()
    assert used and used <= written, used - written
    documented = (ROOT / "docs/reference/metrics.md").read_text()
    assert all(f"`{name}`" in documented for name in written), [
        n for n in written if f"`{n}`" not in documented
    ]
