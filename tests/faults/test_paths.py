"""A state folder whose path holds a space and a letter outside ASCII works everywhere: its own
local cloud (moto on loopback, not AWS) with the RDS instance's MariaDB under it, the workspaces,
the migrations and the verify step, then a destroy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stackflow.processes import free_port, processes_under
from tests.realenv import cli, declare, process_env, real_variables, summary_of, unique

pytestmark = pytest.mark.faults


def test_a_state_folder_with_a_space_and_an_umlaut_deploys_migrates_and_destroys(
    tmp_path: Path, local_cloud: Any, prefect_server: Any
) -> None:
    state = tmp_path / "state ü x"
    variables = real_variables(state, local_cloud, prefect_server)
    # the run starts a local cloud of its own, under that state folder (not the session's)
    del variables["STACKFLOW_LOCALCLOUD_DIR"]
    variables["STACKFLOW_LOCALCLOUD_PORT"] = str(free_port())
    env, name = process_env(variables), unique("dev")
    declare(variables, name)
    try:
        up = cli(env, "up", "--env", name)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "starting the local cloud on 127.0.0.1" in up.stderr, "the first run says so"
        summary = summary_of(up)
        assert [summary[s] for s in ("networking", "database", "app")] == ["updated"] * 3
        assert summary["migrate"] == "migrated"
        assert summary["verify"] == "healthy"
        down = cli(env, "destroy", "--env", name, "--yes")
        assert down.returncode == 0, down.stdout + down.stderr
    finally:
        cli(env, "server", "stop")
    assert processes_under(state) == [], "its local cloud and databases stopped with it"
