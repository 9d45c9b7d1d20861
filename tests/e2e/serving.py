"""`deployments/serve.py` in a process of its own for browser tests, and waiting on its runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.realenv import declare, real_variables

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 180


def served_names(environment: str) -> tuple[str, ...]:
    """The deployments `serve.py --env <environment>` registers."""
    flows = ("deploy", "preview", "destroy", "drift")
    return (*(f"{flow}/{environment}" for flow in flows), "cleanup-expired/hourly")


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]
    state_dir: Path
    variables: dict[str, str]
    environment: str

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the serve process and the flow-run processes it started (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _wait_until_served(served: Served, started: datetime, timeout: float = 90.0) -> None:
    """Every deployment registered by this process and polled by its runner."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            if served.process.poll() is not None:
                pytest.fail(
                    f"serve.py exited with {served.process.returncode}:\n{served.log_tail()}"
                )
            try:
                found = [
                    client.read_deployment_by_name(n) for n in served_names(served.environment)
                ]
            except ObjectNotFound:
                found = []
            if found and all(
                d.updated is not None
                and d.updated >= started
                and d.last_polled is not None
                and d.last_polled >= started
                and not d.paused
                for d in found
            ):
                return
            time.sleep(0.5)
    pytest.fail(f"deployments were not served within {timeout:.0f}s:\n{served.log_tail()}")


@contextlib.contextmanager
def serving(
    environment: str,
    home: Path,
    local_cloud: Any,
    prefect_server: Any,
    extra: Mapping[str, str] | None = None,
    sections: Mapping[str, Any] | None = None,
) -> Iterator[Served]:
    """`python deployments/serve.py --env <environment>` with its own state folder in `home` and a
    project beside it, on the local cloud, with `extra` variables in its environment (they reach
    every flow run it serves) and, with `sections`, the environment's own file saying them (see
    realenv.declare; else the kind's template); stopped (with its runs) at the end."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("STACKFLOW_", "PULUMI_", "AWS_"))
    }
    machine = real_variables(home / "state", local_cloud, prefect_server)
    if sections is not None:
        declare(machine, environment, **sections)
    env.update(machine)
    env.update(extra or {})
    env["PREFECT_HOME"] = str(home / "prefect-home")
    log = home / "serve.log"
    started = datetime.now(UTC) - timedelta(seconds=1)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "deployments" / "serve.py"), "--env", environment],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, stopped as a whole
        )
    variables = {k: v for k, v in env.items() if k.startswith("STACKFLOW_")}
    result = Served(process, log, env, home / "state", variables, environment)
    try:
        _wait_until_served(result, started)
        yield result
    finally:
        _stop(process)


def runs_of(client: Any, deployment_id: Any) -> list[Any]:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    return list(
        client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
            sort=FlowRunSort.EXPECTED_START_TIME_DESC,
            limit=200,
        )
    )


def wait_for_state(
    client: Any, flow_run_id: Any, served: Served, done: Any, timeout: float = RUN_TIMEOUT_S
) -> Any:
    """The flow run once `done(state)` holds (its final state by default)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and done(run.state):
            return run
        time.sleep(1)
    pytest.fail(f"flow run {flow_run_id} not there after {timeout:.0f}s:\n{served.log_tail()}")


def wait_for_final(client: Any, flow_run_id: Any, served: Served) -> Any:
    return wait_for_state(client, flow_run_id, served, lambda state: state.is_final())
