"""The shipped alert rules load, and fire as their own unit tests say, in Prometheus's promtool;
and a Prometheus file `status` wrote from real records passes `promtool check metrics`.

promtool is built once from the Go module proxy (`go install`, a pinned version) into stackflow's
cache, under a lock, never into the repository. On a machine without Go the rules are checked in
Python instead: each is YAML of the shape Prometheus loads, and each reads metrics the file has
(tests/unit/test_status_views.py checks the names)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from stackflow.pulumi_cli import cache_root

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]
ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "prometheus"
PROMETHEUS_MODULE = "github.com/prometheus/prometheus"
PROMETHEUS_VERSION = "v0.316.0"  # Prometheus 3.x's Go module version (v0.<minor>.<patch>)


def _build_promtool() -> Path | None:
    """promtool from the cache, built there first if missing; None when there is no Go."""
    go = shutil.which("go")
    if go is None:
        return None
    folder = cache_root() / "promtool" / PROMETHEUS_VERSION
    binary = folder / "promtool"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two workers building it at once wait for one build
        if not binary.exists():
            done = subprocess.run(
                [go, "install", f"{PROMETHEUS_MODULE}/cmd/promtool@{PROMETHEUS_VERSION}"],
                env={**os.environ, "GOBIN": str(folder / "building"), "GOFLAGS": "-mod=mod"},
                capture_output=True,
                text=True,
                timeout=3000,
                check=False,
            )
            assert done.returncode == 0, f"go install promtool failed:\n{done.stderr[-3000:]}"
            (folder / "building" / "promtool").replace(binary)
    return binary


@pytest.fixture(scope="module")
def promtool() -> Iterator[Path | None]:
    yield _build_promtool()


def _run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=RULES, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_alert_rules_load_and_fire_as_their_tests_say(promtool: Path | None) -> None:
    rules = yaml.safe_load((RULES / "stackflow-alerts.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert alerts and all({"alert", "expr", "labels", "annotations"} <= set(r) for r in alerts)
    tested = yaml.safe_load((RULES / "stackflow-alerts.test.yml").read_text())
    names = {t["alertname"] for case in tested["tests"] for t in case["alert_rule_test"]}
    assert names == {r["alert"] for r in alerts}  # every rule has a test of its own
    if promtool is None:
        return  # no Go on this machine: the Python checks above and in the unit tier stand
    checked = _run(promtool, "check", "rules", "stackflow-alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts)} rules found" in checked.stdout, checked.stdout
    tests = _run(promtool, "test", "rules", "stackflow-alerts.test.yml")
    assert tests.returncode == 0, tests.stdout + tests.stderr


def test_the_status_file_passes_promtool_check_metrics(
    promtool: Path | None, tmp_path: Path
) -> None:
    """A file written from records as runs and a refusing sync write them (the unit tier's
    fixture), through `status --prometheus`'s own writer."""
    from prometheus_client.parser import text_string_to_metric_families

    from stackflow.status.metrics import prometheus
    from stackflow.status.report import collect
    from tests.statusdata import STACKS, build_records

    text = prometheus(collect(build_records(tmp_path), STACKS, lambda _run: False))
    families = {f.name for f in text_string_to_metric_families(text)}
    assert "stackflow_gitops_commit_refused" in families
    if promtool is None:
        return
    done = subprocess.run(
        [str(promtool), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
