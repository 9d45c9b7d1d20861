"""Where state and records live, for real on each kind of backend: a folder, the session's
PostgreSQL, and S3 on the session's **local cloud** (moto on loopback, not AWS).

- Two projects sharing one backend keep their environments apart (records keyed by project).
- Records written before they were keyed move under the project named in stackflow.toml.
- One damaged record is named, and the rest of `status` (and the Prometheus text) still shows.
- No secret of the backend URL reaches the state folder, which is its owner's alone: the real
  engine deploys a stack (its `random` provider served by the local cloud) with a password in
  STACKFLOW_BACKEND_URL, after an older version left it in a workspace's Pulumi.yaml.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stackflow.backends import backend_for, open_records
from stackflow.engine import Listener, Operation, StackSpec
from stackflow.engine.automation import AutomationEngine
from stackflow.environment_records import (
    forget,
    list_environments,
    record_attempt,
    record_outcome,
    records_of,
)
from stackflow.localcloud.paths import pulumi_home
from stackflow.outcome import NodeOutcome, Status
from stackflow.postgres import PostgresServer
from stackflow.postgres.urls import pulumi_backend_url, records_url
from stackflow.records import Records
from stackflow.settings import Settings, get_settings
from stackflow.status.condition import Condition
from stackflow.status.metrics import prometheus
from stackflow.status.records import record_outcomes
from stackflow.status.report import collect
from tests.fixtures.localcloud import LocalCloud
from tests.fixtures.s3backend import s3_url

pytestmark = pytest.mark.integration

STACKS = ["front", "back"]  # a fixture graph's stacks: status rows only


def a_project(folder: Path, project: str) -> Path:
    """A project folder naming `project` in its stackflow.toml, with one environment, dev."""
    (folder / "environments").mkdir(parents=True, exist_ok=True)
    (folder / "environments" / "dev.toml").write_text('kind = "dev"\ncloud = "local"\n')
    (folder / "stackflow.toml").write_text(f'project = "{project}"\n')
    return folder


@pytest.fixture(params=["file", "postgres", "s3"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path, local_cloud: LocalCloud) -> str:
    """An empty backend of each kind, in the URL form the Pulumi CLI takes."""
    if request.param == "file":
        return f"file://{tmp_path / 'shared-backend'}"
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres")
        return pulumi_backend_url(server, request.getfixturevalue("fresh_database"))
    return s3_url(local_cloud, request.getfixturevalue("local_s3_bucket"), "team")


@pytest.fixture
def opened(backend_url: str, request: pytest.FixtureRequest) -> Callable[[str], Settings]:
    """Settings of a checkout naming `project`, on the shared backend; its records beside it (on
    PostgreSQL in the fresh database itself, as no `stackflow` database is made here)."""
    tmp_path: Path = request.getfixturevalue("tmp_path")
    records = None
    if backend_for(backend_url).name == "PostgreSQL":
        server: PostgresServer = request.getfixturevalue("postgres")
        records = records_url(server, request.getfixturevalue("fresh_database"))

    def settings(project: str) -> Settings:
        root = a_project(tmp_path / f"checkout-{project}", project)
        variables = {"STACKFLOW_BACKEND_URL": backend_url}
        if records is not None:
            variables["STACKFLOW_RECORDS_URL"] = records
        return get_settings("dev", project_dir=root, environ=variables)

    return settings


@pytest.fixture
def raw_store(opened: Callable[[str], Settings]) -> Iterator[Records]:
    """The shared store itself, keys as stored."""
    store = open_records(opened("any").resolved_records_url)
    try:
        yield store
    finally:
        store.close()


def deploy(records: Records, settings: Settings) -> None:
    """What an `up` of dev leaves in the records: its environment and each stack's outcome."""
    record_attempt(records, settings)
    record_outcomes(
        records, "dev", [NodeOutcome(s, Operation.UP, Status.UPDATED) for s in STACKS], None, None
    )
    record_outcome(records, settings, succeeded=True)


def test_two_projects_on_one_backend_keep_their_environments_apart(
    opened: Callable[[str], Settings], raw_store: Records
) -> None:
    one, other = opened("stackflow"), opened("other")
    assert one.resolved_records_url == other.resolved_records_url  # one store, shared
    mine, theirs = records_of(one), records_of(other)
    deploy(mine, one)
    deploy(theirs, other)
    assert {e.environment for e in collect(theirs, STACKS)} == {"dev"}

    forget(mine, "dev")  # the first project destroyed its dev
    record_outcomes(
        mine,
        "dev",
        [NodeOutcome(s, Operation.DESTROY, Status.DESTROYED) for s in STACKS],
        None,
        None,
    )

    assert [e.environment for e in collect(mine, STACKS)] == []
    [still] = collect(theirs, STACKS)
    assert (still.environment, still.condition) == ("dev", "ready")
    assert [r.name for r in list_environments(theirs)] == ["dev"]  # what the cleanup walks
    assert "projects/other/environments/dev" in raw_store.list()
    assert not [k for k in raw_store.list() if not k.startswith("projects/")]


def test_records_written_before_projects_had_keys_move_under_the_project_file_names(
    opened: Callable[[str], Settings], raw_store: Records
) -> None:
    # what the version before keyed records wrote: no project in the keys
    legacy = opened("legacy")
    deploy(raw_store, legacy)
    raw_store.put("drift/local/stackflow-app/dev", {"why": "drifted"}, expect_version=None)
    written = sorted(raw_store.list())
    assert "environments/dev" in written

    settings = opened("stackflow")  # stackflow.toml says project = "stackflow"
    mine = records_of(settings)
    assert sorted(raw_store.list()) == sorted(f"projects/stackflow/{k}" for k in written)
    [env] = collect(mine, STACKS)
    assert (env.environment, env.condition) == ("dev", "ready")
    assert mine.get("drift/local/stackflow-app/dev") is not None
    assert list_environments(records_of(opened("other"))) == []  # moved once, to one project
    again = records_of(settings)
    assert sorted(again.list()) == sorted(written)


def test_a_damaged_record_is_named_and_the_rest_of_status_still_shows(
    opened: Callable[[str], Settings], raw_store: Records, local_cloud: LocalCloud
) -> None:
    settings = opened("stackflow")
    records = records_of(settings)
    deploy(records, settings)
    other = settings.model_copy(update={"environment": "qa"})
    record_attempt(records, other)
    record_outcomes(
        records, "qa", [NodeOutcome(s, Operation.UP, Status.UPDATED) for s in STACKS], None, None
    )
    damage(raw_store, "projects/stackflow/stacks/dev/back", local_cloud)

    found = {e.environment: e for e in collect(records, STACKS)}
    assert found["dev"].condition is Condition.DAMAGED
    assert (
        "stacks/dev/back" in found["dev"].damaged and "nothing was changed" in found["dev"].damaged
    )
    assert found["qa"].condition == "ready" and not found["qa"].damaged
    text = prometheus(list(found.values()))
    assert 'stackflow_records_damaged{environment="dev"} 1' in text
    assert 'stackflow_stacks_active{environment="qa"} 2' in text
    assert [r.name for r in list_environments(records)] == ["dev", "qa"]


def damage(store: Records, key: str, cloud: LocalCloud) -> None:
    """Overwrite one record with what no stackflow writes, in the store's own medium."""
    kind = type(store).__name__
    if kind == "FileRecords":
        (Path(store.where) / f"{key}.json").write_text("{not json")
    elif kind == "PostgresRecords":
        store._run(  # type: ignore[attr-defined]
            "UPDATE stackflow_records SET value = '\"text\"'::jsonb WHERE key = %s",
            (key,),
            write=True,
        )
    else:
        s3 = store._s3  # type: ignore[attr-defined]
        s3.client.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}{key}.json", Body=b"{not json")


# --- no secret on disk ---------------------------------------------------------------------------


def tiny_program() -> dict[str, Any]:
    import pulumi_random as random

    return {"length": random.RandomPassword("word", length=12, special=False).length}


def everything_under(folder: Path) -> Iterator[Path]:
    yield folder
    yield from folder.rglob("*")


def test_no_secret_of_the_backend_url_reaches_the_state_folder_and_it_is_private(
    tmp_path: Path, postgres: PostgresServer, fresh_database: str, local_cloud: LocalCloud
) -> None:
    """The real CLI on the session's PostgreSQL, with a password in STACKFLOW_BACKEND_URL (the
    server trusts its socket, so the password is carried and never checked)."""
    canary = f"canary-{uuid.uuid4().hex}"
    plain = pulumi_backend_url(postgres, fresh_database)
    secret_url = plain.replace(f"{postgres.user}@", f"{postgres.user}:{canary}@", 1)
    state = tmp_path / "state"
    # what an older version left: the URL in a workspace's Pulumi.yaml, 0644 in 0755 folders
    old = state / "workspaces" / "local" / "demo-old" / "dev"
    old.mkdir(parents=True)
    for folder in (old, *[p for p in old.parents if p.is_relative_to(state)]):
        folder.chmod(0o755)
    (old / "Pulumi.yaml").write_text(
        f"name: demo-old\nruntime: python\nbackend:\n  url: {secret_url}\n"
    )
    (old / "Pulumi.yaml").chmod(0o644)
    home = pulumi_home(local_cloud.root)  # the CLI's own folder: credentials, selected stacks
    selected = home / "workspaces" / f"demo-old-{uuid.uuid4().hex}-workspace.json"
    selected.parent.mkdir(parents=True, exist_ok=True)
    selected.write_text(json.dumps({"stacks": {secret_url: "organization/demo-old/dev"}}))

    root = a_project(tmp_path / "checkout", "demo")
    settings = get_settings(
        "dev",
        project_dir=root,
        environ={"STACKFLOW_BACKEND_URL": secret_url},
        state_dir=state,
        records_url=records_url(postgres, fresh_database),
        localcloud={"dir": local_cloud.root, "port": local_cloud.port},
    )
    assert settings.backend_url == secret_url
    settings.state.check()  # as every run does first
    engine = AutomationEngine(settings)
    spec = StackSpec("demo", "dev", "pet", tiny_program)
    engine.run(Operation.UP, spec, Listener())
    assert engine.outputs(spec)["length"].value == 12  # deployed through the URL with a password
    records = records_of(settings)
    deploy(records, settings)
    assert [e.environment for e in collect(records, STACKS)] == ["dev"]

    assert_clean_and_private(state, canary, home)
    assert "backend" not in (old / "Pulumi.yaml").read_text()
    assert not selected.exists()  # its one selection was keyed by the URL with the password
    written = {p.name for p in engine.ws.work_dir(spec).iterdir()}
    assert {"Pulumi.yaml", "Pulumi.dev.yaml"} <= written
    assert os.environ.get("STACKFLOW_BACKEND_URL") != secret_url  # only the settings held it


def test_the_default_file_backend_and_records_in_the_state_folder_are_private(
    tmp_path: Path, local_cloud: LocalCloud
) -> None:
    """The one-person default: the Pulumi state and the records in the state folder, written by
    the real CLI and stackflow; the state passphrase is the secret that must not be found."""
    canary = f"canary-{uuid.uuid4().hex}"
    state = tmp_path / "state"
    settings = get_settings(
        "dev",
        project_dir=a_project(tmp_path / "checkout", "demo"),
        environ={"STACKFLOW_STATE_PASSPHRASE": canary},
        state_dir=state,
        localcloud={"dir": local_cloud.root, "port": local_cloud.port},
    )
    settings.state.check()
    engine = AutomationEngine(settings)
    spec = StackSpec("demo", "dev", "pet", tiny_program)
    engine.run(Operation.UP, spec, Listener())
    deploy(records_of(settings), settings)
    assert (state / "pulumi-local" / ".pulumi" / "stacks" / "demo-pet" / "dev.json").is_file()
    assert (state / "records" / "projects" / "demo" / "environments" / "dev.json").is_file()
    assert_clean_and_private(state, canary, pulumi_home(local_cloud.root))


def assert_clean_and_private(state: Path, canary: str, home: Path) -> None:
    """No file under the state folder or the CLI's home holds `canary`; the state folder is 0700
    and nothing in it is open to the group or others."""
    needle = canary.encode()
    leaks = [p for p in everything_under(state) if p.is_file() and needle in p.read_bytes()]
    leaks += [p for p in everything_under(home) if p.is_file() and needle in p.read_bytes()]
    assert leaks == []
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    shared = [
        f"{p.relative_to(state)} {stat.S_IMODE(p.lstat().st_mode):04o}"
        for p in everything_under(state)
        if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077
    ]
    assert shared == []
