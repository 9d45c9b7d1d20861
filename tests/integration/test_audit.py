"""The audit log of a sequence of runs on the real Pulumi engine and the session's **local cloud**
(moto on loopback, not AWS), with stackflow's records (and the log beside them) on the session's
real PostgreSQL: an `up` that waits for approval and is approved, a refresh that breaks the lock a
dead `pulumi` left, a destroy, an ephemeral environment's deploy and its expiry, and a refused
destroy. `python flows/run.py audit` reads every entry back, in order, with who did it, where and
why, and the chain holds; an entry edited behind stackflow's back is then named, and `audit`
exits 1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stackflow import exits
from tests.faults.helpers import backend_dir
from tests.realenv import cli, declare, deploy_answering, process_env, real_variables, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def real_env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    prefect_server: Any,
    local_cloud: Any,
    fresh_database_url: str,
) -> Iterator[dict[str, str]]:
    """This machine's variables in this process for one test: its own state folder, the session's
    local cloud, and its records on a fresh PostgreSQL database."""
    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    variables["STACKFLOW_RECORDS_URL"] = fresh_database_url
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    yield variables
    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()


def leave_a_dead_lock(state_dir: Path, environment: str) -> int:
    """The lock a `pulumi` killed mid-update leaves on networking: this host, a pid that is gone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    folder = (
        backend_dir(state_dir) / "locks" / "organization" / "stackflow-networking" / environment
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{uuid.uuid4()}.json").write_text(
        json.dumps(
            {
                "pid": gone.pid,
                "username": "someone",
                "hostname": socket.gethostname(),
                "timestamp": datetime.now(UTC).isoformat(),
            }
        )
    )
    return gone.pid


def audit(variables: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    done = cli(process_env(variables), "audit", "--json", *args)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_sequence_of_runs_reads_back_whole_and_a_tampered_entry_is_found(
    real_env: dict[str, str],
) -> None:
    from flows.cleanup import cleanup_expired
    from flows.pipeline import deploy, destroy, refresh

    gated, brief, guarded = unique("dev"), unique("pr"), unique("prod")
    state_dir = Path(real_env["STACKFLOW_STATE_DIR"])
    declare(real_env, gated, approval={"required": True, "timeout_s": 600})
    declare(real_env, brief, ttl_hours=0.0001)  # 0.36 s: expired once its deploy ends

    assert deploy_answering(gated, True, "looks right").is_completed()
    dead_pid = leave_a_dead_lock(state_dir, gated)
    assert refresh(environment=gated, stacks=["networking"], return_state=True).is_completed()
    assert destroy(environment=gated, return_state=True).is_completed()
    deploy(environment=brief, stacks=["networking"])
    assert cleanup_expired()["destroyed"] == [brief]
    refused = cli(process_env(real_env), "destroy", "--env", guarded)  # prod, without --yes
    assert refused.returncode == exits.USAGE, refused.stderr

    code, log = audit(real_env)
    assert code == exits.OK and log["holds"] and log["problems"] == [], log["problems"]
    entries = log["entries"]
    assert [(e["action"], e["environment"], e["details"].get("operation")) for e in entries] == [
        ("run.started", gated, "up"),
        ("approval.approved", gated, None),
        ("run.finished", gated, "up"),
        ("run.started", gated, "refresh"),
        ("lock.broken", gated, None),
        ("run.finished", gated, "refresh"),
        ("run.started", gated, "destroy"),
        ("run.finished", gated, "destroy"),
        ("environment.destroyed", gated, None),
        ("run.started", brief, "up"),
        ("run.finished", brief, "up"),
        ("environment.expired", brief, None),
        ("run.started", brief, "destroy"),
        ("run.finished", brief, "destroy"),
        ("environment.destroyed", brief, None),
        ("run.refused", guarded, "destroy"),
    ]
    assert [e["seq"] for e in entries] == list(range(1, 17)) and log["total"] == 16
    assert log["head"]["seq"] == 16
    # who, where and which commit: this OS user at this host, the run, the cloud
    from stackflow.audit.who import os_user

    host = socket.gethostname()
    started = entries[0]
    assert (started["actor"], started["via"], started["host"]) == (os_user(), "command line", host)
    assert (started["signer"], started["verified"]) == (None, False)
    assert started["run"] and started["details"]["target"] == "local cloud"
    assert started["details"]["stacks"] == ["networking"]
    approved = entries[1]
    assert (approved["actor"], approved["via"]) == ("unknown", "the Prefect UI or API")
    assert approved["details"]["reason"] == "looks right" and approved["details"]["round"] == 1
    assert approved["details"]["plan"].startswith("networking: ")
    assert entries[2]["details"]["result"] == "succeeded"
    broken = entries[4]
    assert broken["stack"] == "networking"
    assert f"pulumi pid {dead_pid} on {host}, which is gone" in broken["details"]["why"]
    assert entries[8]["details"]["why"] == f"destroyed by {os_user()} through command line"
    assert entries[14]["details"]["why"].startswith("expired: its TTL of 0.0001 h")
    assert "needs explicit confirmation" in entries[15]["details"]["why"]

    code, mine = audit(real_env, "--env", brief, "--since", "1d")
    assert code == exits.OK and [e["seq"] for e in mine["entries"]] == list(range(10, 16))

    # behind stackflow's back, as the table's owner: the approval said to be someone else's
    import psycopg

    from stackflow.backends.postgres import postgres_location

    conninfo = postgres_location(real_env["STACKFLOW_RECORDS_URL"]).conninfo
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("ALTER TABLE stackflow_audit DISABLE TRIGGER stackflow_audit_append_only")
        conn.execute(
            'UPDATE stackflow_audit SET entry = replace(entry, \'"actor":"unknown"\', '
            '\'"actor":"alice"\') WHERE seq = 2'
        )
    code, tampered = audit(real_env)
    assert code == exits.FAILED and not tampered["holds"]
    assert tampered["problems"] == ["entry 2 was changed (entry 3 names another hash for it)"]
    assert tampered["entries"][1]["actor"] == "alice"  # shown as it now reads, with the break
    text = cli(process_env(real_env), "audit")
    assert text.returncode == exits.FAILED
    assert "the chain does not hold" in text.stdout
    assert "error: the audit log's chain does not hold: entry 2 was changed" in text.stderr
