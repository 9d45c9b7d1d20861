"""Fixtures of the integration tests: one state folder and one MariaDB schema per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from stackflow.settings import MysqlTarget


def url_of(t: MysqlTarget) -> str:
    return f"mysql://{quote(t.user)}:{quote(t.password.get_secret_value())}@{t.host}:{t.port}/{t.database}"


@pytest.fixture
def pipeline_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_server: Any, fresh_schema: MysqlTarget
) -> dict[str, Any]:
    """STACKFLOW_* settings for one test: its own state folder and its own schema."""
    env = {
        "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
        "STACKFLOW_ENGINE": "simulated",
        "STACKFLOW_STATE_PASSPHRASE": "integration-passphrase",
        "STACKFLOW_SIM_MYSQL": "external",
        "STACKFLOW_SIM_MYSQL_URL": url_of(fresh_schema),
        "STACKFLOW_RETRY_DELAY_S": "0",
        "STACKFLOW_MIGRATIONS_WAIT_TIMEOUT_S": "20",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return {"env": env, "state_dir": tmp_path / "state", "db": fresh_schema}
