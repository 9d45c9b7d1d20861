"""Every run of an environment deploys what its file in the repository says, whoever runs it
(issue 20, "Done when"): a run started from Prefect, in a served deployment's process whose
variables say otherwise, and a command line run in a process of its own deploy the same settings,
on the real Pulumi engine and the session's **local cloud** (moto on loopback, not AWS).

The served process has variables that name environment settings (the app's desired count and CPU,
even the cloud): its flow runs ignore them and say so in their log and summary artifact; the
command line refuses them. The ECS service the local cloud holds is the witness.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.serving import Served, serving, wait_for_state
from tests.realenv import cli, declare, process_env, unique

pytestmark = pytest.mark.integration

ENVIRONMENT = unique("dev")
FILE = f"environments/{ENVIRONMENT}.toml"
DEPLOY_TIMEOUT_S = 600
# What the serving process's variables say; the environment's file says otherwise.
SERVER_VARIABLES = {
    "STACKFLOW_APP_DESIRED_COUNT": "3",
    "STACKFLOW_APP_CPU": "512",
    "STACKFLOW_CLOUD": "aws",
}


@pytest.fixture(scope="module")
def served(
    prefect_server: Any, local_cloud: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`deployments/serve.py --env <ENVIRONMENT>` in a process of its own with SERVER_VARIABLES
    in its environment; the environment's file says `desired_count = 2` under [app]."""
    home = tmp_path_factory.mktemp("envfiles")
    sections = {"app": {"desired_count": 2}}
    with serving(ENVIRONMENT, home, local_cloud, prefect_server, SERVER_VARIABLES, sections) as it:
        yield it


def _machine(served: Served, *, as_served: bool = False) -> dict[str, str]:
    """A command line's process on the same machine (state folder, project, local cloud, Prefect
    server): without the serving process's environment-setting variables, or `as_served`."""
    variables = {
        k: v for k, v in served.variables.items() if as_served or k not in SERVER_VARIABLES
    }
    return process_env(variables | {"PREFECT_API_URL": served.env["PREFECT_API_URL"]})


def _service(cloud: Any) -> tuple[int, str]:
    """The app's ECS service as the local cloud holds it: its desired count and task CPU."""
    ecs = cloud.client("ecs")
    [service] = ecs.describe_services(
        cluster=f"stackflow-{ENVIRONMENT}-cluster", services=[f"stackflow-{ENVIRONMENT}-app"]
    )["services"]
    task = ecs.describe_task_definition(taskDefinition=service["taskDefinition"])
    return int(service["desiredCount"]), str(task["taskDefinition"]["cpu"])


def _run_from_prefect(served: Served) -> tuple[Any, str, str]:
    """A deploy started from Prefect as the UI's Run button starts it, to its end: the flow run,
    its summary artifact (markdown) and its log lines."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )

    from stackflow.localprefect import drain_prefect_queues

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(f"deploy/{ENVIRONMENT}")
        run = client.create_flow_run_from_deployment(deployment.id)
        done = wait_for_state(
            client, run.id, served, lambda s: s.is_final(), timeout=DEPLOY_TIMEOUT_S
        )
        assert done.state.is_completed(), f"{done.state}\n{served.log_tail()}"
        drain_prefect_queues()
        [artifact] = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"up-{ENVIRONMENT}"])),
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])),
        )
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))
    return done, str(artifact.data), "\n".join(log.message for log in logs)


def _ignored_in(text: str, where: str) -> None:
    for variable in SERVER_VARIABLES:
        assert f"ignored: {variable}: variables set only what belongs to this machine" in text, (
            f"{variable} not reported as ignored in the {where}:\n{text[-4000:]}"
        )


def test_a_run_from_prefect_and_a_command_line_run_deploy_what_the_file_says(
    served: Served, local_cloud: Any
) -> None:
    """Local cloud, one environment, two processes. The served deployment's run (its process has
    STACKFLOW_APP_DESIRED_COUNT=3, STACKFLOW_APP_CPU=512 and STACKFLOW_CLOUD=aws) deploys the
    file's desired count (2), the default CPU and the local cloud; its log and its summary artifact
    name the file and every variable it ignored. The command line refuses those variables with
    nothing changed; in a process of its own it finds nothing to change (the same settings, so the
    same fingerprints) and records the same file. A change of the file then reaches both: the
    command line deploys it, and the next run from Prefect finds the app as the file says."""
    first, markdown, log = _run_from_prefect(served)
    assert _service(local_cloud) == (2, "256"), "the served run did not deploy the file's settings"
    assert f"- environment file: `{FILE}`" in markdown and "its kind's template" not in markdown
    assert "| app | up | updated |" in markdown and "**local cloud**" in markdown
    _ignored_in(markdown, "summary artifact")
    _ignored_in(log, "flow run's log")

    # the serving process's variables at the command line: refused, nothing run
    refused = cli(_machine(served, as_served=True), "up", "--env", ENVIRONMENT)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        "STACKFLOW_APP_DESIRED_COUNT: variables set only what belongs to this machine; set "
        "`desired_count` under [app] in environments/<name>.toml" in refused.stderr
    ), refused.stderr
    assert "engine operations" not in refused.stdout + refused.stderr

    # the command line in its own process: the same settings, so nothing to change
    again = cli(_machine(served), "up", "--env", ENVIRONMENT, "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    summary = json.loads(again.stdout)
    assert summary["engine_calls"] == [], summary["engine_calls"]
    assert summary["settings"]["environment_file"] == FILE
    assert summary["settings"]["ignored"] == [] and summary["settings"]["template"] is False
    assert not [k for k in summary["settings"]["overrides"] if k.startswith(("app", "cloud"))]
    assert _service(local_cloud) == (2, "256")

    # the file changes: the command line deploys it; a run from Prefect finds nothing to change
    declare(served.variables, ENVIRONMENT, app={"desired_count": 4})
    changed = cli(_machine(served), "up", "--env", ENVIRONMENT, "--json")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert json.loads(changed.stdout)["engine_calls"] == ["up:app"]
    assert _service(local_cloud) == (4, "256")
    second, markdown, log = _run_from_prefect(served)
    assert second.id != first.id
    assert "| app | up | unchanged |" in markdown, markdown
    _ignored_in(markdown, "second summary artifact")
    assert _service(local_cloud) == (4, "256")
    assert Path(served.state_dir / "pulumi-local").is_dir()  # the local cloud's backend, not AWS's
    assert not (served.state_dir / "pulumi-aws").exists()
