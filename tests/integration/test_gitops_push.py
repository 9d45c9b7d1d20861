"""Push-triggered syncs and the quiet poll, against a real Prefect server, real git and
`deployments/serve.py` in a process of its own (its runs use the session's **local cloud**, moto on
loopback, though the commits here are refused before any engine call).

A bare repository made by the test has the shipped hook (`scripts/git_hooks/post_receive.py`) as
its `post-receive`: a `git push` tells Prefect, the automation serve.py attached to `sync/<env>`
starts the sync at once (the environment's interval is an hour), the refused commit's note
reaches the repository, and the example commit-status automation
(deployments/automations/commit-status.yaml) posts its status to a local listener standing in for
a forge's API. The poll (`gitops/poll`, run here in the test's process) starts nothing
while the branch stays where it was, and exactly one sync when it moved without the hook.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.serving import Served, serving, wait_for_final
from tests.realenv import ROOT, git, unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
HOOK = ROOT / "scripts" / "git_hooks" / "post_receive.py"
RUNNER_POLL_S = 10.0  # PREFECT_RUNNER_POLL_FREQUENCY's default: how often serve.py asks for runs
# Bounds far below the interval that hold on a busy machine (the run's process start is the
# slow part there); the benchmark gives the figures
CREATED_WITHIN_S = 15.0
START_WITHIN_S = RUNNER_POLL_S + 60
INTERVAL_S = 3600  # the environment's poll interval: nothing here may wait for it
STATUS_YAML = ROOT / "deployments" / "automations" / "commit-status.yaml"
PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"


@dataclass
class Forge:
    """A local HTTP endpoint standing in for a forge's commit-status API: what was posted where."""

    received: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, dict(self.headers), json.loads(body or b"{}")))
                self.send_response(201)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def statuses(self, commit: str, timeout: float = 60) -> list[dict[str, Any]]:
        """The statuses posted for `commit` (waiting for the first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [b for path, _, b in self.received if path.endswith(f"/statuses/{commit}")]
            if found:
                return found
            time.sleep(0.2)
        pytest.fail(f"no status for {commit[:12]} within {timeout:.0f}s: {self.received}")


def commit_status_automation(forge: Forge, folder: Path) -> None:
    """The example automation, its block pointing at `forge`, created as its file says."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    block_id = CustomWebhookNotificationBlock(
        name="forge status (test)",
        url=f"{forge.url}/api/v3/repos/team/platform/statuses/{{{{subject}}}}",
        method="POST",
        headers={"Authorization": "Bearer {{token}}", "Content-Type": "application/json"},
        form_data="{{body}}",
        secrets={"token": "test-token"},
    ).save(f"forge-status-{uuid.uuid4().hex[:8]}")
    path = folder / "commit-status.yaml"
    text = STATUS_YAML.read_text()
    assert PLACEHOLDER_ID in text
    path.write_text(text.replace(PLACEHOLDER_ID, str(block_id)))
    prefect = str(Path(sys.executable).with_name("prefect"))
    done = subprocess.run(
        [prefect, "automation", "create", "--from-file", str(path)],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and re.search("Created automation", done.stdout), done


def push(work: Path, message: str) -> tuple[str, str]:
    """Commit a file on main and push it; the commit and what the pusher was told."""
    (work / "NOTES.md").write_text(f"{message}\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    done = subprocess.run(
        ["git", "push", "origin", "main"],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
        env={"HOME": str(work), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return git(work, "rev-parse", "HEAD"), done.stderr  # the hook's lines: "remote: ..."


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any
) -> Iterator[tuple[Served, Path, Path, Forge]]:
    """serve.py for an environment following main of a bare repository whose post-receive is the
    shipped hook (pointed at the session's Prefect server), a working copy to push from, and the
    commit-status automation posting to a stand-in forge."""
    folder = tmp_path_factory.mktemp("push")
    forge = Forge()
    commit_status_automation(forge, folder)
    origin, work = folder / "origin.git", folder / "work"
    git(folder, "init", "-q", "--bare", "-b", "main", str(origin))
    git(folder, "clone", "-q", str(origin), str(work))
    (work / "README.md").write_text("a repository that holds no project: each commit is refused\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "first")
    git(work, "push", "-q", "origin", "main")
    shutil.copy2(HOOK, origin / "hooks" / "post-receive")
    git(origin, "config", "stackflow.prefectApiUrl", prefect_server.api_url)
    environment = unique("dev")
    git_section = {"branch": "main", "repository": str(origin), "interval_s": INTERVAL_S}
    with serving(
        environment, folder, local_cloud, prefect_server, sections={"git": git_section}
    ) as served:
        yield served, origin, work, forge
    forge.server.shutdown()


def sync_runs(environment: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(f"sync/{environment}")
        return list(
            client.read_flow_runs(
                deployment_filter=DeploymentFilter(
                    name=DeploymentFilterName(any_=[deployment.name])
                )
            )
        )


def started_after(environment: str, after: datetime, served: Served, timeout: float) -> Any:
    """The first sync run of `environment` created after `after`, once it has started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [r for r in sync_runs(environment) if r.created and r.created >= after]
        begun = [r for r in runs if r.start_time is not None]
        if begun:
            return min(begun, key=lambda r: r.start_time)
        time.sleep(0.2)
    pytest.fail(f"no sync run of {environment} started within {timeout:.0f}s:\n{served.log_tail()}")


def note_of(origin: Path, commit: str) -> str:
    return git(origin, "log", "--notes=stackflow", "--format=%N", "-1", commit)


def test_a_push_through_the_hook_starts_the_sync_at_once(
    served: tuple[Served, Path, Path, Forge],
) -> None:
    """The interval is an hour: the push event's automation creates the sync run within seconds
    and the runner starts it at its next poll (bench/gitops_polling.py measures how long, on a
    quiet machine); the refused commit's note reaches the bare repository and its status the
    forge."""
    from prefect.client.orchestration import get_client

    serve, origin, work, forge = served
    env = serve.environment
    pushed_at = datetime.now(UTC)
    commit, told = push(work, "pushed through the hook")
    assert "stackflow: told Prefect that main moved" in told, told
    run = started_after(env, pushed_at, serve, timeout=START_WITHIN_S)
    created = (run.created - pushed_at).total_seconds()
    assert created < CREATED_WITHIN_S, f"the sync run was created {created:.1f}s after the push"
    assert "gitops-poll" not in run.tags  # the push event's automation started it
    with get_client(sync_client=True) as client:
        done = wait_for_final(client, run.id, serve)
    assert done.state.is_failed(), done.state  # refused: the commit holds no project
    assert f"{env}: refused " in note_of(origin, commit)
    assert f"commit {commit[:12]} is refused" in note_of(origin, commit)
    [status] = forge.statuses(commit)
    assert status["state"] == "failure" and status["context"] == f"stackflow/{env}", status
    assert status["target_url"].startswith("http") and "refused" in status["description"]
    [(path, headers, _)] = [r for r in forge.received if r[0].endswith(commit)]
    assert path == f"/api/v3/repos/team/platform/statuses/{commit}"
    assert headers["Authorization"] == "Bearer test-token"


def test_the_poll_starts_nothing_for_an_unchanged_branch_and_one_sync_when_it_moved(
    served: tuple[Served, Path, Path, Forge], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the hook: the poll asks the repository once; the branch where it was (its commit
    refused, held) starts no run; after a push the hook did not tell, it starts exactly one."""
    from prefect.client.orchestration import get_client

    from flows.poll import poll_branches

    serve, origin, work, _ = served
    env = serve.environment
    for key, value in serve.variables.items():
        monkeypatch.setenv(key, value)
    before = len(sync_runs(env))
    quiet = poll_branches(environments=[env])
    assert quiet == {"started": {}, "quiet": {"held": 1}}, quiet
    assert len(sync_runs(env)) == before

    (origin / "hooks" / "post-receive").unlink()  # this push tells nobody
    pushed_at = datetime.now(UTC)
    commit, told = push(work, "pushed without the hook")
    assert "stackflow:" not in told
    moved = poll_branches(environments=[env])
    assert list(moved["started"]) == [env] and moved["started"][env]["commit"] == commit, moved
    run = started_after(env, pushed_at, serve, timeout=START_WITHIN_S)
    assert "gitops-poll" in run.tags and str(run.id) == moved["started"][env]["run"]
    with get_client(sync_client=True) as client:
        wait_for_final(client, run.id, serve)
    assert f"{env}: refused " in note_of(origin, commit)
    assert len(sync_runs(env)) == before + 1
