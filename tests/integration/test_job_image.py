"""The job image, really built and run (docs/guides/container-image.md).

`scripts/build-image.sh --local-cloud` builds stackflow's image with podman (the Debian base
bootstrapped from Debian's packages, the project installed from the committed constraints, the
Pulumi CLI stackflow built, MariaDB). A Prefect **docker work pool** whose template names that
image then runs a deploy of a fixture environment: a real `prefect worker` of type docker
(prefect-docker) starts the flow run's container through `podman system service`'s
Docker-compatible socket. In the container the deploy runs the default graph with the real Pulumi
engine on a **local cloud** of the container's own (moto on loopback, not AWS), its state in a
folder this test mounts; it reaches the session's Prefect server on 127.0.0.1 through the host's
network. The state passphrase reaches the container only as a variable of its job, resolved by
the worker from a Prefect Secret block the pool's template names. The `run` target (the image
for AWS: no MariaDB, uid 10001) previews a fixture environment with `podman run`.

Minutes long (a cold build five to eight, the runs about two): slow tier, `-m slow`. Needs root
(rootful podman, debootstrap): `scripts/setup.sh --dev` installs and configures them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deployments.prefect_yaml import prefect_yaml
from deployments.serve import deployment_specs
from stackflow.engine.checkpoints import CheckpointReader
from stackflow.engine.pulumisecrets import passphrase_opens, passphrase_salt
from stackflow.localprefect import PrefectServer
from stackflow.processes import free_port
from tests.integration.team_support import Team, update_history, wait_for
from tests.realenv import ROOT, STACKS, declare, summary_of, unique
from tests.realenv import test_project as project_folder

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

BUILD = ROOT / "scripts" / "build-image.sh"
STATE_IN_IMAGE = "/var/lib/stackflow"  # the image's STACKFLOW_STATE_DIR
PROJECT_IN_CONTAINER = "/project"


def build_image(*options: str) -> subprocess.CompletedProcess[str]:
    """`bash scripts/build-image.sh [options]`, as a developer runs it."""
    return subprocess.run(
        ["bash", str(BUILD), *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        stdin=subprocess.DEVNULL,
    )


def built_image(*options: str) -> str:
    """The name `scripts/build-image.sh [options]` prints once the image is there (built or
    reused): `localhost/stackflow-run[-localcloud]:<hash of what went in>`."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the image is built and run with rootful podman")
    built = build_image(*options)
    assert built.returncode == 0, built.stderr[-6000:]
    return built.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def job_image() -> str:
    """The localcloud target's image, for the docker pool's runs."""
    return built_image("--local-cloud")


def fixture_project(folder: Path, environment: str) -> Path:
    """A project folder a container can mount: the kinds' templates, the fixture project's
    stackflow.toml and graph (copies), a copy of the repository's migrations, and
    `environment`'s own file."""
    project = project_folder(folder)
    (project / "migrations").unlink()  # a link to this checkout: the container sees a copy
    shutil.copytree(ROOT / "migrations", project / "migrations")
    declare({"STACKFLOW_PROJECT_DIR": str(project)}, environment)
    return project


def docker_client(url: str) -> Any:
    import docker

    return docker.DockerClient(base_url=url, timeout=60)


@pytest.fixture(scope="module")
def docker_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`podman system service` on a socket of this module's own: the Docker API the worker
    uses."""
    folder = tmp_path_factory.mktemp("podman")
    url = f"unix://{folder / 'podman.sock'}"
    with (folder / "service.log").open("wb") as log:
        service = subprocess.Popen(
            ["podman", "system", "service", "--time=0", url],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def answers() -> bool:
        assert service.poll() is None, (folder / "service.log").read_text()
        try:
            return bool(docker_client(url).ping())
        except Exception:  # not listening yet
            return False

    try:
        wait_for(answers, 60, "podman's Docker-compatible socket")
        yield url
    finally:
        service.terminate()
        service.wait(timeout=30)


@dataclass
class DockerPool:
    """The docker work pool's setup: the team's view of it (Prefect's API, the worker), the
    image its template names, the passphrase its Secret block holds, the mounted state folder."""

    team: Team
    image: str
    passphrase: str
    state: Path


@pytest.fixture(scope="module")
def docker_pool(
    tmp_path_factory: pytest.TempPathFactory,
    job_image: str,
    docker_socket: str,
    prefect_server: PrefectServer,
) -> Iterator[DockerPool]:
    """The guide's Docker setup: a Secret block holding the passphrase, a docker pool whose
    template names the image, the mounts and the block, `prefect deploy` of the environment's
    deploy deployment onto it, and one docker worker."""
    from prefect.blocks.system import Secret

    folder = tmp_path_factory.mktemp("docker-pool")
    tag = uuid.uuid4().hex[:8]
    environment = unique("dev")
    project = fixture_project(folder / "project", environment)
    state = folder / "state"
    state.mkdir()
    passphrase = f"image-passphrase-{uuid.uuid4().hex}"
    block = f"stackflow-passphrase-{tag}"
    Secret(value=passphrase).save(block)

    team = Team(
        api_url=prefect_server.api_url,
        auth="",
        pool=f"docker-{tag}",
        variables={"PREFECT_API_URL": prefect_server.api_url, "DOCKER_HOST": docker_socket},
        backend_url=f"file://{state}/pulumi-local",
        records_url=str(state / "records"),
        project=project,
        folder=folder,
        environments={"one": environment},
    )
    shown = team.prefect("work-pool", "get-default-base-job-template", "--type", "docker")
    template = json.loads(shown.stdout)
    defaults = {
        "image": job_image,
        "image_pull_policy": "Never",  # built here: no registry to pull from
        "network_mode": "host",  # the Prefect server answers on 127.0.0.1
        "auto_remove": False,  # kept for the test to inspect; removed at the module's end
        "volumes": [
            f"{project}:{PROJECT_IN_CONTAINER}:ro",
            f"{state}:{STATE_IN_IMAGE}",
        ],
        "env": {
            "STACKFLOW_PROJECT_DIR": PROJECT_IN_CONTAINER,
            "STACKFLOW_LOCALCLOUD_PORT": str(free_port()),
            "STACKFLOW_STATE_PASSPHRASE": f"{{{{ prefect.blocks.secret.{block} }}}}",
        },
    }
    for name, value in defaults.items():
        template["variables"]["properties"][name]["default"] = value
    template_file = folder / "pool.json"
    template_file.write_text(json.dumps(template))
    team.prefect(
        "work-pool",
        "create",
        team.pool,
        "--type",
        "docker",
        "--base-job-template",
        str(template_file),
    )
    specs = [
        s
        for s in deployment_specs([environment], project_dir=project)
        if s.full_name == f"deploy/{environment}"
    ]
    yaml_file = folder / "prefect.yaml"
    yaml_file.write_text(prefect_yaml(specs, pool=team.pool))
    team.prefect("--no-prompt", "deploy", "--prefect-file", str(yaml_file), "--all")
    try:
        team.start_worker("docker")
        yield DockerPool(team, job_image, passphrase, state)
    finally:
        team.stop_workers()
        ours = {"label": f"io.prefect.work-pool-name={team.pool}"}
        for container in docker_client(docker_socket).containers.list(all=True, filters=ours):
            container.remove(force=True)


def test_a_deploy_runs_in_the_job_image_through_a_docker_work_pool(
    docker_pool: DockerPool,
) -> None:
    """Local cloud, in the image: deploy/<env> on the docker pool completes in one container of
    the image (host network, the pool's mounts), the three stacks deployed into the mounted state
    with the passphrase of the Secret block, the migrations applied and the app verified.
    The passphrase is in the container's environment and nowhere the team can read: not the
    pool's template (the block's name only), the deployment, the flow run, its logs."""
    team, passphrase = docker_pool.team, docker_pool.passphrase
    environment = team.environments["one"]
    run = team.run(f"deploy/{environment}")
    ended = team.wait_final(run, 900)
    assert ended.state.type.value == "COMPLETED", team.explain(run)

    [container] = docker_client(team.variables["DOCKER_HOST"]).containers.list(
        all=True, filters={"label": f"io.prefect.flow-run-id={run}"}
    )
    assert docker_pool.image in container.image.tags
    assert container.attrs["State"]["ExitCode"] == 0
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    env = dict(line.split("=", 1) for line in container.attrs["Config"]["Env"])
    assert env["STACKFLOW_STATE_PASSPHRASE"] == passphrase  # resolved by the worker
    assert env["MALLOC_ARENA_MAX"] == "2"  # the deployment's job variables join the pool's
    assert env["STACKFLOW_PROJECT_DIR"] == PROJECT_IN_CONTAINER

    for stack in STACKS:
        history = update_history(team.backend_url, environment, stack)
        assert [r["result"] for r in history] == ["succeeded"], history
    with CheckpointReader(team.backend_url) as reader:
        found = reader.checkpoint("stackflow-database", environment)
    assert found is not None
    salt = passphrase_salt(found.secrets_provider)
    assert salt is not None and passphrase_opens(salt, passphrase)
    assert not passphrase_opens(salt, passphrase + "x")
    # the container's own local cloud kept its folder in the mount
    assert (docker_pool.state / "localcloud").is_dir()

    summary = team.artifact(run, f"up-{environment}")
    assert "**local cloud**" in summary
    for stack in STACKS:
        assert f"| {stack} | up | updated |" in summary, summary
    logs = team.logs_containing(run, "app healthy: http://")
    with team.client() as client:
        flow_run = client.read_flow_run(run)
        deployment = client.read_deployment(flow_run.deployment_id)
        pool = client.read_work_pool(team.pool)
    # the pull step kept its variable: the image's STACKFLOW_CHECKOUT chose where the run went
    assert "{{ $STACKFLOW_CHECKOUT }}" in json.dumps(deployment.pull_steps)
    readable = {
        "the pool's template": json.dumps(pool.base_job_template),
        "the deployment": deployment.model_dump_json(),
        "the flow run": flow_run.model_dump_json(),
        "its logs": logs,
        "the worker's log": team.workers["docker"].text(),
    }
    for where, text in readable.items():
        assert passphrase not in text, f"the passphrase is in {where}"
    assert "prefect.blocks.secret.stackflow-passphrase-" in readable["the pool's template"]


def test_the_run_target_previews_as_its_own_user(
    prefect_server: PrefectServer, tmp_path: Path
) -> None:
    """Local cloud: the `run` target (the image for AWS, no MariaDB) previews a fixture
    environment as uid 10001 with the CLI as a user types it (`podman run ... python
    flows/run.py preview`), on a local cloud inside its container; what it writes in its state
    folder is that user's."""
    image = built_image()
    assert image.startswith("localhost/stackflow-run:")
    environment = unique("dev")
    project = fixture_project(tmp_path / "project", environment)
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, 10001, 10001)
    command = ["podman", "run", "--rm", "--network", "host"]
    command += ["--volume", f"{project}:{PROJECT_IN_CONTAINER}:ro"]
    command += ["--volume", f"{state}:{STATE_IN_IMAGE}"]
    for name, value in {
        "STACKFLOW_PROJECT_DIR": PROJECT_IN_CONTAINER,
        "STACKFLOW_LOCALCLOUD_PORT": str(free_port()),
        "PREFECT_API_URL": prefect_server.api_url,
    }.items():
        command += ["--env", f"{name}={value}"]
    command += [image, "sh", "-c", 'id -u && exec python flows/run.py preview --env "$0"']
    done = subprocess.run([*command, environment], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert done.stdout.splitlines()[0] == "10001"
    assert summary_of(done.stdout) == dict.fromkeys(STACKS, "previewed"), done.stdout
    owners = {p.stat().st_uid for p in state.rglob("*")}
    assert owners == {10001}, owners


def test_an_unchanged_tree_reuses_its_image(job_image: str) -> None:
    """A second build of the same tree builds nothing: the image is named by a hash of what went
    into it, and that name exists."""
    again = build_image("--local-cloud")
    assert again.returncode == 0, again.stderr[-4000:]
    assert again.stdout.strip().splitlines()[-1] == job_image
    assert f"reusing {job_image}" in again.stderr
