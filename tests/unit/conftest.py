"""Fixtures of the unit tier's command-line tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This machine for one test: no STACKFLOW_* variable of the caller's, no Prefect server
    configured, a state folder and a project of its own (a template per kind saying `cloud =
    "local"`, so dev-1 and prod-1 are known names), a working folder without a `.env`."""
    from stackflow.processes import free_port
    from tests.realenv import test_project

    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    variables = {
        "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
        "STACKFLOW_PROJECT_DIR": str(test_project(tmp_path / "project")),
        "STACKFLOW_LOCAL_PREFECT_PORT": str(free_port()),  # never another's server
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return variables
