"""Secret canaries on the local cloud: the environment's real database password (the RandomPassword
of its database stack), the state passphrase and the local cloud's own passphrase must never be
written or shown."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from stackflow.localcloud.knobs import set_knobs
from stackflow.localcloud.paths import passphrase as cloud_passphrase
from stackflow.localprefect import PrefectServer
from stackflow.migrator.connection import connect
from stackflow.settings import MigrationSettings
from tests.faults.helpers import (
    CliRun,
    FaultEnv,
    backend_dir,
    find_in_files,
    find_in_texts,
    prefect_records,
    schema_history,
    url_of,
    use_variables,
)

pytestmark = pytest.mark.faults
SECRET_VERSION = "aws:secretsmanager/secretVersion:SecretVersion"


def encodings(secret: str) -> set[str]:
    """The forms a leaked secret would take: plain, URL-encoded (both ways), base64."""
    return {
        secret,
        quote(secret, safe=""),
        quote(secret),
        base64.b64encode(secret.encode()).decode(),
    }


def test_secret_canaries_appear_nowhere_on_the_local_cloud(
    fault_env: FaultEnv,
    prefect_server: PrefectServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Local cloud: a deploy that fails in the database stack (a permanent AWS error on storing the
    password in Secrets Manager, after the instance took it), the deploy that completes it, a
    preview, outputs (plain and JSON), `migrate --status`, a bad database URL holding the password,
    and destroy (the first deploy as a `python flows/run.py` process, the rest through `main()`
    in this process). The database password (plain, URL-encoded, base64, in a URL), the state
    passphrase and the local cloud's passphrase are in no CLI output, no file of the Prefect
    server's home (database, log) or the client's PREFECT_HOME (result storage), no log, artifact,
    flow or task run, state or event read back through the Prefect API, no file of the state folder
    and no file of the local cloud's folder but its passphrase file."""
    since = datetime.now(UTC)
    env = fault_env.environment
    state_passphrase = f"CanaryPass-{secrets.token_hex(12)}"
    fault_env.variables["STACKFLOW_STATE_PASSPHRASE"] = state_passphrase
    use_variables(monkeypatch, fault_env.variables)
    set_knobs(
        fault_env.cloud.url,
        {
            "faults": [
                {"kind": "permanent", "count": 1, "environment": env, "type": SECRET_VERSION},
            ]
        },
    )

    def ok(*args: str, code: int = 0, in_process: bool = True, **extra: Any) -> CliRun:
        run = (fault_env.main if in_process else fault_env.cli)(*args, **extra)
        assert run.returncode == code, run
        return run

    failed = ok("up", "--env", env, code=1, in_process=False)
    assert re.search(
        rf"^error: stack '{env}/database'.*api error InvalidParameterValue",
        failed.stderr,
        re.MULTILINE | re.DOTALL,
    ), failed
    deployed = ok("up", "--env", env)
    assert re.search(r"^verify\s+healthy ", deployed.stdout, re.MULTILINE), deployed

    # the canaries were in play: the password is the database's, the passphrase seals the state
    db = fault_env.database()  # from the stack's outputs
    db_password = db.password.get_secret_value()
    assert len(db_password) >= 16 and schema_history(db), "the migrations ran with the password"
    with connect(db, MigrationSettings()) as conn:
        assert conn.open
    checkpoint = backend_dir(fault_env.state_dir) / "stacks" / "stackflow-database" / f"{env}.json"
    assert "ciphertext" in checkpoint.read_text()
    workspace = fault_env.state_dir / "workspaces" / "local" / "stackflow-database" / env
    assert "encryptionsalt" in (workspace / f"Pulumi.{env}.yaml").read_text()

    ok("preview", "--env", env, "--stacks", "database")
    ok("outputs", "--env", env, "--stacks", "database")
    shown = json.loads(ok("outputs", "--env", env, "--stacks", "database", "--json").stdout)
    assert shown["database"]["password"] == "[secret]", shown
    ok("migrate", "--env", env, "--status")  # the database found from the stack's outputs
    # a bad URL holding the password: the error names the variable, never echoes the value
    bad_url = f"postgres://{db.user}:{quote(db_password, safe='')}@{db.host}:{db.port}/x"
    bad = ok("migrate", "--env", env, code=2, env={"STACKFLOW_DATABASE_URL": bad_url})
    assert "STACKFLOW_DATABASE_URL" in bad.error_line, bad
    ok("destroy", "--env", env)

    root = fault_env.cloud.root
    canaries = {db_password, state_passphrase, cloud_passphrase(root), url_of(db), bad_url}
    needles = sorted({form for canary in canaries for form in encodings(canary)})
    hits = find_in_texts(
        {
            f"{' '.join(r.args)} ({stream})": getattr(r, stream)
            for r in fault_env.runs
            for stream in ("stdout", "stderr")
        },
        needles,
    )
    hits += find_in_files(prefect_server.home, needles)  # prefect.db, -wal, -shm, server log
    hits += find_in_files(Path(os.environ["PREFECT_HOME"]), needles)  # client home, results
    hits += find_in_files(fault_env.state_dir, needles)
    hits += find_in_files(root, needles, skip=[root / "passphrase"])
    records = prefect_records(since)
    assert any(k.startswith("log ") for k in records) and any(
        k.startswith("artifact ") for k in records
    )
    # the in-process runs' Pulumi output reached the session's server too
    assert any("Destroying" in text or "destroying" in text for text in records.values())
    hits += find_in_texts(records, needles)
    assert not hits, "secret canary found:\n" + "\n".join(hits)
