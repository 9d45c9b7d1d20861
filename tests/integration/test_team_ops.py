"""Team operations on the real engine, the session's **local cloud** (moto on loopback, not AWS)
and the session's real PostgreSQL: a one-person setup (file backend and records in its state
folder, its own passphrase) moved into a team backend on PostgreSQL with another passphrase
(`team import`), and the team's passphrase rotated (`team rotate-passphrase`).

One environment is deployed once for the module, networking only (the cheapest stack), beside it
in the same file backend a probe stack with one secret output and no resources (networking holds
no secret, and the secrets are what must be re-encrypted); the tests run in file order on them:
the import first, then the refusals, then the rotation.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stackflow.audit import HEAD_KEY
from stackflow.backends import open_blobs, open_records
from stackflow.engine.checkpoints import Checkpoint, CheckpointReader
from stackflow.engine.pulumisecrets import passphrase_opens, passphrase_salt
from stackflow.postgres import PostgresServer, create_database, drop_database
from stackflow.postgres.urls import pulumi_backend_url, records_url
from stackflow.records.projects import ProjectRecords
from tests.realenv import cli, process_env, real_variables, summary_of, unique

# The longer tier (`-m slow`, which .ci/run also runs): team operations are issue 21's point 7,
# beyond the default run's 15-minute budget on 2 cores.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

OLD = f"one-person-{uuid.uuid4().hex}"  # the one-person setup's passphrase
TEAM = f"team-{uuid.uuid4().hex}"  # the team's, after the import
ROTATED = f"rotated-{uuid.uuid4().hex}"  # the team's, after the rotation
PROJECT = "stackflow-networking"
PROBE = "stackflow-probe"  # a stack of the same folder holding a secret output (no resources)
TOKEN = f"token-{uuid.uuid4().hex}"


@dataclass
class Setup:
    """The one-person deploy and the team's backend it moves into."""

    environment: str
    state: Path
    one_person: dict[str, str]  # the one-person setup's variables
    team: dict[str, str]  # the team's variables (same state folder: the same machine)
    backend: str  # the team's Pulumi backend
    records: str  # the team's records store
    outputs: str  # the one-person `outputs --json`, before the move

    def run(self, *args: str, env: dict[str, str] | None = None, **extra: str) -> Any:
        return cli(process_env(env or self.team, **extra), *args)

    def checkpoint(self, backend: str | None = None) -> Checkpoint:
        with CheckpointReader(backend or self.backend) as reader:
            found = reader.checkpoint(PROJECT, self.environment)
        assert found is not None
        return found


def salt(found: Checkpoint) -> str:
    value = passphrase_salt(found.secrets_provider)
    assert value is not None, found.secrets_provider
    return value


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
    local_cloud: Any,
    prefect_server: Any,
    postgres: PostgresServer,
) -> Iterator[Setup]:
    """`up --stacks networking` one-person style on the local cloud, and a team backend (a fresh
    Pulumi database and records database on the session's PostgreSQL)."""
    state = tmp_path_factory.mktemp("one-person") / "state"
    environment = unique("dev")
    one_person = {**real_variables(state, local_cloud, prefect_server)}
    one_person["STACKFLOW_STATE_PASSPHRASE"] = OLD
    up = cli(process_env(one_person), "up", "--env", environment, "--stacks", "networking")
    assert up.returncode == 0, up.stdout + up.stderr
    shown = cli(process_env(one_person), "outputs", "--env", environment, "--json")
    secret_stack(f"file://{state / 'pulumi-local'}", environment, local_cloud.root)
    tag = uuid.uuid4().hex[:10]
    databases = (f"pulumi_{tag}", f"records_{tag}")
    for name in databases:
        create_database(postgres, name)
    backend = pulumi_backend_url(postgres, databases[0])
    records = records_url(postgres, databases[1])
    team = {
        **one_person,
        "STACKFLOW_BACKEND_URL": backend,
        "STACKFLOW_RECORDS_URL": records,
        "STACKFLOW_STATE_PASSPHRASE": TEAM,
        "STACKFLOW_FROM_STATE_PASSPHRASE": OLD,
    }
    try:
        yield Setup(environment, state, one_person, team, backend, records, shown.stdout)
    finally:
        for name in databases:
            drop_database(postgres, name)


def no_secret_in(*runs: Any) -> None:
    for run in runs:
        for secret in (OLD, TEAM, ROTATED):
            assert secret not in run.stdout + run.stderr, run.args


def test_import_moves_stacks_and_records_then_a_team_run_skips_the_stack_with_no_engine_call(
    setup: Setup,
) -> None:
    """Local cloud: the folder's stacks move into the team's PostgreSQL backend, the probe's secret
    re-encrypted for the team's passphrase (never in plaintext there) and networking's stamp sealed
    again, every record moves
    (create-only: a team record that differs is kept), a team run skips the stack (0 engine
    calls) with the same outputs, and a second import changes nothing."""
    folder = ProjectRecords(open_records(str(setup.state / "records")), "stackflow")
    assert HEAD_KEY in folder.list()  # the folder's own audit log, which stays with the folder
    keys = [k for k in folder.list() if k != HEAD_KEY]
    assert any(k.startswith("environments/") for k in keys), keys
    team_store = ProjectRecords(open_records(setup.records), "stackflow")
    kept = keys[-1]
    team_store.put(kept, {"the team's": "own"}, expect_version=None)
    source = setup.checkpoint(f"file://{setup.state / 'pulumi-local'}")

    moved = setup.run("team", "import", "--from-state", str(setup.state))
    print(moved.stdout)  # what a user reads (shown when a test fails, or with -s)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert f"stack  {PROJECT}/{setup.environment}" in moved.stdout
    assert "moved (0 secret(s) encrypted for the team; stamp sealed again" in moved.stdout
    assert re.search(rf"{PROBE}/{setup.environment} +moved \(1 secret\(s\) encrypted", moved.stdout)
    assert "kept the team's" in moved.stdout
    assert "moved 2 of 2 stack(s)" in moved.stdout

    target = setup.checkpoint()
    assert (target.manifest_time, target.resource_count) == (
        source.manifest_time,
        source.resource_count,
    )
    assert passphrase_opens(salt(target), TEAM) and not passphrase_opens(salt(target), OLD)
    assert opens(setup, TEAM) and not opens(setup, OLD)  # the secret, re-encrypted by the CLI
    with CheckpointReader(setup.backend) as reader:
        assert reader.all_stacks() == sorted(
            [(PROJECT, setup.environment), (PROBE, setup.environment)]
        )
    blobs = open_blobs(setup.backend)
    assert not [b.key for b in blobs.under(".pulumi/") if TOKEN.encode() in b.data]
    blobs.close()
    for key in keys:
        found = team_store.get(key)
        assert found is not None, key
        if key != kept:
            assert found.value == folder.get(key).value, key  # type: ignore[union-attr]
    assert team_store.get(kept).value == {"the team's": "own"}  # type: ignore[union-attr]

    log = json.loads(setup.run("audit", "--json").stdout)  # the team's log starts with the team
    assert log["holds"] and [e["action"] for e in log["entries"]] == ["state.imported"]
    assert set(log["entries"][0]["details"]["stacks"]) == {
        f"{PROJECT}/{setup.environment}",
        f"{PROBE}/{setup.environment}",
    }

    up = setup.run("up", "--env", setup.environment, "--stacks", "networking")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "engine operations: 0" in up.stdout
    assert summary_of(up)["networking"] == "unchanged"
    shown = setup.run("outputs", "--env", setup.environment, "--json")
    assert shown.stdout == setup.outputs

    again = setup.run("team", "import", "--from-state", str(setup.state))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already moved" in again.stdout and "moved 0 of 2 stack(s)" in again.stdout
    assert setup.checkpoint().manifest_time == target.manifest_time
    no_secret_in(moved, up, again)
    team_store.close()


def test_import_refuses_a_wrong_passphrase_and_another_stack_of_the_same_name(
    setup: Setup, postgres: PostgresServer
) -> None:
    """Local cloud: a passphrase that does not open the folder's stacks, and a team backend that
    holds another stack of the same name, are refused naming them; nothing moves."""
    wrong = setup.run(
        "team",
        "import",
        "--from-state",
        str(setup.state),
        STACKFLOW_FROM_STATE_PASSPHRASE="not-the-one-person-passphrase",
    )
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    assert "STACKFLOW_FROM_STATE_PASSPHRASE does not open" in wrong.stderr
    assert f"{PROJECT}/{setup.environment}" in wrong.stderr

    tag = uuid.uuid4().hex[:10]
    other, other_records = f"pulumi_{tag}", f"records_{tag}"
    for name in (other, other_records):
        create_database(postgres, name)
    try:
        backend = pulumi_backend_url(postgres, other)
        another_stack(backend, setup.environment, Path(setup.team["STACKFLOW_LOCALCLOUD_DIR"]))
        before = setup.checkpoint(backend)
        env = {
            **setup.team,
            "STACKFLOW_BACKEND_URL": backend,
            "STACKFLOW_RECORDS_URL": records_url(postgres, other_records),
        }
        refused = setup.run("team", "import", "--from-state", str(setup.state), env=env)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "another stack of that name" in refused.stderr
        assert "Nothing was changed" in refused.stderr
        assert setup.checkpoint(backend) == before
        with CheckpointReader(backend) as reader:
            assert reader.all_stacks() == [(PROJECT, setup.environment)]  # the probe stayed out
        assert open_records(records_url(postgres, other_records)).list() == []
        no_secret_in(wrong, refused)
    finally:
        for name in (other, other_records):
            drop_database(postgres, name)


def pulumi_env(backend: str, passphrase: str, cloud_root: Path) -> dict[str, str]:
    from stackflow.localcloud.paths import pulumi_home

    return {
        "PULUMI_BACKEND_URL": backend,
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_HOME": str(pulumi_home(cloud_root)),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }


def deploy(project: str, program: Any, backend: str, environment: str, env: dict[str, str]) -> None:
    """A stack of `project` deployed by the real CLI with an inline program (no resources)."""
    import pulumi.automation as auto

    from stackflow.engine.automation import find_pulumi_cli

    auto.create_stack(
        stack_name=environment,
        project_name=project,
        program=program,
        opts=auto.LocalWorkspaceOptions(
            env_vars=env,
            project_settings=auto.ProjectSettings(name=project, runtime="python"),
            secrets_provider="passphrase",
            pulumi_command=find_pulumi_cli(),
        ),
    ).up()


def secret_stack(backend: str, environment: str, cloud_root: Path) -> None:
    """The folder's second stack: one secret output, encrypted under the one-person passphrase."""
    import pulumi

    def program() -> None:
        pulumi.export("token", pulumi.Output.secret(TOKEN))

    deploy(PROBE, program, backend, environment, pulumi_env(backend, OLD, cloud_root))


def another_stack(backend: str, environment: str, cloud_root: Path) -> None:
    """A stack of the same project and name deployed by someone else (no resources: one update)."""
    env = pulumi_env(backend, "someone else's", cloud_root)
    deploy(PROJECT, lambda: None, backend, environment, env)


def secret_output(setup: Setup, passphrase: str) -> subprocess.CompletedProcess[str]:
    """The real CLI reading the probe stack's secret output from the team's backend in a fresh
    workspace (no salt of its own: it takes the checkpoint's), which decrypts it."""
    from stackflow.pulumi_cli import find_cli

    cli_path = find_cli()
    assert cli_path is not None
    work = setup.state.parent / f"probe-{uuid.uuid4().hex[:6]}"
    work.mkdir()
    (work / "Pulumi.yaml").write_text(f"name: {PROBE}\nruntime: python\n")
    env = {
        **pulumi_env(setup.backend, passphrase, Path(setup.team["STACKFLOW_LOCALCLOUD_DIR"])),
        "PATH": "/usr/bin:/bin",
        "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
    }
    args = ["--non-interactive", "stack", "output", "--show-secrets", "--json"]
    return subprocess.run(
        [str(cli_path), *args, "--stack", setup.environment],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def opens(setup: Setup, passphrase: str) -> bool:
    """Whether `passphrase` decrypts the probe's secret (the real CLI); a wrong one is refused
    as the CLI refuses it."""
    read = secret_output(setup, passphrase)
    if read.returncode == 0:
        assert json.loads(read.stdout) == {"token": TOKEN}, read.stdout
        return True
    assert "incorrect passphrase" in read.stderr, read.stderr
    return False


def test_rotation_re_keys_every_stack_and_an_up_with_the_new_passphrase_changes_nothing(
    setup: Setup,
) -> None:
    """Local cloud: `team rotate-passphrase` with the new passphrase on standard input re-encrypts
    the team's stacks; the old passphrase no longer opens them (the real CLI refuses to decrypt the
    probe's secret with it), the new one does; an `up --force` on this machine, whose workspace still
    caches the one-person salt, runs the engine and changes nothing; an `up` skips; a second
    rotation and a bad new passphrase change nothing."""
    short = setup.run("team", "rotate-passphrase", STACKFLOW_NEW_STATE_PASSPHRASE="too-short")
    assert short.returncode == 2 and "shorter than 12" in short.stderr, short.stderr
    assert passphrase_opens(salt(setup.checkpoint()), TEAM)

    rotated = subprocess.run(
        [*short.args[:2], "team", "rotate-passphrase"],
        env=process_env(setup.team),
        input=f"{ROTATED}\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(rotated.stdout)
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    assert "re-encrypted 2 of 2 stack(s)" in rotated.stdout
    found = setup.checkpoint()
    assert passphrase_opens(salt(found), ROTATED) and not passphrase_opens(salt(found), TEAM)
    assert opens(setup, ROTATED) and not opens(setup, TEAM)

    team = {**setup.team, "STACKFLOW_STATE_PASSPHRASE": ROTATED}
    forced = setup.run(
        "up", "--env", setup.environment, "--stacks", "networking", "--force", "--json", env=team
    )
    assert forced.returncode == 0, forced.stdout + forced.stderr
    summary = json.loads(forced.stdout)
    assert len(summary["engine_calls"]) == 1, summary["engine_calls"]
    changes = summary["stacks"][0]["changes"]
    assert changes["same"] > 0 and changes["create"] == changes["update"] == 0, changes
    assert changes["replace"] == changes["delete"] == 0, changes
    skipped = setup.run("up", "--env", setup.environment, "--stacks", "networking", env=team)
    assert "engine operations: 0" in skipped.stdout, skipped.stdout

    # the same rotation again (a second run, or one that stopped half-way): nothing to do
    before = setup.checkpoint()
    again = setup.run("team", "rotate-passphrase", STACKFLOW_NEW_STATE_PASSPHRASE=ROTATED)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already on the new passphrase" in again.stdout and "re-encrypted 0 of 2" in again.stdout
    assert setup.checkpoint().manifest_time == before.manifest_time
    log = setup.run("audit", "--json", env=team)
    assert log.returncode == 0, log.stdout + log.stderr
    rotations = [
        e for e in json.loads(log.stdout)["entries"] if e["action"] == "passphrase.rotated"
    ]
    assert [sorted(set(e["details"]["stacks"].values())) for e in rotations] == [
        ["re-encrypted under the new passphrase"],
        ["already on the new passphrase"],
    ]
    no_secret_in(short, rotated, forced, skipped, again, log)
