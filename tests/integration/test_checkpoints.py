"""Reading a stack's state straight from its backend, checked against the real Pulumi CLI v3.259:
stacks deployed by the project's engine (its `random` and `aws` providers served by the **local
cloud**, moto on loopback, not AWS) to a folder, to the session's PostgreSQL and to the local
cloud's S3. The reader must agree with what the CLI reports, see an update's lock and pending
operation while it runs (and after its `pulumi` is killed), list the stacks, and never start a
`pulumi` process."""

from __future__ import annotations

import getpass
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stackflow.engine import Listener, Operation, StackSpec
from stackflow.engine.automation import AutomationEngine
from stackflow.engine.checkpoints import Checkpoint, CheckpointReader
from stackflow.engine.envelope import SECRET_SIG, is_secret
from stackflow.localcloud.knobs import clear_knobs, set_knobs
from stackflow.postgres import PostgresServer, pulumi_backend_url
from stackflow.pulumi_cli import find_cli
from stackflow.settings import get_settings
from tests.fixtures.localcloud import LocalCloud
from tests.fixtures.s3backend import s3_url
from tests.realenv import unique

pytestmark = pytest.mark.integration

PROJECT = "ckpt"
NODE = "probe"  # the Pulumi project is <project>-<node>
PULUMI_PROJECT = f"{PROJECT}-{NODE}"
VPC = "aws:ec2/vpc:Vpc"


def probe_program(environment: str, *, vpc: bool = False) -> Callable[[], dict[str, Any]]:
    """A tiny program: a random password (a secret output), plain outputs of each JSON kind, a
    secret of its own and, with `vpc`, one VPC on the local cloud."""

    def program() -> dict[str, Any]:
        import pulumi
        import pulumi_aws as aws
        import pulumi_random as random

        word = random.RandomPassword("word", length=12, special=False)
        exports: dict[str, Any] = {
            "greeting": "hello",
            "count": 3,
            "ratio": 0.5,
            "enabled": True,
            "nested": {"a": [1, 2], "b": None},
            "password": word.result,
            "token": pulumi.Output.secret(f"s3cr3t-{environment}"),
        }
        if vpc:
            exports["vpc_id"] = aws.ec2.Vpc("probe", cidr_block="10.42.0.0/16").id
        return exports

    return program


@dataclass
class Backend:
    kind: str
    url: str
    state_dir: Path
    cloud: LocalCloud

    def engine(self) -> AutomationEngine:
        settings = get_settings(
            cloud="local",
            state_dir=self.state_dir,
            backend_url=self.url,
            localcloud={"dir": self.cloud.root, "port": self.cloud.port},
        )
        return AutomationEngine(settings)

    def cli(self, engine: AutomationEngine, spec: StackSpec, *args: str) -> str:
        """The real CLI in the stack's workspace, as the engine runs it; its stdout."""
        result = subprocess.run(
            [str(find_cli()), *args, "--stack", spec.environment],
            cwd=engine.ws.work_dir(spec),
            env={**os.environ, **engine.ws.env_vars()},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture(params=["file", "postgres", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, local_cloud: LocalCloud) -> Backend:
    """An empty backend of each kind, in the URL form verified with the real CLI."""
    kind = request.param
    if kind == "file":
        url = f"file://{tmp_path / 'backend'}"
    elif kind == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres")
        url = pulumi_backend_url(server, request.getfixturevalue("fresh_database"))
    else:
        url = s3_url(local_cloud, request.getfixturevalue("local_s3_bucket"), "team")
    return Backend(kind, url, tmp_path / "state", local_cloud)


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Call it to make any process start from here on fail the test."""

    def forbid() -> None:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"the reader started a process: {args!r}")

        monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
        monkeypatch.setattr(os, "posix_spawn", refuse)

    yield forbid


def spec_for(environment: str, *, vpc: bool = False) -> StackSpec:
    return StackSpec(PROJECT, environment, NODE, probe_program(environment, vpc=vpc))


def test_the_reader_agrees_with_the_cli_and_starts_no_pulumi(
    backend: Backend, no_processes: Callable[[], None]
) -> None:
    engine = backend.engine()
    spec = spec_for(unique("dev"))
    engine.run(Operation.UP, spec, Listener())
    shown = engine.outputs(spec)
    exported = json.loads(backend.cli(engine, spec, "stack", "export"))
    listed = json.loads(backend.cli(engine, spec, "stack", "ls", "--json"))

    no_processes()
    with CheckpointReader(backend.url) as reader:
        started = time.perf_counter()
        found = reader.checkpoint(PULUMI_PROJECT, spec.environment)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(20):
            assert reader.checkpoint(PULUMI_PROJECT, spec.environment) == found
        warm_s = (time.perf_counter() - started) / 20
        stacks = reader.stacks(PULUMI_PROJECT)
        locks = reader.locks(PULUMI_PROJECT, spec.environment)
        assert reader.checkpoint(PULUMI_PROJECT, "never-deployed") is None
        assert reader.stacks("no-such-project") == []

    assert isinstance(found, Checkpoint)
    assert found.manifest_time == exported["deployment"]["manifest"]["time"]
    assert found.pulumi_version == "v3.259.0"
    assert found.resource_count == len(exported["deployment"]["resources"])
    assert found.pending_operations == ()
    plain = {k: v.value for k, v in shown.items() if not v.secret}
    assert {k: v for k, v in found.outputs.items() if not is_secret(v)} == plain
    assert (
        found.secret_outputs == {"password", "token"} == {k for k, v in shown.items() if v.secret}
    )
    for name in found.secret_outputs:  # opaque: Pulumi's signature and ciphertext only
        assert set(found.outputs[name]) == {SECRET_SIG, "ciphertext"}
    stored = json.dumps(found.outputs)
    assert shown["token"].value not in stored and shown["password"].value not in stored
    assert stacks == [s["name"] for s in listed] == [spec.environment]
    assert locks == []
    print(
        f"\n{backend.kind}: checkpoint read {first_s * 1000:.1f} ms cold (connection included), "
        f"{warm_s * 1000:.2f} ms warm"
    )


def _cli_pids(environment: str) -> list[int]:
    """This process's child `pulumi` processes working on `environment` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and argv[0].endswith(b"pulumi") and environment.encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.faults
@pytest.mark.filterwarnings("ignore:Error in event stream")  # the killed CLI's event log ends short
def test_an_update_in_flight_shows_its_lock_and_pending_operation_even_after_its_cli_is_killed(
    backend: Backend,
) -> None:
    """The local cloud's `hang` knob holds the VPC's create: meanwhile the reader sees the
    update's lock (the CLI's pid, this host, this user) and the pending create; after the CLI is
    killed (SIGKILL, as a dead worker leaves it) both are still there for the next run to heal."""
    engine = backend.engine()
    done = spec_for(unique("dev"))
    engine.run(Operation.UP, done, Listener())
    spec = spec_for(unique("dev"), vpc=True)
    hang = {"kind": "hang", "environment": spec.environment, "type": VPC, "operations": ["create"]}
    set_knobs(backend.cloud.url, {"faults": [{**hang, "count": 1}]})
    failures: list[BaseException] = []

    def deploy() -> None:
        try:
            engine.run(Operation.UP, spec, Listener())
        except BaseException as exc:  # the CLI is killed: its error is expected, kept for a look
            failures.append(exc)

    runner = threading.Thread(target=deploy, daemon=True)
    runner.start()
    try:
        with CheckpointReader(backend.url) as reader:
            deadline = time.monotonic() + 180
            while True:  # until the create is in flight, as the backend shows it
                assert runner.is_alive(), failures
                locks = reader.locks(PULUMI_PROJECT, spec.environment)
                found = reader.checkpoint(PULUMI_PROJECT, spec.environment)
                pending = () if found is None else found.pending_operations
                if locks and any(op.resource_type == VPC for op in pending):
                    break
                assert time.monotonic() < deadline, "the update never showed a pending create"
                time.sleep(0.1)
            assert reader.locks(PULUMI_PROJECT, done.environment) == []
            assert reader.stacks(PULUMI_PROJECT) == sorted([done.environment, spec.environment])

            [holder] = locks
            assert holder.key.startswith(
                f".pulumi/locks/organization/{PULUMI_PROJECT}/{spec.environment}/"
            )
            assert holder.pid in _cli_pids(spec.environment)
            assert (holder.host, holder.user) == (socket.gethostname(), getpass.getuser())
            assert holder.time is not None
            [vpc] = [op for op in pending if op.resource_type == VPC]
            assert vpc.type == "creating" and vpc.urn.endswith(f"::{VPC}::probe")

            os.kill(holder.pid, signal.SIGKILL)
            runner.join(timeout=120)
            assert not runner.is_alive() and failures

            assert reader.locks(PULUMI_PROJECT, spec.environment) == [holder]
            left = reader.checkpoint(PULUMI_PROJECT, spec.environment)
            assert left is not None and vpc in left.pending_operations
    finally:
        clear_knobs(backend.cloud.url)
        for pid in _cli_pids(spec.environment):
            os.kill(pid, signal.SIGKILL)
        runner.join(timeout=60)


def test_a_gzip_checkpoint_reads_the_same(
    tmp_path: Path, local_cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_DIY_BACKEND_GZIP", "true")  # the CLI inherits it
    backend = Backend("file", f"file://{tmp_path / 'backend'}", tmp_path / "state", local_cloud)
    engine = backend.engine()
    spec = spec_for(unique("dev"))
    engine.run(Operation.UP, spec, Listener())
    exported = json.loads(backend.cli(engine, spec, "stack", "export"))
    stacks = tmp_path / "backend" / ".pulumi" / "stacks" / PULUMI_PROJECT
    assert (stacks / f"{spec.environment}.json.gz").is_file()
    assert not (stacks / f"{spec.environment}.json").exists()
    with CheckpointReader(backend.url) as reader:
        found = reader.checkpoint(PULUMI_PROJECT, spec.environment)
        assert reader.stacks(PULUMI_PROJECT) == [spec.environment]
    assert found is not None and found.key.endswith(".json.gz")
    assert found.manifest_time == exported["deployment"]["manifest"]["time"]
    assert found.outputs["greeting"] == "hello"
