"""Bad input: every case names what is wrong, exits non-zero and leaves state exactly as it was.

One `prod` environment is deployed once for the module (simulated stacks, real MariaDB schema, the
session's Prefect server); each case then runs against it and compares the state folder (every
file's name and bytes) and the schema history table before and after. Most cases call the CLI's
`main()` in this process (it returns the exit code); a few run `python flows/run.py` for real, and
a few call the flows with bad parameters, as the UI and schedules do.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flows.run import main
from stackflow.localdb import grant_database
from stackflow.localprefect import free_port
from stackflow.migrations import HistoryRecord
from stackflow.settings import MysqlTarget
from tests.faults.conftest import base_variables, use_variables
from tests.faults.helpers import (
    RUN_PY,
    schema_history,
    snapshot_files,
    subprocess_env,
)
from tests.fixtures.mariadb import LocalMariaDB

pytestmark = pytest.mark.faults

ENVIRONMENT = "prod"  # protected: destroy needs --yes, so that refusal is tested on real state
WRONG_PASSWORD = "Wrong-Db-Password-7d1e"
URL_PASSWORD = "UrlPassword-c0ffee"

# Migration folders by name: file name -> text.
FOLDERS: dict[str, dict[str, str]] = {
    "malformed": {
        "V001__create_hello_pulumi.sql": "CREATE TABLE hello (id INT);\n",
        "V2-add-index.sql": "CREATE INDEX i ON hello (id);\n",
    },
    "duplicate": {
        "V001__create_hello_pulumi.sql": "CREATE TABLE hello (id INT);\n",
        "V1__create_other.sql": "CREATE TABLE other (id INT);\n",
    },
    "empty": {},
    "comments_only": {"V002__nothing.sql": "-- TODO\n/* later */\n"},
    "delimiter": {
        "V002__proc.sql": "DELIMITER //\nCREATE PROCEDURE p() BEGIN SELECT 1; END//\n",
    },
    "readme_only": {"README.md": "migrations go here\n"},
}


@dataclass(frozen=True)
class Deployed:
    """The module's deployed environment."""

    state_dir: Path
    workdir: Path
    db: MysqlTarget
    variables: dict[str, str]
    folders: dict[str, Path]


@pytest.fixture(scope="module")
def deployed(
    tmp_path_factory: pytest.TempPathFactory, prefect_server: Any, mariadb: LocalMariaDB
) -> Iterator[Deployed]:
    """`prod` deployed once (simulated stacks; migrations applied for real to its own schema)."""
    base = tmp_path_factory.mktemp("bad-input")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with mariadb.admin() as conn:
        grant_database(conn, schema, mariadb.target.user)
    db = mariadb.target_for(schema)
    folders = {}
    for name, files in FOLDERS.items():
        folders[name] = base / "migrations" / name
        folders[name].mkdir(parents=True)
        for filename, text in files.items():
            (folders[name] / filename).write_text(text)
    folders["missing"] = base / "migrations" / "missing"
    variables = base_variables(base / "state", db) | {"STACKFLOW_ENVIRONMENT": ENVIRONMENT}
    workdir = base / "work"
    workdir.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        use_variables(mp, variables)
        mp.chdir(workdir)  # no stray .env is read
        assert main(["up", "--env", ENVIRONMENT]) == 0
        assert [r.version for r in schema_history(db)] == [1]
        yield Deployed(base / "state", workdir, db, variables, folders)
    with mariadb.admin() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{schema}`")


@dataclass(frozen=True)
class Case:
    """argv for `python flows/run.py`, extra variables (None: unset), the exit code and a regex
    the error must match (it names the variable, stack or file)."""

    id: str
    argv: tuple[str, ...]
    code: int
    names: str
    env: Mapping[str, str | None] | None = None
    folder: str | None = None  # STACKFLOW_MIGRATIONS_DIR: a folder of FOLDERS, or "missing"
    dotenv: str | None = None  # a .env file in the working folder
    leaks: tuple[str, ...] = ()  # values that must not be echoed


def _closed_port() -> int:
    return free_port()  # bound and released: nothing listens there


CASES = [
    # environment names (flag and variable)
    Case(
        "env-uppercase",
        ("up", "--env", "Prod"),
        2,
        r"STACKFLOW_ENVIRONMENT: environment name 'Prod' is not accepted",
    ),
    Case(
        "env-too-long",
        ("up", "--env", "a" * 21),
        2,
        r"STACKFLOW_ENVIRONMENT: environment name 'a{21}' is not accepted: use 1-20 characters",
    ),
    Case("env-underscore", ("preview", "--env", "dev_1"), 2, r"STACKFLOW_ENVIRONMENT: .*'dev_1'"),
    Case(
        "env-trailing-hyphen-destroy",
        ("destroy", "--env", "pr-", "--yes"),
        2,
        r"STACKFLOW_ENVIRONMENT: .*'pr-'",
    ),
    Case(
        "env-variable-with-space",
        ("up",),
        2,
        r"STACKFLOW_ENVIRONMENT: .*'prod env'",
        env={"STACKFLOW_ENVIRONMENT": "prod env"},
    ),
    # network
    Case(
        "cidr-not-a-cidr",
        ("up",),
        2,
        r"STACKFLOW_NETWORK_VPC_CIDR: 'banana' is not an IPv4 CIDR block",
        env={"STACKFLOW_NETWORK_VPC_CIDR": "banana"},
    ),
    Case(
        "cidr-too-large",
        ("up",),
        2,
        r"STACKFLOW_NETWORK_VPC_CIDR: VPC CIDR 10\.0\.0\.0/8 must be between /16 and /24",
        env={"STACKFLOW_NETWORK_VPC_CIDR": "10.0.0.0/8"},
    ),
    Case(
        "cidr-host-bits-set",
        ("preview",),
        2,
        r"STACKFLOW_NETWORK_VPC_CIDR: '10\.0\.0\.1/16' is not an IPv4 CIDR block",
        env={"STACKFLOW_NETWORK_VPC_CIDR": "10.0.0.1/16"},
    ),
    Case(
        "migration-cidr-bad",
        ("up",),
        2,
        r"STACKFLOW_NETWORK_MIGRATION_CIDRS: '10\.0\.0\.0/33' is not an IPv4 CIDR block",
        env={"STACKFLOW_NETWORK_MIGRATION_CIDRS": '["10.0.0.0/33"]'},
    ),
    Case(
        "region-unknown",
        ("up",),
        2,
        r"STACKFLOW_AWS_REGION: 'eu-west' is not an AWS region name",
        env={"STACKFLOW_AWS_REGION": "eu-west"},
    ),
    Case(
        "region-uppercase",
        ("up",),
        2,
        r"STACKFLOW_AWS_REGION: 'EU-WEST-1' is not an AWS region name",
        env={"STACKFLOW_AWS_REGION": "EU-WEST-1"},
    ),
    # counts
    Case(
        "az-count-one",
        ("up",),
        2,
        r"STACKFLOW_NETWORK_AZ_COUNT: Input should be greater than or equal to 2",
        env={"STACKFLOW_NETWORK_AZ_COUNT": "1"},
    ),
    Case(
        "az-count-word",
        ("up",),
        2,
        r"STACKFLOW_NETWORK_AZ_COUNT: Input should be a valid integer",
        env={"STACKFLOW_NETWORK_AZ_COUNT": "two"},
    ),
    Case(
        "desired-count-negative",
        ("up",),
        2,
        r"STACKFLOW_APP_DESIRED_COUNT: Input should be greater than or equal to 0",
        env={"STACKFLOW_APP_DESIRED_COUNT": "-1"},
    ),
    Case(
        "desired-count-too-many",
        ("up",),
        2,
        r"STACKFLOW_APP_DESIRED_COUNT: Input should be less than or equal to 100",
        env={"STACKFLOW_APP_DESIRED_COUNT": "101"},
    ),
    Case(
        "stack-retries-too-many",
        ("up",),
        2,
        r"STACKFLOW_STACK_RETRIES: Input should be less than or equal to 10",
        env={"STACKFLOW_STACK_RETRIES": "11"},
    ),
    Case(
        "app-cpu-in-dotenv",
        ("up",),
        2,
        r"STACKFLOW_APP_CPU: 300 is not a Fargate CPU size",
        dotenv="STACKFLOW_APP_CPU=300\n",
    ),
    Case(
        "kind-unknown",
        ("up",),
        2,
        r"STACKFLOW_KIND: Input should be 'dev', 'staging', 'prod' or 'ephemeral'",
        env={"STACKFLOW_KIND": "production"},
    ),
    Case(
        "latency-not-json",
        ("up",),
        2,
        r"STACKFLOW_SIM_LATENCY_S: not valid JSON",
        env={"STACKFLOW_SIM_LATENCY_S": "{database: 3}"},
    ),
    # stacks and commands
    Case(
        "unknown-stack",
        ("up", "--stacks", "app,cache"),
        2,
        r"unknown stack 'cache'; accepted: networking, database, migrate, app, verify",
    ),
    Case(
        "unknown-stack-case-destroy",
        ("destroy", "--stacks", "App", "--yes"),
        2,
        r"unknown stack 'App'",
    ),
    Case("unknown-engine", ("up", "--engine", "pulumi"), 2, r"--engine: invalid choice: 'pulumi'"),
    Case("unknown-command", ("deploy",), 2, r"invalid choice: 'deploy'"),
    Case(
        "destroy-prod-unconfirmed",
        ("destroy",),
        2,
        r"environment 'prod' is prod: destroying it needs explicit confirmation \(CLI: --yes",
    ),
    # secrets and backends
    Case(
        "aws-cloud-without-passphrase",
        ("up", "--engine", "automation", "--cloud", "aws"),
        2,
        r"the aws cloud needs STACKFLOW_STATE_PASSPHRASE",
        env={"STACKFLOW_STATE_PASSPHRASE": None},
    ),
    Case(
        "passphrase-missing-up",
        ("up",),
        1,
        r"STACKFLOW_STATE_PASSPHRASE is not set, but the stacks in .* hold secrets sealed with a",
        env={"STACKFLOW_STATE_PASSPHRASE": None},
    ),
    Case(
        "passphrase-missing-outputs",
        ("outputs",),
        2,
        r"STACKFLOW_STATE_PASSPHRASE is not set",
        env={"STACKFLOW_STATE_PASSPHRASE": None},
    ),
    Case(
        "passphrase-wrong-up",
        ("up",),
        1,
        r"stack 'prod/database': .*incorrect passphrase.*STACKFLOW_STATE_PASSPHRASE differs",
        env={"STACKFLOW_STATE_PASSPHRASE": "not-the-passphrase"},
    ),
    Case(
        "backend-unknown-scheme",
        ("up",),
        2,
        r"STACKFLOW_BACKEND_URL: 'ftp://state\.example' is not a Pulumi backend URL",
        env={"STACKFLOW_BACKEND_URL": "ftp://state.example"},
    ),
    Case(
        "backend-s3-without-bucket",
        ("up",),
        2,
        r"STACKFLOW_BACKEND_URL: 's3:///stackflow' names no bucket",
        env={"STACKFLOW_BACKEND_URL": "s3:///stackflow"},
    ),
    Case(
        "backend-cloud-without-token",
        ("up",),
        2,
        r"backend https://\.\.\. \(Pulumi Cloud\) needs STACKFLOW_PULUMI_ACCESS_TOKEN",
        env={"STACKFLOW_BACKEND_URL": "https://api.pulumi.com"},
    ),
    Case(
        "sim-mysql-url-not-mysql",
        ("up",),
        2,
        r"STACKFLOW_SIM_MYSQL_URL: database URL must start with mysql://",
        env={"STACKFLOW_SIM_MYSQL_URL": f"postgres://u:{URL_PASSWORD}@127.0.0.1/app"},
        leaks=(URL_PASSWORD,),
    ),
    # databases
    Case(
        "database-url-not-mysql",
        ("migrate", "--database-url", f"postgres://u:{URL_PASSWORD}@127.0.0.1/app"),
        2,
        r"--database-url / STACKFLOW_DATABASE_URL: database URL must start with mysql://",
        leaks=(URL_PASSWORD,),
    ),
    Case(
        "database-unreachable",
        ("migrate",),
        1,
        r"u@127\.0\.0\.1:\d+/app did not accept connections within 1s .*Can't connect",
        env={
            "STACKFLOW_DATABASE_URL": f"mysql://u:{URL_PASSWORD}@127.0.0.1:{_closed_port()}/app",
            "STACKFLOW_MIGRATIONS_WAIT_TIMEOUT_S": "1",
        },
        leaks=(URL_PASSWORD,),
    ),
    Case(
        "database-wrong-password",
        ("migrate",),
        1,
        r"access denied for stackflow_test@127\.0\.0\.1:\d+/t_\w+: check the user name and password",
        env={"STACKFLOW_DATABASE_URL": "<wrong password>"},
        leaks=(WRONG_PASSWORD,),
    ),
    # migration files
    Case(
        "migration-malformed-name",
        ("migrate",),
        2,
        r"V2-add-index\.sql: malformed migration file name; accepted: V<version>__<description>\.sql",
        folder="malformed",
    ),
    Case(
        "migration-duplicate-version",
        ("migrate", "--status"),
        2,
        r"V1__create_other\.sql: duplicate version 1 \(also V001__create_hello_pulumi\.sql\)",
        folder="duplicate",
    ),
    Case(
        "migration-folder-empty",
        ("migrate",),
        2,
        r"migrations folder \S+/empty has no migration files",
        folder="empty",
    ),
    Case(
        "migration-folder-without-sql",
        ("migrate",),
        2,
        r"migrations folder \S+/readme_only has no migration files",
        folder="readme_only",
    ),
    Case(
        "migration-folder-missing",
        ("migrate",),
        2,
        r"migrations folder \S+/missing does not exist",
        folder="missing",
    ),
    Case(
        "migration-comments-only",
        ("migrate",),
        2,
        r"V002__nothing\.sql: has no SQL statements",
        folder="comments_only",
    ),
    Case(
        "migration-delimiter",
        ("migrate",),
        2,
        r"V002__proc\.sql: line 1: DELIMITER is a mysql client command",
        folder="delimiter",
    ),
    Case(
        "up-with-duplicate-migration",
        ("up",),
        1,
        r"^error: migrate: \S+/V1__create_other\.sql: duplicate version 1",
        folder="duplicate",
    ),
    Case(
        "up-with-empty-migration-folder",
        ("up",),
        1,
        r"^error: migrate: migrations folder \S+/empty has no migration files",
        folder="empty",
    ),
]


def _variables(deployed: Deployed, case: Case) -> dict[str, str | None]:
    extra: dict[str, str | None] = dict(case.env or {})
    if extra.get("STACKFLOW_DATABASE_URL") == "<wrong password>":
        t = deployed.db
        extra["STACKFLOW_DATABASE_URL"] = (
            f"mysql://{t.user}:{WRONG_PASSWORD}@{t.host}:{t.port}/{t.database}"
        )
    if case.folder is not None:
        extra["STACKFLOW_MIGRATIONS_DIR"] = str(deployed.folders[case.folder])
    return extra


def _unchanged(deployed: Deployed, files: dict[str, bytes], history: list[HistoryRecord]) -> None:
    after = snapshot_files(deployed.state_dir)
    changed = sorted(k for k in files.keys() | after.keys() if files.get(k) != after.get(k))
    assert not changed, f"the state folder changed: {changed}"
    assert schema_history(deployed.db) == history, "the schema history changed"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_named_and_changes_nothing_simulated(
    case: Case,
    deployed: Deployed,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`main(argv)` with one bad value against a deployed (simulated) environment: exit code as
    expected, the error names the problem, no traceback, no secret echoed, state unchanged."""
    # main() writes --env/--engine into os.environ: setting them here first makes them restored.
    use_variables(monkeypatch, deployed.variables)
    monkeypatch.chdir(deployed.workdir)
    for key, value in _variables(deployed, case).items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    dotenv = deployed.workdir / ".env"
    if case.dotenv is not None:
        dotenv.write_text(case.dotenv)
    files, history = snapshot_files(deployed.state_dir), schema_history(deployed.db)
    assert files and history, "nothing deployed to compare against"
    capsys.readouterr()
    try:
        code = main(list(case.argv))
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        dotenv.unlink(missing_ok=True)
    out = capsys.readouterr()

    shown = f"exit {code}\n--- stdout\n{out.out}\n--- stderr\n{out.err}"
    assert code == case.code, shown
    # the last line says why (a settings error lists one variable per line, under "error:")
    assert "error:" in out.err, shown
    assert re.search(case.names, out.err.rstrip().splitlines()[-1]), shown
    assert "Traceback" not in out.out + out.err, shown
    for value in case.leaks:
        assert value not in out.out + out.err, f"{value!r} was echoed:\n{shown}"
    _unchanged(deployed, files, history)


SUBPROCESS_CASES = [
    (("up", "--env", "Prod"), 2, r"STACKFLOW_ENVIRONMENT: environment name 'Prod' is not accepted"),
    (("up", "--stacks", "app,cache"), 2, r"unknown stack 'cache'"),
    (("destroy",), 2, r"environment 'prod' is prod: destroying it needs explicit confirmation"),
]


def test_bad_input_through_the_real_cli_process_simulated(deployed: Deployed) -> None:
    """`python flows/run.py` as a process (three at once): the process exit code, the last line of
    stderr names the problem, and the (simulated) state and schema history are unchanged."""
    files, history = snapshot_files(deployed.state_dir), schema_history(deployed.db)
    env = subprocess_env(deployed.variables)
    procs = [
        subprocess.Popen(
            [sys.executable, str(RUN_PY), *argv],
            env=env,
            cwd=deployed.workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for argv, _, _ in SUBPROCESS_CASES
    ]
    for proc, (argv, code, names) in zip(procs, SUBPROCESS_CASES, strict=True):
        out, err = proc.communicate(timeout=120)
        shown = f"{' '.join(argv)} -> exit {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"
        assert proc.returncode == code, shown
        assert "error: " in err and re.search(names, err.rstrip().splitlines()[-1]), shown
        assert "Traceback" not in out + err, shown
    _unchanged(deployed, files, history)


@pytest.mark.parametrize(
    ("flow", "parameters", "names"),
    [
        ("deploy", {"environment": "Prod"}, r"environment name 'Prod' is not accepted"),
        ("preview", {"environment": "a" * 21}, r"environment name 'a{21}' is not accepted"),
        (
            "deploy",
            {"environment": ENVIRONMENT, "stacks": ["cache"]},
            r"stacks\.0: Input should be 'networking', 'database', 'migrate', 'app' or 'verify'",
        ),
        (
            "destroy",
            {"environment": ENVIRONMENT},
            r"environment 'prod' is prod: destroying it needs explicit confirmation",
        ),
    ],
    ids=[
        "deploy-bad-environment",
        "preview-long-environment",
        "deploy-unknown-stack",
        "destroy-prod-unconfirmed",
    ],
)
def test_bad_flow_parameters_fail_the_run_and_change_nothing_simulated(
    flow: str,
    parameters: dict[str, Any],
    names: str,
    deployed: Deployed,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flow called with a bad parameter (as from the UI or a schedule) ends Failed with a message
    naming the parameter's problem; the simulated state and schema history are unchanged."""
    from flows.pipeline import FLOWS

    use_variables(monkeypatch, deployed.variables)
    files, history = snapshot_files(deployed.state_dir), schema_history(deployed.db)
    name = {"deploy": "up"}.get(flow, flow)
    state = FLOWS[name](**parameters, return_state=True)
    assert state.is_failed(), state
    assert re.search(names, str(state.message), re.DOTALL), state.message
    _unchanged(deployed, files, history)
