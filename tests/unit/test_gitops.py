"""GitOps decisions without servers: review branch names, what a sync does next from its record,
the back-off, the locked-dependency check, git's credentials kept out of what git prints, the
[git] settings, and `status`'s conditions and Prometheus text from records in a folder."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from stackflow.backends import open_records
from stackflow.errors import SettingsError
from stackflow.gitops import sync
from stackflow.gitops.git import Git, GitError, export_commit, project_commit
from stackflow.gitops.locked import LockedDependenciesDiffer, check_locked
from stackflow.gitops.names import matching, review_environments, review_name
from stackflow.settings import get_settings
from tests.realenv import declare
from tests.realenv import test_project as make_project

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("branch", "name"),
    [
        ("pr/123", "pr-123"),
        ("pull/7", "pr-7"),
        ("mr/0042", "pr-42"),
        ("review/Fix login page!", "eph-fix-login-page"),
        ("feature/a-very-long-branch-name-here", "eph-a-very-long-5ef5"),
        ("review/..", "eph-branch"),
    ],
)
def test_review_branches_map_to_short_ephemeral_names(branch: str, name: str) -> None:
    assert review_name(branch) == name
    assert len(name) <= 20


def test_two_branches_of_one_name_are_both_refused_by_name() -> None:
    chosen, clashes = review_environments({"pr/1": "a", "pull/1": "b", "review/x": "c"})
    assert chosen == {"eph-x": "review/x"}
    [clash] = clashes
    assert "'pr/1', 'pull/1'" in clash and "'pr-1'" in clash


def test_patterns_match_whole_branch_names() -> None:
    assert matching(["pr/1", "main", "review/a/b", "prx"], ["pr/*", "review/*"]) == [
        "pr/1",
        "review/a/b",
    ]


A, B = "a" * 40, "b" * 40


def never(_: dict[str, Any]) -> bool:
    return False


def always(_: dict[str, Any]) -> bool:
    return True


def test_a_sync_decides_from_the_record_and_the_branch() -> None:
    deployed = {"succeeded": {"commit": A}, "attempted": {"commit": A, "result": "succeeded"}}
    assert sync.decide(deployed, A, deployed=True, live=never).next is sync.Next.UP_TO_DATE
    assert sync.decide(deployed, B, deployed=True, live=never).next is sync.Next.DEPLOY
    # the environment was destroyed behind the record: deploy it again
    assert sync.decide(deployed, A, deployed=False, live=never).next is sync.Next.DEPLOY
    failed = {**deployed, "attempted": {"commit": B, "result": "failed"}, "failures": 2}
    now = time.time()
    assert (
        sync.decide({**failed, "retry_at": now + 60}, B, deployed=True, live=never, now=now).next
        is sync.Next.WAITING
    )
    assert (
        sync.decide({**failed, "retry_at": now - 1}, B, deployed=True, live=never, now=now).next
        is sync.Next.DEPLOY
    )
    for result in ("refused", "rejected", "expired"):
        held = {**deployed, "attempted": {"commit": B, "result": result}}
        assert sync.decide(held, B, deployed=True, live=never).next is sync.Next.HELD
    running = {**deployed, "attempted": {"commit": B, "result": "running", "sync_run": "x"}}
    assert sync.decide(running, B, deployed=True, live=always).next is sync.Next.RECONCILING
    newer = sync.decide(running, "c" * 40, deployed=True, live=always)
    assert newer.next is sync.Next.DEPLOY and newer.supersede == running["attempted"]
    # its sync died (a killed worker): the commit is deployed again, nothing to supersede
    dead = sync.decide(running, B, deployed=True, live=never)
    assert dead.next is sync.Next.DEPLOY and dead.supersede is None
    expired = {**deployed, "expired_commit": A}
    assert sync.decide(expired, A, deployed=False, live=never).next is sync.Next.HELD


def test_back_off_doubles_per_failure_up_to_an_hour() -> None:
    assert [sync.backoff_s(n, 60) for n in (1, 2, 3, 7, 20)] == [60, 120, 240, 3600, 3600]


def test_begin_and_finish_write_the_record_with_compare_and_set(tmp_path: Path) -> None:
    records = open_records(str(tmp_path / "records"))
    decided_on = sync.read(records, "dev")
    assert sync.begin(records, "dev", A, {"sync_run": "one"}, decided_on)
    # a second sync that decided on the same (now stale) record does nothing
    assert not sync.begin(records, "dev", A, {"sync_run": "two"}, decided_on)
    saved = sync.finish(records, "dev", A, sync.Result.FAILED, "boom", 60)
    assert saved["failures"] == 1 and saved["retry_at"] > time.time()
    assert saved["attempted"]["sync_run"] == "one" and saved["attempted"]["result"] == "failed"
    again = sync.read(records, "dev")
    assert sync.begin(records, "dev", A, {"sync_run": "three"}, again)
    assert sync.finish(records, "dev", A, sync.Result.FAILED, "boom", 60)["failures"] == 2
    newer = sync.read(records, "dev")
    assert sync.begin(records, "dev", B, {"sync_run": "four"}, newer)
    # the older attempt ending now changes nothing: the newer one carries the environment
    assert (
        sync.finish(records, "dev", A, sync.Result.SUCCEEDED, "ok", 60)["attempted"]["commit"] == B
    )
    done = sync.finish(records, "dev", B, sync.Result.SUCCEEDED, "ok", 60)
    assert done["succeeded"]["commit"] == B and done["failures"] == 0 and done["retry_at"] is None


def test_a_commit_locking_other_versions_is_refused_naming_each(tmp_path: Path) -> None:
    worker, commit = tmp_path / "worker", tmp_path / "commit"
    worker.mkdir()
    commit.mkdir()
    (worker / "constraints.txt").write_text("pulumi==3.259.0\npulumi-aws==7.51.1\nsix==1.16.0\n")
    (commit / "constraints.txt").write_text("pulumi==3.259.0\npulumi_aws==6.0.0\nrich==14.0\n")
    with pytest.raises(LockedDependenciesDiffer) as caught:
        check_locked(commit, worker, A)
    text = str(caught.value)
    assert "pulumi-aws 6.0.0 (this worker: 7.51.1)" in text
    assert "rich 14.0 (this worker: not locked)" in text
    assert "six not locked (this worker: 1.16.0)" in text
    (commit / "constraints.txt").write_text((worker / "constraints.txt").read_text())
    check_locked(commit, worker, A)  # the same lock: runs
    (commit / "constraints.txt").unlink()
    with pytest.raises(LockedDependenciesDiffer, match=r"has no constraints\.txt"):
        check_locked(commit, worker, A)


def test_a_token_never_shows_in_what_git_says() -> None:
    """git (a real one) fails to reach a repository that refuses connections: the error names the
    repository and what git said, and the token sent as a header is nowhere in it."""
    token = "ghp_canary0123456789abcdefSECRET"
    client = Git("http://127.0.0.1:9/team/repo.git", token)
    with pytest.raises(GitError) as caught:
        client.branches()
    assert "127.0.0.1:9/team/repo.git" in str(caught.value)
    assert token not in str(caught.value)
    assert token not in repr(client)
    env = client._environment()
    assert not [k for k in env if k.startswith("STACKFLOW_")]
    assert env["GIT_TERMINAL_PROMPT"] == "0"


def test_export_gives_one_commit_s_files_and_the_commit_it_is(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=work,
            check=True,
            capture_output=True,
            text=True,
            env={
                "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@x",
                "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@x",
                "HOME": str(tmp_path),
                "PATH": "/usr/bin:/bin",
            },
        ).stdout.strip()

    run("init", "-q", "-b", "main")
    (work / "a.txt").write_text("one")
    run("add", "-A")
    run("commit", "-q", "-m", "one")
    first = run("rev-parse", "HEAD")
    (work / "a.txt").write_text("two")
    run("commit", "-q", "-am", "two")
    client = Git(str(work))
    assert client.head_of("main") == run("rev-parse", "HEAD")
    out = export_commit(client, tmp_path / "mirrors", first, tmp_path / "checkouts" / first)
    assert (out / "a.txt").read_text() == "one" and not (out / ".git").exists()
    assert project_commit(out) == first
    assert project_commit(work) == run("rev-parse", "HEAD")
    (work / "a.txt").write_text("three")
    assert project_commit(work) == run("rev-parse", "HEAD") + "-dirty"
    with pytest.raises(GitError, match="not a full commit id"):
        export_commit(client, tmp_path / "mirrors", "main", tmp_path / "x")


def test_git_settings_are_checked_and_credentials_never_in_a_url(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    variables = {"STACKFLOW_PROJECT_DIR": str(project)}
    declare(variables, "dev-one", git={"branch": "release/1.x", "repository": "/srv/repo.git"})
    settings = get_settings("dev-one", project_dir=project, environ={})
    assert (settings.git.branch, settings.git.repository) == ("release/1.x", "/srv/repo.git")
    assert settings.git.interval_s == 60
    bad = {
        "branch": ("a..b", "not a git branch name"),
        "repository": ("https://me:hunter2@git.example/repo.git", "holds no credentials"),
        "interval_s": (30, "greater than or equal to 60"),
    }
    for key, (value, why) in bad.items():
        declare(variables, "dev-one", git={key: value})
        with pytest.raises(SettingsError) as caught:
            get_settings("dev-one", project_dir=project, environ={})
        assert f"environments/dev-one.toml: git.{key}" in str(caught.value)
        assert why in str(caught.value)
        assert "hunter2" not in str(caught.value)


def test_status_conditions_and_prometheus_text_from_records(tmp_path: Path) -> None:
    from stackflow.engine.base import Operation
    from stackflow.environment_records import record_attempt, record_outcome
    from stackflow.outcome import NodeOutcome, Status
    from stackflow.status.metrics import prometheus
    from stackflow.status.records import record_migrations, record_outcomes, record_run
    from stackflow.status.report import collect

    project = make_project(tmp_path / "project")
    settings = get_settings("dev-a", project_dir=project, state_dir=tmp_path / "state", environ={})
    records = open_records(str(tmp_path / "records"))
    for name in ("dev-a", "dev-b"):
        s = settings.model_copy(update={"environment": name})
        record_attempt(records, s)
        record_outcome(records, s, succeeded=True)
    record_outcomes(
        records,
        "dev-a",
        [
            NodeOutcome("networking", Operation.UP, Status.UPDATED),
            NodeOutcome("database", Operation.UP, Status.UNCHANGED),
            NodeOutcome("app", Operation.UP, Status.FAILED, note="boom"),
        ],
        A,
        "run-1",
    )
    record_migrations(records, "dev-a", 3, 1, A)
    record_outcomes(
        records,
        "dev-b",
        [NodeOutcome(n, Operation.UP, Status.UPDATED) for n in ("networking", "database", "app")],
        B,
        "r",
    )
    drift = NodeOutcome("app", Operation.DRIFT, Status.DRIFT)
    record_outcomes(records, "dev-b", [drift], B, "r2")
    record_run(records, "dev-b", "run-3", "up", "waiting for approval", ["app"], B)
    found = {e.environment: e for e in collect(records, ["networking", "database", "app"])}
    a, b = found["dev-a"], found["dev-b"]
    assert [s.condition for s in a.stacks] == ["ready", "ready", "failed"]
    assert a.condition == "failed" and a.migrations_version == 3
    assert a.stacks[0].commit == A and a.stacks[2].note == "boom"
    assert [s.condition for s in b.stacks] == ["ready", "ready", "waiting for approval"]
    # the run that waited is over (its flow run ended): the app shows its last check
    gone = {
        e.environment: e
        for e in collect(records, ["networking", "database", "app"], lambda _r: False)
    }
    assert [s.condition for s in gone["dev-b"].stacks] == ["ready", "ready", "drifted"]
    text = prometheus(list(gone.values()))
    assert 'stackflow_stacks_active{environment="dev-a"} 3' in text
    assert 'stackflow_stacks_failing{environment="dev-a"} 1' in text
    assert (
        'stackflow_stack_condition{environment="dev-b",stack="app",condition="drifted"} 1' in text
    )
    assert 'stackflow_migrations_version{environment="dev-a"} 3' in text
    assert "# TYPE stackflow_stacks_failing gauge" in text


def test_followed_environments_share_one_poll_and_sync_at_once_on_their_branch_s_push(
    tmp_path: Path,
) -> None:
    """The deployments as data: sync/<env> for an environment whose file names a branch (no
    schedule of its own, scoped to it, run by an automation when a push event names its branch),
    one gitops/poll for all of them (every shortest interval_s, listing them), review/branches
    when the project names review patterns (its interval, and on pushes of matching branches),
    and the same in prefect.yaml."""
    import yaml  # type: ignore[import-untyped]

    from deployments.prefect_yaml import prefect_yaml
    from deployments.serve import deployment_specs, triggers

    project = make_project(tmp_path / "project")
    variables = {"STACKFLOW_PROJECT_DIR": str(project)}
    declare(variables, "dev", git={"branch": "main", "repository": "/srv/r.git", "interval_s": 90})
    declare(variables, "qa", git={"branch": "release/1", "repository": "/srv/r.git"})
    declare(variables, "staging")
    (project / "stackflow.toml").write_text(
        '[git]\nrepository = "/srv/r.git"\nreview_branches = ["pr/*", "x[0-9]"]\ninterval_s = 120\n'
    )
    specs = {s.full_name: s for s in deployment_specs(project_dir=project)}
    sync_dev = specs["sync/dev"]
    assert sync_dev.interval_s is None and sync_dev.cron is None  # no run of its own per interval
    assert sync_dev.parameters == {"environment": "dev"} and "env:dev" in sync_dev.tags
    [push] = triggers(sync_dev)
    assert push.expect == {"stackflow.git.pushed"} and push.within.total_seconds() == 0
    assert push.match.model_dump() == {"stackflow.branch": "main"}
    assert "sync/staging" not in specs  # it follows no branch
    poll = specs["gitops/poll"]
    assert poll.interval_s == 90 and poll.parameters == {"environments": ["dev", "qa"]}  # shortest
    assert not poll.review  # the trusted pool's: it reads the followed environments' records
    review = specs["review/branches"]
    assert review.interval_s == 120 and "env-kind:ephemeral" in review.tags
    [moved] = triggers(review)
    assert moved.expect == {"stackflow.git.pushed", "stackflow.git.deleted"}
    # Prefect matches a literal or a prefix: each pattern's literal start (the flow filters)
    assert moved.match.model_dump() == {"stackflow.branch": ["pr/*", "x*"]}
    listed = {
        d["name"] + "@" + d["entrypoint"]: d
        for d in yaml.safe_load(prefect_yaml(list(specs.values())))["deployments"]
    }
    assert "schedules" not in listed["dev@flows/sync.py:sync_environment"]
    assert listed["dev@flows/sync.py:sync_environment"]["triggers"][0]["match"] == {
        "stackflow.branch": "main"
    }
    assert listed["poll@flows/poll.py:poll_branches"]["schedules"] == [{"interval": 90}]
    assert listed["poll@flows/poll.py:poll_branches"]["work_pool"]["name"] == "stackflow"
    assert listed["branches@flows/review.py:review_branches"]["schedules"] == [{"interval": 120}]
