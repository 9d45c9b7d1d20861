"""Fixtures of the fault cases: every case runs the real flows or CLI on the simulated engine
(standing in for Pulumi), against the session's Prefect server and a fresh MariaDB schema."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prefect  # noqa: F401  (sets up Prefect's logging now, under pytest's session capture)
import pytest

from stackflow.localprefect import drain_prefect_queues
from stackflow.settings import MysqlTarget
from tests.faults.helpers import FaultEnv, url_of


def base_variables(state_dir: Path, db: MysqlTarget) -> dict[str, str]:
    """Settings for one case: its own state folder, its own schema, no retry delays."""
    return {
        "STACKFLOW_STATE_DIR": str(state_dir),
        "STACKFLOW_ENVIRONMENT": "dev",
        "STACKFLOW_ENGINE": "simulated",
        "STACKFLOW_CLOUD": "local",  # main() writes --cloud into os.environ: restored after
        "STACKFLOW_STATE_PASSPHRASE": "faults-passphrase",
        "STACKFLOW_SIM_MYSQL": "external",
        "STACKFLOW_SIM_MYSQL_URL": url_of(db),
        "STACKFLOW_RETRY_DELAY_S": "0",
        "STACKFLOW_MIGRATIONS_WAIT_TIMEOUT_S": "20",
        "STACKFLOW_MIGRATIONS_CONNECT_TIMEOUT_S": "2",
    }


def use_variables(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> None:
    """Exactly these STACKFLOW_* variables in this process (for flows called in-process)."""
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def fault_env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    prefect_server: Any,
    fresh_schema: MysqlTarget,
) -> FaultEnv:
    """A state folder and a schema of its own for one case; see `FaultEnv`."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    variables = base_variables(tmp_path / "state", fresh_schema)
    use_variables(monkeypatch, variables)
    monkeypatch.chdir(workdir)  # in-process CLI runs read no stray .env either
    return FaultEnv(tmp_path / "state", workdir, fresh_schema, variables, capsys=capsys)


@pytest.fixture(autouse=True, scope="module")
def _send_queued_prefect_records() -> Iterator[None]:
    """After a module, send the logs and events its in-process runs queued, while the session's
    Prefect server is still up: at interpreter exit it is gone, and the client retries for a
    minute before giving up."""
    yield
    drain_prefect_queues()
