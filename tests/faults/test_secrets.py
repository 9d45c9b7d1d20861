"""Secret canaries: a database password and a state passphrase that must never be written or shown."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from stackflow.engine.simulated import clear_faults, inject_fault
from stackflow.localdb import grant_database
from stackflow.localprefect import PrefectServer
from stackflow.secretbox import SecretBox
from stackflow.settings import MysqlTarget
from tests.faults.conftest import base_variables, use_variables
from tests.faults.helpers import (
    CliRun,
    FaultEnv,
    find_in_files,
    find_in_texts,
    prefect_records,
    url_of,
)
from tests.fixtures.mariadb import LocalMariaDB

pytestmark = pytest.mark.faults
SIM_DATABASE_STATE = "simulated/stacks/stackflow-database/dev.json"


@pytest.fixture
def canary_db(mariadb: LocalMariaDB) -> Iterator[MysqlTarget]:
    """A MariaDB user of its own whose password is a canary, with a schema granted to it."""
    suffix = secrets.token_hex(4)
    user, schema = f"canary_{suffix}", f"canary_{suffix}"
    # '@' and '#' make the URL-encoded form differ from the plain one
    password = f"CanaryDbPw-{secrets.token_hex(12)}@#"
    with mariadb.admin() as conn, conn.cursor() as cur:
        for host in ("127.0.0.1", "localhost", "%"):
            cur.execute("CREATE USER %s@%s IDENTIFIED BY %s", (user, host, password))
        grant_database(conn, schema, user)
    yield MysqlTarget("127.0.0.1", mariadb.port, user, SecretStr(password), schema)
    with mariadb.admin() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{schema}`")
        for host in ("127.0.0.1", "localhost", "%"):
            cur.execute("DROP USER IF EXISTS %s@%s", (user, host))


def test_secret_canaries_appear_nowhere_simulated(
    canary_db: MysqlTarget,
    prefect_server: PrefectServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Deploy, preview, outputs (plain and JSON), migrate --status, a failing deploy, a bad
    setting and destroy through the CLI (simulated stacks, real MariaDB and Prefect server; the
    deploys run as `python flows/run.py` processes, the rest through `main()` in this process):
    neither canary, plain or URL-encoded, is in any CLI output, the Prefect server's database,
    home and log, the client's PREFECT_HOME (result storage), the logs, artifacts, runs, states
    and events read back through the Prefect API, or any file of the state folder."""
    since = datetime.now(UTC)
    db_password = canary_db.password.get_secret_value()
    passphrase = f"CanaryPass-{secrets.token_hex(12)}"
    variables = base_variables(tmp_path / "state", canary_db) | {
        "STACKFLOW_STATE_PASSPHRASE": passphrase
    }
    use_variables(monkeypatch, variables)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    env = FaultEnv(tmp_path / "state", workdir, canary_db, variables, capsys=capsys)

    def ok(*args: str, code: int = 0, in_process: bool = False, **extra: Any) -> CliRun:
        run = (env.main if in_process else env.cli)(*args, **extra)
        assert run.returncode == code, run
        return run

    deployed = ok("up", "--env", "dev")
    # the canaries were in play: the password reached MariaDB, the passphrase sealed the state
    assert "1 applied" in deployed.stdout, deployed
    state = json.loads((env.state_dir / SIM_DATABASE_STATE).read_text())
    sealed = state["outputs"]["password"]["ciphertext"]
    assert SecretBox.from_salt(passphrase, state["salt"]).open(sealed) == db_password

    ok("preview", "--env", "dev", in_process=True)
    ok("outputs", "--env", "dev", in_process=True)
    ok("outputs", "--env", "dev", "--json", in_process=True)
    # the database found from the stack's outputs
    ok("migrate", "--env", "dev", "--status", in_process=True)
    inject_fault(env.state_dir, "app", permanent=True, operations=("up",))
    ok("up", "--env", "dev", "--force", code=1)
    clear_faults(env.state_dir)
    # a bad URL holding the password: the error names the variable, never echoes the value
    bad_url = f"postgres://{canary_db.user}:{quote(db_password, safe='')}@127.0.0.1/x"
    bad = ok("up", code=2, env={"STACKFLOW_SIM_MYSQL_URL": bad_url}, in_process=True)
    assert "STACKFLOW_SIM_MYSQL_URL" in bad.stderr, bad
    ok("destroy", "--env", "dev", in_process=True)

    canaries = {db_password, passphrase, url_of(canary_db)}
    needles = sorted(canaries | {quote(c, safe="") for c in canaries})
    hits = find_in_texts(
        {
            f"{' '.join(r.args)} ({stream})": getattr(r, stream)
            for r in env.runs
            for stream in ("stdout", "stderr")
        },
        needles,
    )
    hits += find_in_files(prefect_server.home, needles)  # prefect.db, -wal, -shm, server log
    hits += find_in_files(Path(os.environ["PREFECT_HOME"]), needles)  # client home, results
    hits += find_in_files(env.state_dir, needles)
    records = prefect_records(since)
    assert any(k.startswith("log ") for k in records) and any(
        k.startswith("artifact ") for k in records
    )
    hits += find_in_texts(records, needles)
    assert not hits, "secret canary found:\n" + "\n".join(hits)
