"""Bad input: every case names what is wrong, exits non-zero and leaves state exactly as it was.

One `prod-*` environment is deployed once for the module on the session's **local cloud** (the
real Pulumi engine: its networking and database stacks, with a state passphrase of its own, and its
migrations applied to its own MariaDB server); each case then runs against it and compares the state
folder (every file's name and bytes) and the environment database's schema history table before and
after. What the environment deploys is its own file in the module's project
(`environments/<name>.toml`): a case about a bad value writes that file, and the next case gets
it back as deployed. Most cases call the CLI's `main()` in this process (it returns the exit
code); a few run `python flows/run.py` for real, and a few call the flows with bad parameters or
a bad file, as the UI and schedules do.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from stackflow.audit.chain import Entry
from stackflow.localcloud.paths import passphrase as cloud_passphrase
from stackflow.migrator.history import HistoryRecord
from stackflow.migrator.target import MysqlTarget
from stackflow.processes import free_port
from tests.faults.conftest import fault_variables
from tests.faults.helpers import (
    RUN_PY,
    FaultEnv,
    schema_history,
    snapshot_files,
    subprocess_env,
    use_variables,
    variables_set,
)
from tests.realenv import declare, unique

pytestmark = pytest.mark.faults

# protected: destroy needs --yes, so that refusal is tested on real state
ENVIRONMENT = unique("prod")
PASSPHRASE = "bad-input-passphrase-4b1d"  # the passphrase the module's stacks were deployed with
WRONG_PASSPHRASE = "not-the-passphrase-93ac"
WRONG_PASSWORD = "Wrong-Db-Password-7d1e"
URL_PASSWORD = "UrlPassword-c0ffee"
FILE = rf"environments/{ENVIRONMENT}\.toml"  # how refusals name the environment's file
# The environment's file as deployed: the cases are about other refusals, and without a terminal
# prod's approval gate would refuse every `up` first (the "up-prod-without-terminal" cases lift
# this line again). Lowering a prod environment's protection needs a reason in its file.
DEPLOYED: dict[str, Any] = {
    "approval": {"required": False, "unprotect": "the cases test other refusals"}
}

# Migration folders by name: file name -> text.
# The project's first migration as the environment applied it (same checksum), for folders that
# must not read as "an applied file is missing"
V001 = (
    Path(__file__).resolve().parents[2] / "migrations" / "V001__create_hello_pulumi.sql"
).read_text()
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
    "unterminated": {
        "V001__create_hello_pulumi.sql": V001,
        "V002__proc.sql": "INSERT INTO hello VALUES ('oops);\n",
    },
    "readme_only": {"README.md": "migrations go here\n"},
}


@dataclass(frozen=True)
class Deployed:
    """The module's deployed environment."""

    state_dir: Path
    workdir: Path
    db: MysqlTarget  # the environment's own database, from its outputs
    variables: dict[str, str]
    folders: dict[str, Path]
    secrets: tuple[str, ...]  # never echoed: the passphrases and the database's password


@pytest.fixture(scope="module")
def deployed(
    tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any
) -> Iterator[Deployed]:
    """`prod-*` deployed once on the local cloud: its networking and database stacks (with the
    passphrase PASSPHRASE) and its migrations, on its own database server (the app stack is not
    needed: no case gets past the database)."""
    base = tmp_path_factory.mktemp("bad-input")
    folders = {}
    for name, files in FOLDERS.items():
        folders[name] = base / "migrations" / name
        folders[name].mkdir(parents=True)
        for filename, text in files.items():
            (folders[name] / filename).write_text(text)
    folders["missing"] = base / "migrations" / "missing"
    state_dir = base / "state"
    variables = fault_variables(state_dir, local_cloud, prefect_server) | {
        "STACKFLOW_STATE_PASSPHRASE": PASSPHRASE,
    }
    declare(variables, ENVIRONMENT, **DEPLOYED)
    workdir = base / "work"
    workdir.mkdir()
    env = FaultEnv(state_dir, workdir, ENVIRONMENT, variables, local_cloud)
    with variables_set(variables), pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir)  # no stray .env is read
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["up", "--env", ENVIRONMENT, "--stacks", "networking,database,migrate"])
        assert code == 0, f"{out.getvalue()}\n{err.getvalue()}"
        db = env.database()
        assert [r.version for r in schema_history(db)] == [1]
        secrets = (PASSPHRASE, cloud_passphrase(local_cloud.root), db.password.get_secret_value())
        yield Deployed(state_dir, workdir, db, variables, folders, secrets)


@dataclass(frozen=True)
class Case:
    """argv for `python flows/run.py`, extra variables (None: unset), the exit code and a regex
    the error must match (it names the variable, stack, or file and key)."""

    id: str
    argv: tuple[str, ...]
    code: int
    names: str
    env: Mapping[str, str | None] | None = None
    folder: str | None = None  # [migrations] dir of the file: a folder of FOLDERS, or "missing"
    file: Mapping[str, Any] | None = None  # sections over DEPLOYED in the file (None: removed)
    dotenv: str | bytes | None = None  # a .env file in the working folder
    leaks: tuple[str, ...] = ()  # values that must not be echoed


def at(*argv: str) -> tuple[str, ...]:
    """A command of the deployed environment: `argv` with --env ENVIRONMENT."""
    return (*argv, "--env", ENVIRONMENT)


def _closed_port() -> int:
    return free_port()  # bound and released: nothing listens there


CASES = [
    # environment names: the flag (a variable no longer chooses one)
    Case(
        "env-uppercase",
        ("up", "--env", "Prod"),
        2,
        r"environment \(--env\): environment name 'Prod' is not accepted",
    ),
    Case(
        "env-too-long",
        ("up", "--env", "a" * 21),
        2,
        r"environment \(--env\): environment name 'a{21}' is not accepted: use 1-20 characters",
    ),
    Case("env-underscore", ("preview", "--env", "dev_1"), 2, r"environment \(--env\): .*'dev_1'"),
    Case(
        "env-trailing-hyphen-destroy",
        ("destroy", "--env", "pr-", "--yes"),
        2,
        r"environment \(--env\): .*'pr-'",
    ),
    # variables that name what an environment deploys: refused, naming the file's key instead
    Case(
        "env-variable-with-space",
        ("up",),
        2,
        r"STACKFLOW_ENVIRONMENT: not a setting: choose the environment with --env",
        env={"STACKFLOW_ENVIRONMENT": "prod env"},
    ),
    Case(
        "environment-variable-names-another-environment",
        at("destroy", "--yes"),
        2,
        r"STACKFLOW_ENVIRONMENT: not a setting: choose the environment with --env",
        env={"STACKFLOW_ENVIRONMENT": "dev"},
    ),
    Case(
        "desired-count-variable",
        at("up"),
        2,
        r"STACKFLOW_APP_DESIRED_COUNT: variables set only what belongs to this machine; set "
        r"`desired_count` under \[app\] in environments/<name>\.toml instead .*remove the variable",
        env={"STACKFLOW_APP_DESIRED_COUNT": "3"},
    ),
    Case(
        "cloud-variable",
        at("up"),
        2,
        r"STACKFLOW_CLOUD: variables set only what belongs to this machine; set `cloud` in "
        r"environments/<name>\.toml instead",
        env={"STACKFLOW_CLOUD": "aws"},
    ),
    Case(
        "approval-variable",
        at("up"),
        2,
        r"STACKFLOW_APPROVAL_REQUIRED: .*set `required` under \[approval\] in "
        r"environments/<name>\.toml",
        env={"STACKFLOW_APPROVAL_REQUIRED": "false"},
    ),
    Case(
        "migrations-dir-variable",
        at("migrate"),
        2,
        r"STACKFLOW_MIGRATIONS_DIR: .*set `dir` under \[migrations\] in environments/<name>\.toml",
        env={"STACKFLOW_MIGRATIONS_DIR": "<folder empty>"},
    ),
    Case(
        "app-cpu-in-dotenv",
        at("up"),
        2,
        r"\.env line 1: STACKFLOW_APP_CPU: variables set only what belongs to this machine; set "
        r"`cpu` under \[app\] in environments/<name>\.toml",
        dotenv="STACKFLOW_APP_CPU=300\n",
    ),
    # a .env that cannot be read whole: named with its line, none of it used, no environment
    # acted on (neither --env's nor the default one)
    Case(
        "dotenv-unterminated-quote",
        at("up"),
        2,
        r"\.env, line 2: cannot be parsed \(an unterminated quote\?\).*no setting of that file",
        dotenv='STACKFLOW_STACK_RETRIES=1\nSTACKFLOW_STATE_DIR="/tmp/elsewhere\nSTACKFLOW_RETRY_DELAY_S=0\n',
    ),
    Case(
        "dotenv-unterminated-quote-default-environment",
        ("up", "--yes"),
        2,
        r"\.env, line 1: cannot be parsed",
        dotenv="STACKFLOW_LOCALCLOUD_DIR='/tmp/elsewhere\n",
    ),
    Case(
        "dotenv-not-utf8",
        at("destroy", "--yes"),
        2,
        r"\.env, line 2: not UTF-8 text; save it as UTF-8\. .*no setting of that file",
        dotenv=b"STACKFLOW_STACK_RETRIES=1\nSTACKFLOW_STATE_DIR=/tmp/\xff\xfe\n",
    ),
    # network (the environment's file)
    Case(
        "cidr-not-a-cidr",
        at("up"),
        2,
        rf"{FILE}: network\.vpc_cidr: 'banana' is not an IPv4 CIDR block",
        file={"network": {"vpc_cidr": "banana"}},
    ),
    Case(
        "cidr-too-large",
        at("up"),
        2,
        rf"{FILE}: network\.vpc_cidr: VPC CIDR 10\.0\.0\.0/8 must be between /16 and /24",
        file={"network": {"vpc_cidr": "10.0.0.0/8"}},
    ),
    Case(
        "cidr-host-bits-set",
        at("preview"),
        2,
        rf"{FILE}: network\.vpc_cidr: '10\.0\.0\.1/16' is not an IPv4 CIDR block",
        file={"network": {"vpc_cidr": "10.0.0.1/16"}},
    ),
    Case(
        "migration-cidr-bad",
        at("up"),
        2,
        rf"{FILE}: network\.migration_cidrs: '10\.0\.0\.0/33' is not an IPv4 CIDR block",
        file={"network": {"migration_cidrs": ["10.0.0.0/33"]}},
    ),
    Case(
        "region-unknown",
        at("up"),
        2,
        rf"{FILE}: aws\.region: 'eu-west' is not an AWS region name",
        file={"aws": {"region": "eu-west"}},
    ),
    Case(
        "region-uppercase",
        at("up"),
        2,
        rf"{FILE}: aws\.region: 'EU-WEST-1' is not an AWS region name",
        file={"aws": {"region": "EU-WEST-1"}},
    ),
    # counts
    Case(
        "az-count-one",
        at("up"),
        2,
        rf"{FILE}: network\.az_count: Input should be greater than or equal to 2",
        file={"network": {"az_count": 1}},
    ),
    Case(
        "az-count-word",
        at("up"),
        2,
        rf"{FILE}: network\.az_count: Input should be a valid integer",
        file={"network": {"az_count": "two"}},
    ),
    Case(
        "desired-count-negative",
        at("up"),
        2,
        rf"{FILE}: app\.desired_count: Input should be greater than or equal to 0",
        file={"app": {"desired_count": -1}},
    ),
    Case(
        "desired-count-too-many",
        at("up"),
        2,
        rf"{FILE}: app\.desired_count: Input should be less than or equal to 100",
        file={"app": {"desired_count": 101}},
    ),
    Case(
        "app-cpu-in-file",
        at("up"),
        2,
        rf"{FILE}: app\.cpu: 300 is not a Fargate CPU size; accepted: 256, 512",
        file={"app": {"cpu": 300}},
    ),
    Case(
        "app-key-misspelt",
        at("up"),
        2,
        rf"{FILE}: app\.desired_cont: not a setting; accepted keys of \[app\]: .*desired_count",
        file={"app": {"desired_cont": 2}},
    ),
    Case(
        "machine-setting-in-file",
        at("up"),
        2,
        rf"{FILE}: state_dir: not set here; it belongs to this machine: set STACKFLOW_STATE_DIR",
        file={"state_dir": "/tmp/elsewhere"},
    ),
    Case(
        "stack-retries-too-many",
        at("up"),
        2,
        r"STACKFLOW_STACK_RETRIES: Input should be less than or equal to 10",
        env={"STACKFLOW_STACK_RETRIES": "11"},
    ),
    Case(
        "kind-unknown",
        at("up"),
        2,
        rf"{FILE}: kind: Input should be 'dev', 'staging', 'prod' or 'ephemeral'",
        file={"kind": "production"},
    ),
    # the retired simulated engine's settings are refused, never ignored
    Case(
        "engine-simulated",
        at("up"),
        2,
        r"STACKFLOW_ENGINE: no longer accepted \(the simulated engine was retired",
        env={"STACKFLOW_ENGINE": "simulated"},
    ),
    Case(
        "sim-latency-retired",
        at("up"),
        2,
        r"STACKFLOW_SIM_LATENCY_S: no longer a setting \(the simulated engine was retired",
        env={"STACKFLOW_SIM_LATENCY_S": '{"database": 3}'},
    ),
    # stacks and commands
    Case(
        "unknown-stack",
        at("up", "--stacks", "app,cache"),
        2,
        r"unknown stack 'cache'; accepted: networking, database, migrate, app, verify",
    ),
    Case(
        "unknown-stack-case-destroy",
        at("destroy", "--stacks", "App", "--yes"),
        2,
        r"unknown stack 'App'",
    ),
    Case("unknown-cloud", at("up", "--cloud", "gcp"), 2, r"--cloud: invalid choice: 'gcp'"),
    Case("unknown-command", ("deploy",), 2, r"invalid choice: 'deploy'"),
    Case(
        "destroy-prod-unconfirmed",
        at("destroy"),
        2,
        rf"environment '{ENVIRONMENT}' is prod: destroying it needs explicit confirmation \(CLI: --yes",
    ),
    Case(
        "up-prod-without-terminal",
        at("up"),
        2,
        rf"{ENVIRONMENT} is a protected environment: `up` shows its plan and waits for approval, "
        r"and there is no terminal to ask\n  what to do: .*add --yes",
        file={"approval": None},
    ),
    Case(
        "up-prod-json-without-yes",
        at("up", "--json"),
        2,
        r"no terminal to ask \(--json is for scripts\)",
        file={"approval": None},
    ),
    Case(
        "approval-timeout-too-short",
        at("up"),
        2,
        rf"{FILE}: approval\.timeout_s: .*greater than or equal to",
        file={"approval": {"required": False, "timeout_s": 1}},
    ),
    # secrets and backends
    Case(
        "aws-cloud-without-passphrase",
        at("up", "--cloud", "aws"),
        2,
        r"the aws cloud needs STACKFLOW_STATE_PASSPHRASE",
        env={"STACKFLOW_STATE_PASSPHRASE": None},
    ),
    Case(
        "aws-cloud-in-file-without-passphrase",
        at("up"),
        2,
        r"the aws cloud needs STACKFLOW_STATE_PASSPHRASE",
        env={"STACKFLOW_STATE_PASSPHRASE": None},
        file={"cloud": "aws"},
    ),
    # the stacks were deployed with PASSPHRASE: without one, the local cloud's own passphrase is
    # used, which is not theirs either
    Case(
        "passphrase-missing-up",
        at("up"),
        1,
        # the first stack already: a skip opens its seal with the passphrase, and it does not open
        rf"stack '{ENVIRONMENT}/networking': the Pulumi state passphrase is missing or wrong "
        r"\(STACKFLOW_STATE_PASSPHRASE.*\(read from the local cloud's passphrase file "
        r"\S*localcloud/passphrase\)",
        env={"STACKFLOW_STATE_PASSPHRASE": None},
    ),
    Case(
        "passphrase-missing-outputs",
        at("outputs"),
        1,
        rf"stack '{ENVIRONMENT}/database': the Pulumi state passphrase is missing or wrong "
        r"\(STACKFLOW_STATE_PASSPHRASE",
        env={"STACKFLOW_STATE_PASSPHRASE": None},
    ),
    Case(
        "passphrase-wrong-up",
        at("up"),
        1,
        rf"stack '{ENVIRONMENT}/networking': the Pulumi state passphrase is missing or wrong "
        r"\(STACKFLOW_STATE_PASSPHRASE.*\(read from STACKFLOW_STATE_PASSPHRASE\)",
        env={"STACKFLOW_STATE_PASSPHRASE": WRONG_PASSPHRASE},
        leaks=(WRONG_PASSPHRASE,),
    ),
    Case(
        "backend-unknown-scheme",
        at("up"),
        2,
        r"STACKFLOW_BACKEND_URL: backend URL ftp://state\.example is not one stackflow reads; "
        r"accepted: file://<folder>, s3://",
        env={"STACKFLOW_BACKEND_URL": "ftp://state.example"},
    ),
    Case(
        "backend-s3-without-bucket",
        at("up"),
        2,
        r"STACKFLOW_BACKEND_URL: an s3:// backend names no bucket; use s3://<bucket>\[/prefix\]",
        env={"STACKFLOW_BACKEND_URL": "s3:///stackflow"},
    ),
    Case(
        "backend-cloud-without-token",
        at("up"),
        2,
        r"backend https://api\.pulumi\.com \(Pulumi Cloud\) needs STACKFLOW_PULUMI_ACCESS_TOKEN",
        env={"STACKFLOW_BACKEND_URL": "https://api.pulumi.com"},
    ),
    # databases
    Case(
        "database-url-not-mysql",
        at("migrate", "--database-url", f"postgres://u:{URL_PASSWORD}@127.0.0.1/app"),
        2,
        r"--database-url / STACKFLOW_DATABASE_URL: database URL must start with mysql://",
        leaks=(URL_PASSWORD,),
    ),
    Case(
        "database-unreachable",
        at("migrate"),
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
        at("migrate"),
        1,
        r"access denied for \w+@127(?:\.\d+){3}:\d+/\w+: check the user name and password",
        env={"STACKFLOW_DATABASE_URL": "<wrong password>"},
        leaks=(WRONG_PASSWORD,),
    ),
    # migration files
    Case(
        "migration-malformed-name",
        at("migrate"),
        2,
        r"V2-add-index\.sql: malformed migration file name: no __ \(two underscores\) between "
        r"the version and the description; accepted: V<version>__<description>\.sql",
        folder="malformed",
    ),
    Case(
        "migration-duplicate-version",
        at("migrate", "--status"),
        2,
        r"V1__create_other\.sql: duplicate version 1 \(also V001__create_hello_pulumi\.sql\)",
        folder="duplicate",
    ),
    Case(
        "migration-folder-empty",
        at("migrate"),
        2,
        r"migrations folder \S+/empty has no migration files",
        folder="empty",
    ),
    Case(
        "migration-folder-without-sql",
        at("migrate"),
        2,
        r"migrations folder \S+/readme_only has no migration files",
        folder="readme_only",
    ),
    Case(
        "migration-folder-missing",
        at("migrate"),
        2,
        r"migrations folder \S+/missing does not exist",
        folder="missing",
    ),
    Case(
        "migration-comments-only",
        at("migrate"),
        2,
        r"V002__nothing\.sql: has no SQL statements",
        folder="comments_only",
    ),
    Case(
        "migration-unterminated-string",
        at("migrate"),
        2,
        r"V002__proc\.sql: line 1: unterminated string",
        folder="unterminated",
    ),
    Case(
        "up-with-duplicate-migration",
        at("up"),
        1,
        r"^error: migrate: \S+/V1__create_other\.sql: duplicate version 1",
        folder="duplicate",
    ),
    Case(
        "up-with-empty-migration-folder",
        at("up"),
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
    if extra.get("STACKFLOW_MIGRATIONS_DIR") == "<folder empty>":
        extra["STACKFLOW_MIGRATIONS_DIR"] = str(deployed.folders["empty"])
    return extra


def _file(deployed: Deployed, case: Case) -> dict[str, Any] | None:
    """The environment's file for this case (sections over DEPLOYED; None removes one), or None
    when the case keeps the file as deployed."""
    if case.file is None and case.folder is None:
        return None
    sections: dict[str, Any] = {
        k: dict(v) if isinstance(v, dict) else v for k, v in DEPLOYED.items()
    }
    for key, value in (case.file or {}).items():
        if value is None:
            sections.pop(key, None)
        else:
            sections[key] = value
    if case.folder is not None:
        sections["migrations"] = {"dir": str(deployed.folders[case.folder])}
    return sections


# What a failed attempt may change: the environment's record notes it (status "failed", so
# `status` can tell the environment is not what its file says), and so do the records of the
# stacks it failed on (their last operation); nothing else.
_ATTEMPT_FIELDS = {"status", "stackflow"}
# What the audit log may gain from bad input: the refusal, or a failed attempt's start and end.
_ATTEMPT_ACTIONS = {"run.refused", "run.started", "run.finished"}


def _unchanged(deployed: Deployed, files: dict[str, bytes], history: list[HistoryRecord]) -> None:
    after = snapshot_files(deployed.state_dir)
    changed = sorted(k for k in files.keys() | after.keys() if files.get(k) != after.get(k))
    records = "records/projects/stackflow"  # the repository's project: its records' keys
    record = f"{records}/environments/{ENVIRONMENT}.json"
    if record in changed and record in files and record in after:
        before_value = json.loads(files[record])["value"]
        after_value = json.loads(after[record])["value"]
        moved = {
            k
            for k in before_value.keys() | after_value.keys()
            if before_value.get(k) != after_value.get(k)
        }
        assert moved <= _ATTEMPT_FIELDS, (
            f"the environment's record changed beyond its status: {moved}"
        )
        assert after_value["status"] in ("deployed", "failed"), after_value
        changed.remove(record)
    # `status` notes a stack's failed attempt (or a skip after one) as its last operation; its
    # last success stays
    for stack_record in [c for c in changed if c.startswith(f"{records}/stacks/{ENVIRONMENT}/")]:
        assert stack_record in files and stack_record in after, stack_record
        before_value = json.loads(files[stack_record])["value"]
        after_value = json.loads(after[stack_record])["value"]
        assert after_value["succeeded"] == before_value["succeeded"], stack_record
        assert after_value["last"]["status"] in ("failed", "unchanged"), after_value
        changed.remove(stack_record)
    # the audit log only grows: a refusal (or a failed attempt's start and end) is appended,
    # chained to what was there; nothing earlier is edited
    log, head = f"{records}/audit.log", f"{records}/audit/head.json"
    if log in changed:
        before_log, after_log = files.get(log, b""), after[log]
        assert after_log.startswith(before_log), "the audit log was edited, not appended to"
        added = [Entry.parse(line) for line in after_log[len(before_log) :].splitlines()]
        assert added, "the audit log changed without a new entry"
        for entry in added:
            assert entry.action in _ATTEMPT_ACTIONS, entry
            if entry.action == "run.finished":
                assert entry.details.get("result") == "failed", entry
        changed.remove(log)
        if head in changed:
            changed.remove(head)
    # the environment's run history gains the failed attempt at its head; the runs before stay
    runs = f"{records}/history/{ENVIRONMENT}.json"
    if runs in changed:
        before_runs = json.loads(files[runs])["value"]["runs"] if runs in files else []
        after_runs = json.loads(after[runs])["value"]["runs"]
        assert after_runs[1:][: len(before_runs)] == before_runs[: len(after_runs) - 1], (
            "the runs before the attempt changed"
        )
        assert after_runs[0]["result"] == "failed", after_runs[0]
        changed.remove(runs)
    assert not changed, f"the state folder changed: {changed}"
    assert schema_history(deployed.db) == history, "the schema history changed"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_named_and_changes_nothing_on_the_local_cloud(
    case: Case,
    deployed: Deployed,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Local cloud: `main(argv)` with one bad value (in the environment's file, a variable or a
    `.env`) against the deployed environment: exit code as expected, the error names the problem
    (the file and key, or the variable), no traceback, no secret echoed, state and schema history
    unchanged, and os.environ as it was (the CLI never writes it)."""
    use_variables(monkeypatch, deployed.variables)
    monkeypatch.chdir(deployed.workdir)
    for key, value in _variables(deployed, case).items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    dotenv = deployed.workdir / ".env"
    if isinstance(case.dotenv, bytes):
        dotenv.write_bytes(case.dotenv)
    elif case.dotenv is not None:
        dotenv.write_text(case.dotenv)
    sections = _file(deployed, case)
    if sections is not None:
        declare(deployed.variables, ENVIRONMENT, **sections)
    files, history = snapshot_files(deployed.state_dir), schema_history(deployed.db)
    assert files and history, "nothing deployed to compare against"
    variables = dict(os.environ)
    capsys.readouterr()
    try:
        code = main(list(case.argv))
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        dotenv.unlink(missing_ok=True)
        if sections is not None:
            declare(deployed.variables, ENVIRONMENT, **DEPLOYED)  # as deployed, for the next case
    out = capsys.readouterr()
    assert dict(os.environ) == variables, "the command line changed os.environ"

    shown = f"exit {code}\n--- stdout\n{out.out}\n--- stderr\n{out.err}"
    assert code == case.code, shown
    # the CLI's message is the end of stderr: its `error: ` line and what follows (a settings
    # error lists one variable per line; a stack's error ends with the Pulumi CLI's own lines)
    lines = out.err.splitlines()
    first = next((i for i, line in enumerate(lines) if "error: " in line), None)
    assert first is not None, shown
    message = "\n".join(lines[first:])
    assert re.search(case.names, message, re.MULTILINE), shown
    assert "Traceback" not in out.out + out.err, shown
    for value in (*case.leaks, *deployed.secrets):
        assert value not in out.out + out.err, f"{value!r} was echoed:\n{shown}"
    _unchanged(deployed, files, history)


SUBPROCESS_CASES: list[tuple[tuple[str, ...], int, str, dict[str, str]]] = [
    # (argv, exit code, what the last line names, variables of this process only)
    (("up", "--env", "Prod"), 2, r"environment \(--env\): environment name 'Prod'", {}),
    (at("up", "--stacks", "app,cache"), 2, r"unknown stack 'cache'", {}),
    (
        at("destroy"),
        2,
        rf"environment '{ENVIRONMENT}' is prod: destroying it needs explicit confirmation",
        {},
    ),
    # a process whose variables say otherwise than the environment's file: refused, not deployed
    (
        at("up", "--yes"),
        2,
        r"STACKFLOW_APP_DESIRED_COUNT: variables set only what belongs to this machine; set "
        r"`desired_count` under \[app\] in environments/<name>\.toml",
        {"STACKFLOW_APP_DESIRED_COUNT": "3"},
    ),
]


def test_bad_input_through_the_real_cli_process_on_the_local_cloud(deployed: Deployed) -> None:
    """Local cloud: `python flows/run.py` as a process (four at once): the process exit code, the
    last line of stderr names the problem, and the state and schema history are unchanged."""
    files, history = snapshot_files(deployed.state_dir), schema_history(deployed.db)
    procs = [
        subprocess.Popen(
            [sys.executable, str(RUN_PY), *argv],
            env=subprocess_env({**deployed.variables, **extra}),
            cwd=deployed.workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for argv, _, _, extra in SUBPROCESS_CASES
    ]
    for proc, (argv, code, names, _) in zip(procs, SUBPROCESS_CASES, strict=True):
        out, err = proc.communicate(timeout=120)
        shown = f"{' '.join(argv)} -> exit {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"
        assert proc.returncode == code, shown
        assert "error: " in err and re.search(names, err.rstrip().splitlines()[-1]), shown
        assert "Traceback" not in out + err, shown
        assert not [v for v in deployed.secrets if v in out + err], f"a secret was echoed:\n{shown}"
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
            rf"environment '{ENVIRONMENT}' is prod: destroying it needs explicit confirmation",
        ),
    ],
    ids=[
        "deploy-bad-environment",
        "preview-long-environment",
        "deploy-unknown-stack",
        "destroy-prod-unconfirmed",
    ],
)
def test_bad_flow_parameters_fail_the_run_and_change_nothing_on_the_local_cloud(
    flow: str,
    parameters: dict[str, Any],
    names: str,
    deployed: Deployed,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flow called with a bad parameter (as from the UI or a schedule) ends Failed with a message
    naming the parameter's problem; the deployed environment's state (local cloud) and schema
    history are unchanged."""
    from flows.pipeline import FLOWS

    use_variables(monkeypatch, deployed.variables)
    files, history = snapshot_files(deployed.state_dir), schema_history(deployed.db)
    name = {"deploy": "up"}.get(flow, flow)
    state = FLOWS[name](**parameters, return_state=True)
    assert state.is_failed(), state
    assert re.search(names, str(state.message), re.DOTALL), state.message
    _unchanged(deployed, files, history)


@pytest.mark.parametrize(
    ("flow", "sections", "names"),
    [
        ("up", {"app": {"cpu": 300}}, rf"{FILE}: app\.cpu: 300 is not a Fargate CPU size"),
        ("destroy", {"network": {"vpc_cidr": "banana"}}, rf"{FILE}: network\.vpc_cidr: 'banana'"),
        ("drift", {"kind": "production"}, rf"{FILE}: kind: Input should be 'dev', 'staging'"),
    ],
    ids=["deploy-bad-cpu", "destroy-bad-cidr", "drift-bad-kind"],
)
def test_a_bad_environment_file_fails_a_flow_run_before_anything_runs_on_the_local_cloud(
    flow: str,
    sections: dict[str, Any],
    names: str,
    deployed: Deployed,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run from the UI or a schedule reads the same file as the command line: a bad value in it
    fails the flow run naming the file and key, and the deployed environment's state (local
    cloud) and schema history are unchanged."""
    from flows.pipeline import FLOWS

    use_variables(monkeypatch, deployed.variables)
    files, history = snapshot_files(deployed.state_dir), schema_history(deployed.db)
    declare(deployed.variables, ENVIRONMENT, **{**DEPLOYED, **sections})
    try:
        parameters: dict[str, Any] = {"environment": ENVIRONMENT}
        if flow == "destroy":
            parameters["confirm"] = True
        state = FLOWS[flow](**parameters, return_state=True)
    finally:
        declare(deployed.variables, ENVIRONMENT, **DEPLOYED)
    assert state.is_failed(), state
    assert re.search(names, str(state.message), re.DOTALL), state.message
    _unchanged(deployed, files, history)
