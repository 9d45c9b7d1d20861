"""The shipped alert rules load, and fire as their own unit tests say, in Prometheus's promtool;
and a Prometheus file `status` wrote from real records passes `promtool check metrics`.

promtool comes from Debian's prometheus package (`scripts/setup.sh --dev` takes the one binary
out of it into stackflow's cache; one on PATH serves too). The rules are also read in Python: each
is YAML of the shape Prometheus loads, each has a test of its own, and each reads metrics the file
has (tests/unit/test_status_views.py checks the names)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from stackflow.pulumi_cli import cache_root

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "prometheus"


def _promtool() -> Path:
    """promtool: on PATH, or the one setup.sh --dev took out of Debian's package."""
    found = shutil.which("promtool") or str(cache_root() / "promtool" / "promtool")
    assert os.access(found, os.X_OK), "no promtool: run `bash scripts/setup.sh --dev`"
    return Path(found)


@pytest.fixture(scope="module")
def promtool() -> Path:
    return _promtool()


def _run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=RULES, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_alert_rules_load_and_fire_as_their_tests_say(promtool: Path) -> None:
    rules = yaml.safe_load((RULES / "stackflow-alerts.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert alerts and all({"alert", "expr", "labels", "annotations"} <= set(r) for r in alerts)
    tested = yaml.safe_load((RULES / "stackflow-alerts.test.yml").read_text())
    names = {t["alertname"] for case in tested["tests"] for t in case["alert_rule_test"]}
    assert names == {r["alert"] for r in alerts}  # every rule has a test of its own
    checked = _run(promtool, "check", "rules", "stackflow-alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts)} rules found" in checked.stdout, checked.stdout
    tests = _run(promtool, "test", "rules", "stackflow-alerts.test.yml")
    assert tests.returncode == 0, tests.stdout + tests.stderr


def test_the_status_file_passes_promtool_check_metrics(promtool: Path, tmp_path: Path) -> None:
    """A file written from records as runs and a refusing sync write them (the unit tier's
    fixture), through `status --prometheus`'s own writer."""
    from prometheus_client.parser import text_string_to_metric_families

    from stackflow.status.metrics import prometheus
    from stackflow.status.report import collect
    from tests.statusdata import STACKS, build_records

    text = prometheus(collect(build_records(tmp_path), STACKS, lambda _run: False))
    families = {f.name for f in text_string_to_metric_families(text)}
    assert "stackflow_gitops_commit_refused" in families
    done = subprocess.run(
        [str(promtool), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
