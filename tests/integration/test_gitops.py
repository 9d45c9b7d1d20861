"""GitOps against real git repositories made here (a bare repository on disk, commits pushed by the
test), the sync and review flows run against the session's Prefect server, and each commit's own
`up` deploying with the real Pulumi engine on the session's **local cloud** (moto on loopback, a
MariaDB server per database; nothing reaches AWS).

The repository holds this project as it is (every file git would commit), its stackflow.toml
naming the fixture graph (tests/fixtures/template/nodes.py, each commit's own copy), plus an
environment file that follows `main`. The module's tests run in file order on one environment: a
commit deploys, an unchanged branch costs nothing, a bad commit fails and backs off and a fixed
one heals, a commit waiting for approval is superseded by a newer one, and a review branch gets an
environment of its own that goes with the branch. After each, `status --json` agrees with the
records in the backend.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.realenv import (
    ROOT,
    STACKS,
    cli,
    declare,
    git,
    outputs,
    process_env,
    project_file,
    real_variables,
    unique,
    update_history,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
FIXTURE_GRAPH = "tests.fixtures.template.nodes"  # by its path in a checkout: the commit's copy


@dataclass
class Repo:
    """The team's repository (bare, on disk) and a working copy the test commits from."""

    origin: Path
    work: Path
    environment: str
    variables: dict[str, str] = field(default_factory=dict)

    def commit(self, message: str, files: dict[str, str | None], branch: str = "main") -> str:
        """Write (or delete, for None) these files, commit them on `branch` and push it."""
        known = git(self.work, "branch", "--list", branch)
        git(self.work, "checkout", "-q", *([branch] if known else ["-b", branch]))
        for name, text in files.items():
            path = self.work / name
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        git(self.work, "push", "-q", "--force", "origin", branch)
        return git(self.work, "rev-parse", "HEAD")

    def environment_file(self, **app: Any) -> str:
        lines = ['kind = "dev"', 'cloud = "local"', "", "[git]", 'branch = "main"']
        lines += ["", "[app]"] + [f"{k} = {v}" for k, v in app.items()]
        return "\n".join(lines) + "\n"


def project_files() -> list[str]:
    """What a commit of this project holds: the files git would commit from this checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [f for f in listed if (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def repo(
    tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any
) -> Iterator[Repo]:
    folder = tmp_path_factory.mktemp("gitops")
    origin, work = folder / "origin.git", folder / "work"
    git(folder, "init", "-q", "--bare", "-b", "main", str(origin))
    git(folder, "clone", "-q", str(origin), str(work))
    for name in project_files():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    environment = unique("dev")
    repo = Repo(origin, work, environment)
    # this worker: its own project (the environment follows main of the repository; review
    # branches pr/*), the lock file it was set up from, a state folder of its own
    variables = real_variables(folder / "state", local_cloud, prefect_server)
    project = Path(variables["STACKFLOW_PROJECT_DIR"])
    shutil.copy2(ROOT / "constraints.txt", project / "constraints.txt")
    (project / "stackflow.toml").write_text(
        project_file(FIXTURE_GRAPH)
        + f'\n[git]\nrepository = "{origin}"\nreview_branches = ["pr/*"]\n'
    )
    declare(variables, environment, git={"branch": "main"})
    repo.variables = variables
    # the repository's own project files say the same (a commit runs with its own files)
    (work / "stackflow.toml").write_text((project / "stackflow.toml").read_text())
    yield repo


@pytest.fixture
def worker(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """This process is the worker: its machine variables, and nothing else of stackflow's."""
    import os

    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in repo.variables.items():
        monkeypatch.setenv(key, value)
    return repo


def sync(environment: str) -> Any:
    from flows.sync import sync_environment

    return sync_environment(environment=environment, return_state=True)


def gitops_record(repo: Repo, environment: str | None = None) -> dict[str, Any]:
    from stackflow.backends import open_records
    from stackflow.gitops.sync import read
    from stackflow.records.projects import ProjectRecords

    store = open_records(str(Path(repo.variables["STACKFLOW_STATE_DIR"]) / "records"))
    records = ProjectRecords(store, "stackflow")  # the project of the repository's stackflow.toml
    return read(records, environment or repo.environment)


def status(repo: Repo) -> dict[str, Any]:
    """`status --json` as a user runs it, by environment."""
    done = cli(process_env(repo.variables), "status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return {e["environment"]: e for e in json.loads(done.stdout)["environments"]}


def assert_status_agrees(repo: Repo, environment: str, commit: str, condition: str) -> None:
    """`status --json` says what the backend holds: the record's deployed commit, each stack's
    last operation at that commit, and the condition."""
    shown = status(repo)[environment]
    record = gitops_record(repo, environment)
    assert shown["condition"] == condition, shown
    assert shown["gitops"]["succeeded"] == record["succeeded"], (shown["gitops"], record)
    assert record["succeeded"]["commit"] == commit
    assert [s["stack"] for s in shown["stacks"]] == list(STACKS)
    for s in shown["stacks"]:
        assert s["condition"] == condition and s["result"] == "ok", s


def engine_updates(repo: Repo, environment: str) -> dict[str, int]:
    state = Path(repo.variables["STACKFLOW_STATE_DIR"])
    return {s: len(update_history(state, environment, s)) for s in STACKS}


def test_a_new_commit_deploys_and_an_unchanged_branch_costs_nothing(worker: Repo) -> None:
    """Local cloud: the first commit of main is deployed whole (the commit's own code and
    files), recorded as the environment's commit per stack and in its sync record; a second
    sync with the branch unchanged runs nothing (no deploy, no engine call)."""
    first = worker.commit(
        f"{worker.environment} follows main",
        {f"environments/{worker.environment}.toml": worker.environment_file(desired_count=1)},
    )
    state = sync(worker.environment)
    assert state.is_completed(), state
    done = state.result()
    assert done["result"] == "succeeded", done
    summary = done["summary"]
    assert summary["commit"] == first
    assert sorted(summary["engine_calls"]) == sorted(f"up:{s}" for s in STACKS)
    assert {s["stack"]: s["status"] for s in summary["stacks"]}["verify"] == "healthy"
    assert outputs(worker.variables, worker.environment)["app"]["url"]
    assert_status_agrees(worker, worker.environment, first, "ready")
    assert status(worker)[worker.environment]["migrations_version"] == 1

    before = engine_updates(worker, worker.environment)
    again = sync(worker.environment)
    assert again.is_completed(), again
    assert again.result()["next"] == "up-to-date"
    assert "summary" not in again.result()  # no deploy ran
    assert engine_updates(worker, worker.environment) == before
    assert gitops_record(worker)["seen"]["commit"] == first
    # the repository hears back: the commit's note names the environment and the deploy's run
    note = git(worker.origin, "log", "--notes=stackflow", "--format=%N", "-1", first)
    assert f"{worker.environment}: deployed " in note and f"run {summary['ui_url']}" in note, note


def test_a_bad_commit_fails_backs_off_and_a_fixed_one_heals(worker: Repo) -> None:
    """Local cloud: a commit that locks a package this worker was not set up with is refused
    before anything runs, naming it, and held until a newer commit. The next commit adds a
    migration that drops the environment's own database: the migration runner refuses it
    (nothing applied), the sync fails, records the failure and waits (a sync right after runs
    nothing). The next commit fixes the file: it deploys (the stacks are unchanged, the migration
    applies) and the environment is healthy at it."""
    lock = (worker.work / "constraints.txt").read_text()
    locked = worker.commit("a new pin", {"constraints.txt": lock + "zzz-unheard-of==1.0\n"})
    refused = sync(worker.environment)
    assert refused.is_failed(), refused
    record = gitops_record(worker)
    assert record["attempted"]["commit"] == locked and record["attempted"]["result"] == "refused"
    assert "zzz-unheard-of 1.0 (this worker: not locked)" in record["attempted"]["message"]
    note = git(worker.origin, "notes", "--ref=stackflow", "show", locked)
    assert note.startswith(f"{worker.environment}: refused ") and "zzz-unheard-of" in note, note
    held = sync(worker.environment)
    assert held.is_completed() and held.result()["next"] == "held", held.result()

    bad = worker.commit(
        "a bad migration",
        {"constraints.txt": lock, "migrations/V002__bad.sql": "DROP DATABASE app;\n"},
    )
    failed = sync(worker.environment)
    assert failed.is_failed(), failed
    record = gitops_record(worker)
    assert record["attempted"]["commit"] == bad and record["attempted"]["result"] == "failed"
    assert record["failures"] == 1 and record["retry_at"] > time.time()
    assert "V002__bad.sql" in record["attempted"]["message"], record
    assert status(worker)[worker.environment]["stacks"][0]["condition"] == "ready"

    waiting = sync(worker.environment)
    assert waiting.is_completed() and waiting.result()["next"] == "waiting", waiting.result()

    fixed = worker.commit(
        "the migration, fixed",
        {
            "migrations/V002__bad.sql": None,
            "migrations/V002__gitops.sql": "CREATE TABLE gitops (id INT);\n",
        },
    )
    healed = sync(worker.environment)
    assert healed.is_completed(), healed
    summary = healed.result()["summary"]
    assert summary["engine_calls"] == [], summary["engine_calls"]  # the stacks did not change
    steps = {s["stack"]: s for s in summary["stacks"]}
    assert steps["migrate"]["status"] == "migrated" and steps["verify"]["status"] == "healthy"
    assert_status_agrees(worker, worker.environment, fixed, "ready")
    assert status(worker)[worker.environment]["migrations_version"] == 2
    assert gitops_record(worker)["failures"] == 0


def test_an_untrusted_commit_is_refused_by_name_and_nothing_runs(worker: Repo) -> None:
    """Local cloud: a repository is untrusted input. A commit whose environment file is a link
    to an absolute path, then one without constraints.txt: each sync ends Failed with a refusal
    (never a crash), the record names the commit, the file and why, `status` shows it, and no
    engine call was made."""
    env, name = worker.environment, f"environments/{worker.environment}.toml"
    text, lock = (worker.work / name).read_text(), (worker.work / "constraints.txt").read_text()
    before = engine_updates(worker, env)
    link = worker.work / name
    link.unlink()
    link.symlink_to("/nonexistent/stackflow-test/env.toml")  # a path nothing writes through
    cases = [
        (worker.commit("the environment file, a link to an absolute path", {}), name),
        (None, "constraints.txt"),
    ]
    for head, named in cases:
        if head is None:
            link.unlink()
            head = worker.commit("no lock file", {name: text, "constraints.txt": None})
        state = sync(env)
        assert state.is_failed() and "Traceback" not in str(state.message), state
        attempted = gitops_record(worker)["attempted"]
        assert attempted["commit"] == head and attempted["result"] == "refused", attempted
        assert f"commit {head[:12]} is refused" in attempted["message"]
        assert f"'{named}'" in attempted["message"], attempted["message"]
    assert status(worker)[env]["gitops"]["attempted"]["result"] == "refused"
    shown = cli(process_env(worker.variables), "status").stdout
    assert f"commit {head[:12]} refused: commit {head[:12]} is refused" in shown, shown
    assert engine_updates(worker, env) == before
    worker.commit("the lock file back", {"constraints.txt": lock})


def test_a_run_that_ends_without_its_summary_is_failed_never_deployed(worker: Repo) -> None:
    """Local cloud: a commit whose own code reads the worker's passphrase and exits 0 without
    deploying anything (no summary) is recorded as failed, naming why, never as deployed; the
    environment's deployed commit stays the one before."""
    deployed = gitops_record(worker)["succeeded"]["commit"]
    silent = worker.commit(
        "a run.py that deploys nothing",
        {"flows/run.py": "import os\nos.environ.get('STACKFLOW_STATE_PASSPHRASE')\n"},
    )
    state = sync(worker.environment)
    assert state.is_failed(), state
    record = gitops_record(worker)
    assert record["attempted"]["commit"] == silent and record["attempted"]["result"] == "failed"
    assert "its run exited 0, but the run printed no summary" in record["attempted"]["message"]
    assert record["succeeded"]["commit"] == deployed
    worker.commit("run.py back", {"flows/run.py": (ROOT / "flows" / "run.py").read_text()})


def test_lost_state_holds_a_sync_and_a_sync_asked_to_recreate_deploys_anew(worker: Repo) -> None:
    """Local cloud: the app's resources gone (destroyed) and its checkpoint lost while its record
    still says it was deployed: the next commit's sync is refused by its own `up` (the state is
    gone; nothing is created) and held; the sync run with `recreate` runs `up --recreate`, which
    deploys the app anew, the other stacks skipped, and the environment is healthy at it."""
    from flows.sync import sync_environment
    from stackflow.backends import open_records
    from stackflow.records.projects import ProjectRecords
    from stackflow.status.records import stack_key

    env = worker.environment
    state = Path(worker.variables["STACKFLOW_STATE_DIR"])
    store = open_records(str(state / "records"))
    records, key = ProjectRecords(store, "stackflow"), stack_key(env, "app")
    found = records.get(key)
    assert found is not None and found.value["succeeded"]["operation"] == "up", found
    gone = cli(process_env(worker.variables), "destroy", "--env", env, "--stacks", "app", "--yes")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    stacks = state / "pulumi-local" / ".pulumi" / "stacks" / "stackflow-app"
    for lost in stacks.glob(f"{env}.json*"):
        lost.unlink()  # the checkpoint lost, and its backup beside it
    now = records.get(key)
    assert now is not None
    records.put(key, found.value, expect_version=now.version)  # "deployed", as before the loss

    head = worker.commit("a commit after the loss", {})
    refused = sync(env)
    assert refused.is_failed(), refused
    attempted = gitops_record(worker)["attempted"]
    assert attempted["commit"] == head and attempted["result"] == "refused", attempted
    assert f"the state of {env}/app (deployed " in attempted["message"], attempted["message"]
    assert not list(stacks.glob(f"{env}.json"))  # nothing was created
    assert sync(env).result()["next"] == "held"

    asked = sync_environment(environment=env, recreate=True, return_state=True)
    assert asked.is_completed(), asked
    summary = asked.result()["summary"]
    assert summary["engine_calls"] == ["up:app"], summary["engine_calls"]
    assert {s["stack"]: s["status"] for s in summary["stacks"]}["verify"] == "healthy"
    assert_status_agrees(worker, env, head, "ready")


def _paused_run(commit: str, timeout: float = 240) -> Any:
    """The deploy run a sync started for `commit`, once it waits for approval."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    tags=FlowRunFilterTags(all_=[f"commit:{commit[:12]}"])
                )
            )
            paused = [r for r in runs if r.state is not None and r.state.is_paused()]
            if paused:
                return paused[0]
            time.sleep(0.5)
    raise AssertionError(f"no run of {commit[:12]} waited for approval within {timeout:.0f}s")


def test_a_newer_commit_supersedes_one_waiting_for_approval(worker: Repo) -> None:
    """Local cloud: main now requires approval; its commit (2 tasks) waits for a decision when a
    newer commit (3 tasks) lands. The next sync rejects the waiting plan (nothing of it applied)
    and deploys the newer commit, which applies once approved: the app goes from 1 task to 3,
    never through 2, and the sync record names the newer commit."""
    from flows.approval import answer

    def file(count: int) -> str:
        text = worker.environment_file(desired_count=count)
        return text + "\n[approval]\nrequired = true\ntimeout_s = 600\n"

    name = f"environments/{worker.environment}.toml"
    older = worker.commit("2 tasks, with approval", {name: file(2)})
    app_updates = engine_updates(worker, worker.environment)["app"]
    first: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: first.update(state=sync(worker.environment)))
    waiting.start()
    stale = _paused_run(older)
    newer = worker.commit("3 tasks, with approval", {name: file(3)})
    second: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: second.update(state=sync(worker.environment)))
    runner.start()
    fresh = _paused_run(newer)
    answer(str(fresh.id), True, "approved by the test")
    runner.join(timeout=400)
    waiting.join(timeout=60)
    assert "state" in second and "state" in first, "a sync did not end"
    assert second["state"].is_completed(), second["state"]
    assert second["state"].result()["result"] == "succeeded"
    assert first["state"].is_completed() and first["state"].result()["result"] == "superseded"

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        rejected = client.read_flow_run(stale.id).state
    # recorded as superseded by the sync, never as someone's rejection in the UI
    assert rejected is not None and rejected.name == "Superseded", rejected
    assert f"superseded by commit {newer[:12]}" in (rejected.message or ""), rejected
    # one update of the app since: straight to 3 tasks
    assert engine_updates(worker, worker.environment)["app"] == app_updates + 1
    ecs = _ecs(worker)
    assert ecs == 3
    assert_status_agrees(worker, worker.environment, newer, "ready")


def _ecs(repo: Repo) -> int:
    from tests.realenv import settings_for

    settings = settings_for(repo.variables, repo.environment)
    import boto3

    client = boto3.client(
        "ecs",
        endpoint_url=f"http://127.0.0.1:{settings.localcloud.port}",
        region_name=settings.aws.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    env = repo.environment
    [service] = client.describe_services(
        cluster=f"stackflow-{env}-cluster", services=[f"stackflow-{env}-app"]
    )["services"]
    return int(service["desiredCount"])


def test_a_review_branch_gets_an_environment_that_goes_with_it(
    worker: Repo, local_cloud: Any
) -> None:
    """Local cloud: a new branch pr/<n> gets environment pr-<n> (the ephemeral template of the
    commit), deployed at the branch's commit, with its URL published as an artifact; when the
    branch is deleted, the next review run destroys it: nothing of it is left in the backend,
    the records or the local cloud."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.review import review_branches
    from stackflow.localcloud.inventory import list_resources

    number = str(uuid.uuid4().int % 10**6)
    branch, name = f"pr/{number}", f"pr-{number}"
    head = worker.commit("a review branch", {"REVIEW.md": f"review {number}\n"}, branch=branch)
    state = review_branches(return_state=True)
    assert state.is_completed(), state
    done = state.result()["environments"][name]
    assert done["result"] == "succeeded" and done["commit"] == head, done
    with get_client(sync_client=True) as client:
        [artifact] = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"review-{name}"]))
        )
    url = outputs(worker.variables, name)["app"]["url"]
    assert f"URL: {url}" in str(artifact.data)
    shown = status(worker)[name]
    assert shown["kind"] == "ephemeral" and shown["condition"] == "ready", shown
    assert shown["gitops"]["branch"] == branch and shown["gitops"]["review"] is True

    git(worker.work, "checkout", "-q", "main")
    git(worker.work, "push", "-q", "origin", "--delete", branch)
    gone = review_branches(return_state=True)
    assert gone.is_completed(), gone
    assert gone.result()["destroyed"] == [name]
    assert name not in status(worker)
    assert gitops_record(worker, name) == {}
    assert list_resources(local_cloud.url, local_cloud.region, name) == []
    stacks = Path(worker.variables["STACKFLOW_STATE_DIR"]) / "pulumi-local" / ".pulumi" / "stacks"
    # Pulumi's own backups (.bak) of a removed stack stay; the stacks themselves are gone
    assert [p for p in stacks.glob(f"*/{name}.json*") if ".bak" not in p.name] == []


def test_review_runs_refuse_a_backend_that_holds_a_protected_environment(
    worker: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review workers' setup (docs/operations/trust-model.md): a review branch runs its own
    code with what its worker holds, so review/branches refuses a backend that holds a protected
    environment, naming it, before it asks the repository for a branch: no sync record, no run."""
    from flows.review import review_branches
    from stackflow.environment_records import record_attempt, records_of
    from tests.realenv import settings_for

    shared = {**worker.variables, "STACKFLOW_STATE_DIR": str(tmp_path / "state")}
    monkeypatch.setenv("STACKFLOW_STATE_DIR", shared["STACKFLOW_STATE_DIR"])
    prod = settings_for(shared, unique("prod"))
    records = records_of(prod)
    record_attempt(records, prod)  # prod's state is on this backend
    state = review_branches(return_state=True)
    assert state.is_failed(), state
    assert f"holds protected environment(s) {prod.environment}" in str(state.message), state.message
    assert records.list("gitops/") == []


def _logs(flow_run_id: Any) -> str:
    """A flow run's log lines as Prefect stored them (this process's queued ones sent first)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import LogSort

    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()
    with get_client(sync_client=True) as client:
        found = client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])),
            limit=200,
            sort=LogSort.TIMESTAMP_ASC,
        )
    return "\n".join(log.message for log in found)


def test_a_refused_commit_says_why_in_status_its_page_and_the_metrics(
    worker: Repo, tmp_path: Path
) -> None:
    """Local cloud: a commit whose environment file names a setting that is not one is refused
    (twice: refused, then held); its reason, the error line the command line prints, is what the
    sync records, what its flow run ends with (no traceback in its log), and what `status` text
    and JSON, the environment's page in Prefect and the Prometheus file say, beside the commit
    still deployed and the app's health from its last verify. Then a commit whose migration file
    is misnamed, refused by the commit's own run (its `up` checks its files first): the sync
    records the run's error line, never "exit code 1"."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort
    from prometheus_client.parser import text_string_to_metric_families

    reason = "app.desired_cont: not a setting"
    deployed = gitops_record(worker)["succeeded"]["commit"]
    name = f"environments/{worker.environment}.toml"
    bad = worker.commit("a typo", {name: worker.environment_file(desired_cont=3)})
    refused = sync(worker.environment)
    assert refused.is_failed(), refused
    assert reason in (refused.message or ""), refused.message
    log = _logs(refused.state_details.flow_run_id)
    assert reason in log and "Traceback" not in log, log
    attempt = gitops_record(worker)["attempted"]
    assert attempt["commit"] == bad and attempt["result"] == "refused"
    assert reason in attempt["message"] and "exit code" not in attempt["message"], attempt
    held = sync(worker.environment)
    assert held.is_completed() and held.result()["next"] == "held", held.result()

    metrics = tmp_path / "stackflow.prom"
    env = process_env(worker.variables)
    done = cli(env, "status", "--env", worker.environment, "--prometheus", str(metrics))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"deployed {deployed[:12]}" in done.stdout
    assert f"commit {bad[:12]} refused: " in done.stdout and reason in done.stdout, done.stdout
    assert "healthy (200," in done.stdout, done.stdout
    shown = status(worker)[worker.environment]
    assert shown["commit"] == deployed and shown["branch"]["head"] == bad
    assert reason in shown["branch"]["refused"]["reason"], shown["branch"]
    assert shown["health"]["healthy"] is True and shown["health"]["answer"] == 200
    assert shown["url"] and shown["health"]["url"] == shown["url"]
    assert [r["operation"] for r in shown["runs"]][:1] == ["up"]
    [family] = [
        f
        for f in text_string_to_metric_families(metrics.read_text())
        if f.name == "stackflow_gitops_commit_refused"
    ]
    [sample] = family.samples
    assert sample.labels["commit"] == bad[:12] and reason in sample.labels["reason"], sample

    with get_client(sync_client=True) as client:
        pages = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[f"environment-{worker.environment}"])
            ),
            sort=ArtifactSort.CREATED_DESC,
        )
    assert len(pages) >= 2, pages  # the deploys' versions, then the refusal's: its history
    assert reason in str(pages[0].data) and f"`{deployed[:12]}`" in str(pages[0].data)

    misnamed = worker.commit(
        "a misnamed migration",
        {name: worker.environment_file(desired_count=1), "migrations/V009_bad.sql": "SELECT 1;\n"},
    )
    failed = sync(worker.environment)
    assert failed.is_failed(), failed
    attempt = gitops_record(worker)["attempted"]
    assert attempt["commit"] == misnamed and attempt["result"] == "failed", attempt
    said = "V009_bad.sql: malformed migration file name"
    assert said in attempt["message"] and "exit code" not in attempt["message"], attempt
    assert said in (failed.message or "")
    shown = cli(env, "status", "--env", worker.environment).stdout
    assert f"commit {misnamed[:12]} failed 1 time(s) in a row: " in shown and said in shown, shown
