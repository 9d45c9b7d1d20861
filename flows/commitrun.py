"""A commit's own `up`, run by the sync (`flows.sync`): a child process of this worker's
interpreter in the exported commit (`python <checkout>/flows/run.py up --env <env> --approve-in-ui
--json`), tagged so the sync finds its flow run, with this worker's machine variables; how its
exit code and summary read as an attempt's result; and the exported commits kept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from prefect.logging import get_run_logger

from stackflow import exits
from stackflow.gitops import sync
from stackflow.settings import Settings

GITOPS_TAG = "gitops"
KEEP_CHECKOUTS = 8  # commits whose files stay in the state folder (the newest)


def _child_environment(settings: Settings, checkout: Path) -> dict[str, str]:
    """What the commit's `up` runs with: this worker's environment (its machine variables, as
    the worker's own flow runs get them), the checkout as the project, this worker's state
    folder, and the Prefect API this run talks to."""
    from prefect.settings import get_current_settings

    api = get_current_settings().api
    env = dict(os.environ)
    env |= {
        "STACKFLOW_PROJECT_DIR": str(checkout),
        "STACKFLOW_STATE_DIR": str(settings.state_dir),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if api.url:
        env["PREFECT_API_URL"] = str(api.url)
    if api.auth_string is not None:
        env["PREFECT_API_AUTH_STRING"] = api.auth_string.get_secret_value()
    if settings.localcloud.dir is None:
        env["STACKFLOW_LOCALCLOUD_DIR"] = str(settings.localcloud_root)
    return env


def run_commit(
    settings: Settings, checkout: Path, head: str, recreate: bool = False
) -> tuple[int, dict[str, Any]]:
    """Run the commit's own `up` of the environment (`--recreate` when asked); its exit code and
    its summary."""
    logger = get_run_logger()
    command = [
        sys.executable,
        str(checkout / "flows" / "run.py"),
        "up",
        "--env",
        settings.environment,
        "--json",
        "--approve-in-ui",
        "--heartbeat",
        "60",
        "--tag",
        GITOPS_TAG,
        "--tag",
        f"gitops-env:{settings.environment}",
        "--tag",
        f"commit:{head[:12]}",
        *(["--recreate"] if recreate else []),
    ]
    with subprocess.Popen(
        command,
        cwd=checkout,
        env=_child_environment(settings, checkout),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stderr is not None and child.stdout is not None
        said = ""  # the last `error:` line: why, when the run printed no JSON saying it
        for line in child.stderr:  # its progress lines (already masked by stackflow)
            if line.strip():
                logger.info("%s", line.rstrip())
            if line.startswith("error:"):
                said = line.removeprefix("error:").strip()
        out = child.stdout.read()
        code = child.wait()
    try:
        summary = json.loads(out) if out.strip() else {}
    except ValueError:
        summary = {}
    summary = summary if isinstance(summary, dict) else {}
    if code != exits.OK and said and not summary.get("error"):
        summary["error"] = said
    return code, summary


def result_of(code: int, summary: dict[str, Any]) -> tuple[sync.Result, str]:
    """How an attempt of a commit ended, from its `up`'s exit code and summary, and why."""
    if code == exits.OK:
        return sync.Result.SUCCEEDED, "deployed"
    # a run refused before it started prints only the CLI's outcome: its `error`, on one line
    error = " ".join(str(summary.get("error") or "").split())
    why = str(summary.get("failed") or summary.get("stopped") or error or f"exit code {code}")
    decisions = [a.get("decision") for a in summary.get("approvals") or []]
    if code == exits.REJECTED and decisions and decisions[-1] == "expired":
        return sync.Result.EXPIRED, why
    if code == exits.REJECTED and decisions and decisions[-1] == "superseded":
        return sync.Result.SUPERSEDED, why
    if code == exits.REJECTED:
        return sync.Result.REJECTED, why
    if code == exits.USAGE:
        return sync.Result.REFUSED, why
    if code in (exits.INTERRUPTED, exits.TERMINATED):
        return sync.Result.CANCELLED, why
    return sync.Result.FAILED, why


def prune_checkouts(settings: Settings, keep: Path) -> None:
    """Remove the exported commits but the newest `KEEP_CHECKOUTS` (`keep` among them)."""
    folder = keep.parent
    old = sorted(
        (p for p in folder.iterdir() if p.is_dir() and p != keep),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )[KEEP_CHECKOUTS - 1 :]
    for path in old:
        shutil.rmtree(path, ignore_errors=True)
