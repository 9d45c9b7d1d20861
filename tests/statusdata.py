"""Records as runs and syncs write them, for tests of `status`'s views (a folder store, fixture
environments, no servers): staging-a follows main with 9b02d717 deployed and healthy, then
3f1a2b3c refused twice (a setting that is not one) and drift found in its app; pr-7 (ephemeral,
2 h TTL) has a failed app and an unhealthy verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stackflow.backends import open_records
from stackflow.engine.base import Operation, OutputValue
from stackflow.environment_records import record_attempt, record_outcome
from stackflow.gitops import sync
from stackflow.outcome import NodeOutcome, Status, UpResult
from stackflow.records import Records
from stackflow.settings import get_settings
from stackflow.status.history import RunEntry, RunResult, record_health, record_history
from stackflow.status.records import record_migrations, record_outcomes
from tests.realenv import declare
from tests.realenv import test_project as make_project

STACKS = ["networking", "database", "app"]
DEPLOYED, REFUSED = "9b02d7174807" + "a" * 28, "3f1a2b3c4d5e" + "b" * 28
REASON = (
    "invalid settings: environments/staging-a.toml: app.desired_cont: not a setting; accepted "
    "keys of [app]: image, cpu, memory_mb, desired_count, port, health_check_path"
)
UI = "http://127.0.0.1:4200"


def _environment(records: Records, tmp_path: Path, name: str, **sections: Any) -> None:
    project = make_project(tmp_path / f"project-{name}")
    declare({"STACKFLOW_PROJECT_DIR": str(project)}, name, **sections)
    settings = get_settings(name, project_dir=project, state_dir=tmp_path / "state", environ={})
    record_attempt(records, settings)
    record_outcome(records, settings, succeeded=True)


def _updated(stack: str, outputs: dict[str, Any]) -> NodeOutcome:
    """A stack's up that changed it, holding `outputs` ("[secret]": a secret one)."""
    held = {k: OutputValue(v, secret=v == "[secret]") for k, v in outputs.items()}
    return NodeOutcome(stack, Operation.UP, Status.UPDATED, result=UpResult(held, None))


def _deploy(records: Records, env: str, commit: str, run: str, outputs: dict[str, Any]) -> None:
    """What an up that deployed every stack and passed its verify leaves."""
    nodes = [_updated(s, outputs.get(s, {})) for s in STACKS]
    record_outcomes(records, env, nodes, commit, run)
    nodes.append(NodeOutcome("verify", Operation.UP, Status.HEALTHY, note="answered 200"))
    entry = RunEntry(run, Operation.UP, RunResult.SUCCEEDED, commit, f"{UI}/runs/flow-run/{run}")
    record_history(records, env, entry, nodes, STACKS)


def build_records(tmp_path: Path) -> Records:
    """The records the module describes, in a folder store under `tmp_path`."""
    store = open_records(str(tmp_path / "records"))
    _environment(store, tmp_path, "staging-a", git={"branch": "main"})
    _environment(store, tmp_path, "pr-7", ttl_hours=2)
    outputs = {"app": {"url": "http://staging.example", "db_password": "[secret]"}}
    _deploy(store, "staging-a", DEPLOYED, "run-1", outputs)
    record_health(
        store, "staging-a", url="http://staging.example", path="/health", healthy=True,
        answer=200, detail="http://staging.example/health answered 200", commit=DEPLOYED,
        run="run-1",
    )  # fmt: skip
    record_migrations(store, "staging-a", 2, 1, DEPLOYED)
    follows = {"repository": "/srv/repo.git", "branch": "main", "review": False}
    sync.note_seen(store, "staging-a", DEPLOYED, follows)
    assert sync.begin(store, "staging-a", DEPLOYED, {"sync_run": None}, {})
    sync.finish(store, "staging-a", DEPLOYED, sync.Result.SUCCEEDED, "deployed", 60)
    sync.note_seen(store, "staging-a", REFUSED, follows)
    for _ in range(2):  # refused, then held; a second push of the same commit is refused again
        decided = sync.read(store, "staging-a")
        assert sync.begin(store, "staging-a", REFUSED, {"sync_run": None}, decided)
        sync.finish(store, "staging-a", REFUSED, sync.Result.REFUSED, REASON, 60)
    drift = NodeOutcome("app", Operation.DRIFT, Status.DRIFT)
    record_outcomes(store, "staging-a", [drift], DEPLOYED, "run-2")
    entry = RunEntry("run-2", Operation.DRIFT, RunResult.DRIFT, DEPLOYED)
    none = [NodeOutcome(s, Operation.DRIFT, Status.NO_DRIFT) for s in STACKS[:2]]
    record_history(store, "staging-a", entry, [*none, drift], STACKS)

    _deploy(store, "pr-7", "c" * 40, "run-3", {})
    failed = [NodeOutcome("app", Operation.UP, Status.FAILED, note="ECS said no")]
    record_outcomes(store, "pr-7", failed, "d" * 40, "run-4")
    ended = RunEntry("run-4", Operation.UP, RunResult.FAILED, "d" * 40, message="app: ECS said no")
    record_history(store, "pr-7", ended, failed, STACKS)
    record_health(
        store, "pr-7", url="http://pr-7.example", path="/health", healthy=False, answer=503,
        detail="http://pr-7.example/health answered 503", commit="c" * 40, run="run-3",
    )  # fmt: skip
    return store
