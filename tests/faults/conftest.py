"""Fixtures of the fault cases: every case runs the real flows or CLI on the real Pulumi engine and
the session's **local cloud** (moto's AWS APIs on loopback, a MariaDB server per database; nothing
reaches AWS), against the session's Prefect server. A test gets a state folder and environment
names of its own; the local cloud's latency and fault knobs are cleared after every test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prefect  # noqa: F401  (sets up Prefect's logging now, under pytest's session capture)
import pytest

from stackflow.localcloud.knobs import clear_knobs
from stackflow.localprefect import drain_prefect_queues
from tests.faults.helpers import FaultEnv, use_variables
from tests.realenv import real_variables, unique


def fault_variables(state_dir: Path, local_cloud: Any, prefect_server: Any) -> dict[str, str]:
    """This machine's settings for one case: the real engine on the session's local cloud, its own
    state folder and project folder (where `declare` writes `environment`'s own file), no retry
    delays. The environment is every command's --env (a flow's `environment`), never a variable."""
    return real_variables(state_dir, local_cloud, prefect_server) | {
        "STACKFLOW_MIGRATIONS_CONNECT_TIMEOUT_S": "2",
    }


@pytest.fixture
def fault_env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    local_cloud: Any,
    prefect_server: Any,
) -> Iterator[FaultEnv]:
    """A state folder and an environment name (dev-xxxxxx) of its own for one case; see `FaultEnv`.
    Whatever knobs the case set on the local cloud are cleared after it."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    state_dir = tmp_path / "state"
    environment = unique("dev")
    variables = fault_variables(state_dir, local_cloud, prefect_server)
    use_variables(monkeypatch, variables)
    monkeypatch.chdir(workdir)  # in-process CLI runs read no stray .env either
    try:
        yield FaultEnv(state_dir, workdir, environment, variables, local_cloud, capsys=capsys)
    finally:
        clear_knobs(local_cloud.url)


@pytest.fixture(autouse=True, scope="module")
def _send_queued_prefect_records(prefect_server: Any) -> Iterator[None]:
    """After a module, send the logs and events its in-process runs queued, while the session's
    Prefect server is still up: at interpreter exit it is gone, and the client retries for a
    minute before giving up."""
    yield
    drain_prefect_queues()
