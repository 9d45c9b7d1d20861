"""Project nodes under GitOps: an environment that follows a branch deploys each commit's own copy
of the project folders, on the real Pulumi engine and the session's **local cloud** (moto on
loopback, not AWS), through the sync flow on the session's Prefect server.

The repository holds this project as it is, with stackflow.toml naming the fixture graph of two
team projects (tests/fixtures/projects). The first commit deploys the graph; a second commit
changes only the site project's stack file in the repository: its sync updates site with the
commit's value, and networking and edge are skipped with no engine call.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_gitops import Repo, git, project_files
from tests.realenv import ROOT, declare, project_file, real_variables, unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SITE_STACK_FILE = "tests/fixtures/projects/site/Pulumi.dev.yaml"


@pytest.fixture
def repo(
    tmp_path: Path, local_cloud: Any, prefect_server: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Repo]:
    """The team's repository (this project, graph = the fixture graph), and this process as the
    worker that follows it."""
    import os

    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(work))
    for name in project_files():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    environment = unique("dev")
    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    project = Path(variables["STACKFLOW_PROJECT_DIR"])
    shutil.copy2(ROOT / "constraints.txt", project / "constraints.txt")
    toml = project_file("tests.fixtures.projects.graph") + f'\n[git]\nrepository = "{origin}"\n'
    (project / "stackflow.toml").write_text(toml)
    (work / "stackflow.toml").write_text(toml)
    declare(variables, environment, git={"branch": "main"})
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    yield Repo(origin, work, environment, variables)


def _sync(environment: str) -> dict[str, Any]:
    from flows.sync import sync_environment

    state = sync_environment(environment=environment, return_state=True)
    assert state.is_completed(), state
    result: dict[str, Any] = state.result()
    return result


def test_each_commit_deploys_its_own_copy_of_the_project_folders(
    repo: Repo, local_cloud: Any
) -> None:
    """Local cloud: commit one deploys networking and both projects from the commit's checkout;
    commit two changes the site's greeting in the repository only: site is updated with it, the
    other stacks are skipped with no engine call."""
    env_file = 'kind = "dev"\ncloud = "local"\n\n[git]\nbranch = "main"\n'
    first = repo.commit("follow main", {f"environments/{repo.environment}.toml": env_file})
    done = _sync(repo.environment)
    assert done["result"] == "succeeded", done
    summary = done["summary"]
    assert summary["commit"] == first
    assert sorted(summary["engine_calls"]) == ["up:edge", "up:networking", "up:site"]
    bucket = {s["stack"]: s for s in summary["stacks"]}["site"]["outputs"]["bucket"]

    second = repo.commit(
        "the site greets differently",
        {SITE_STACK_FILE: "config:\n  team-site:greeting: hello from the commit\n"},
    )
    done = _sync(repo.environment)
    assert done["result"] == "succeeded", done
    summary = done["summary"]
    assert summary["commit"] == second
    assert summary["engine_calls"] == ["up:site"]
    stacks = {s["stack"]: s for s in summary["stacks"]}
    assert stacks["site"]["outputs"]["greeting"] == "hello from the commit"
    tags = local_cloud.client("s3").get_bucket_tagging(Bucket=bucket)["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags}["greeting"] == "hello from the commit"
    assert (ROOT / SITE_STACK_FILE).read_text() == "config:\n  team-site:greeting: hello\n"
