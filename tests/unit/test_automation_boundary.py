"""The automation engine at its boundary with the Pulumi Automation API, for what the real runs
on the local cloud cannot reach: the aws cloud's backends and stack names (Pulumi Cloud, S3 with
KMS), a missing CLI, cancel of a running operation, a lock held past the retries, and error texts
the local cloud cannot produce.

What a real run proves (workspaces on the file backend, config with secrets, plugins, change
counts, outputs and events, each operation, outputs of missing and deployed stacks, removal) is
proved by the real engine in tests/integration/ and tests/faults/, not re-checked here. These
tests replace `create_or_select_stack` and `select_stack` with a recording fake that answers with
the SDK's own result classes and errors; the CLI version check is the SDK's real `PulumiCommand`,
run against a stand-in `pulumi` script that prints a version.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pulumi
import pulumi.automation as auto
import pytest
from pulumi.automation.events import EngineEvent
from pydantic import SecretStr

from stackflow.engine import Engine, Listener, Operation, StackSpec, get_engine
from stackflow.engine.automation import AutomationEngine, pulumi_program
from stackflow.engine.automation.command import RunningCommands, find_pulumi_cli
from stackflow.engine.automation.known import KnownStack
from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import ConfigValue, ResourceEvent
from stackflow.engine.classify import classify, is_transient_error
from stackflow.engine.deferred import DeferredEngine
from stackflow.errors import (
    EngineUnavailable,
    OperationCancelled,
    PermanentStackError,
    StackError,
    TransientStackError,
)
from stackflow.redact import MASK, Redactor
from stackflow.settings import Settings, get_settings

pytestmark = pytest.mark.unit

PASSPHRASE = "correct horse battery staple"
TOKEN = "pul-0123456789abcdef"
DB_PASSWORD = "hunter2-very-long-db-password"
GENERATED = "generated-Secret-Output-42"
CLI_VERSION = version("pulumi")  # the engine accepts exactly the SDK's version

# Pulumi CLI texts, as the SDK matches them (pulumi/automation/errors.py). The real texts of each
# kind of failure, captured from the CLI, are classified in tests/unit/test_cli_error_texts.py.
LOCKED = (
    "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to "
    "end or delete the lock file with `pulumi cancel`.\n"
    "  file:///state/.pulumi/locks/organization/t-networking/dev/8f1c.json: created by "
    "me@host (pid 4242) at 2024-05-01T10:00:00Z"
)
CONFLICT = "error: [409] Conflict: Another update is currently in progress."


# --- the recording fake -------------------------------------------------------------------------


def command_error(stderr: str = "", stdout: str = "", code: int = 255) -> auto.CommandError:
    """What the SDK raises when the CLI exits non-zero: typed by the SDK's own matcher."""
    return auto.errors.create_command_error(auto.CommandResult(stdout, stderr, code))


def engine_event(kind: str, op: str, name: str, type_: str = "aws:ec2/vpc:Vpc") -> EngineEvent:
    urn = f"urn:pulumi:dev::t-networking::{type_}::{name}"
    body: dict[str, Any] = {"metadata": {"op": op, "urn": urn, "type": type_, "provider": ""}}
    if kind == "resOpFailedEvent":
        body |= {"status": 1, "steps": 1}
    return EngineEvent.from_json({"sequence": 1, "timestamp": 0, kind: body})


def summary(**changes: int) -> auto.UpdateSummary:
    return auto.UpdateSummary(
        kind="update",
        start_time=datetime.now(),
        message="",
        environment={},
        config={},
        result="succeeded",
        resource_changes=changes,  # the CLI's JSON has plain string keys
    )


@dataclass
class FakeWorkspace:
    opts: auto.LocalWorkspaceOptions
    pulumi: FakePulumi
    plugins: list[tuple[str, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    env_vars: dict[str, str] = field(default_factory=dict)

    def install_plugin(self, name: str, version: str, kind: str = "resource") -> None:
        self.plugins.append((name, version))

    def list_stacks(self) -> list[auto.StackSummary]:
        return [auto.StackSummary("dev", True, resource_count=self.pulumi.resource_count)]

    def remove_stack(self, stack_name: str) -> None:
        self.removed.append(stack_name)


class FakeStack(KnownStack):
    """Answers like the engine's stacks (the SDK's `Stack`, adopted as a `KnownStack`): calls
    on_output / on_event, returns the SDK's result classes."""

    def __init__(self, name: str, workspace: FakeWorkspace) -> None:
        super().__init__(name, workspace)  # type: ignore[arg-type]
        self.pulumi = workspace.pulumi
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.cancelled = threading.Event()

    def _operate(self, method: str, kwargs: dict[str, Any]) -> None:
        self.calls.append((method, kwargs))
        p = self.pulumi
        for line in p.lines:
            kwargs["on_output"](line)
        if "on_event" in kwargs:
            for event in p.events:
                kwargs["on_event"](event)
        if method in p.block:
            p.started.set()
            p.block[method]()
            raise command_error("error: update canceled")
        planned = p.fail.get(method)
        if isinstance(planned, list):
            planned = planned.pop(0) if planned else None  # a list fails the next calls in turn
        if planned is not None:
            raise planned

    def set_all_config(self, config: dict[str, auto.ConfigValue]) -> None:
        self.calls.append(("set_all_config", {"config": config}))

    def remove_all_config(self, keys: list[str]) -> None:
        self.calls.append(("remove_all_config", {"keys": keys}))

    def up(self, **kwargs: Any) -> auto.UpResult:
        self._operate("up", kwargs)
        changes = {"create": 3, "update": 1, "delete": 1, "replace": 1, "same": 2}
        return auto.UpResult("", "", summary(**changes), self.outputs())

    def preview(self, **kwargs: Any) -> auto.PreviewResult:
        self._operate("preview", kwargs)
        return auto.PreviewResult("", "", {auto.OpType.CREATE: 4, auto.OpType.SAME: 1})

    def refresh(self, **kwargs: Any) -> auto.RefreshResult:
        self._operate("refresh", kwargs)
        return auto.RefreshResult("", "", summary(update=2, same=6))

    def preview_refresh(self, **kwargs: Any) -> auto.PreviewResult:
        self._operate("preview_refresh", kwargs)
        return auto.PreviewResult("", "", {"update": 1, "same": 7})

    def destroy(self, **kwargs: Any) -> auto.DestroyResult:
        self._operate("destroy", kwargs)
        return auto.DestroyResult("", "", summary(delete=8))

    def outputs(self) -> dict[str, auto.OutputValue]:
        return {
            "vpc_id": auto.OutputValue("vpc-0abc", secret=False),
            "subnet_ids": auto.OutputValue(["subnet-1", "subnet-2"], secret=False),
            "password": auto.OutputValue(GENERATED, secret=True),
        }

    def export_stack(self) -> auto.Deployment:
        return auto.Deployment(
            version=3,
            deployment={"manifest": {}, "resources": [], "pending_operations": self.pulumi.pending},
        )

    def cancel(self) -> None:
        self.calls.append(("cancel", {}))
        self.cancelled.set()
        if self.pulumi.cancel_error is not None:
            raise self.pulumi.cancel_error

    def method_calls(self, method: str) -> list[dict[str, Any]]:
        return [kwargs for name, kwargs in self.calls if name == method]


@dataclass
class FakePulumi:
    """Stands in for the two stack constructors of pulumi.automation and records their calls."""

    created: list[dict[str, Any]] = field(default_factory=list)
    selected: list[dict[str, Any]] = field(default_factory=list)
    stacks: dict[str, FakeStack] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    events: list[EngineEvent] = field(default_factory=list)
    fail: dict[str, Any] = field(default_factory=dict)
    block: dict[str, Callable[[], None]] = field(default_factory=dict)
    started: threading.Event = field(default_factory=threading.Event)
    pending: list[dict[str, Any]] = field(default_factory=list)
    cancel_error: BaseException | None = None
    resource_count: int | None = 8

    def create_or_select_stack(self, **kwargs: Any) -> FakeStack:
        self.created.append(kwargs)
        name = kwargs["stack_name"]
        if name not in self.stacks:
            self.stacks[name] = FakeStack(name, FakeWorkspace(kwargs["opts"], self))
        return self.stacks[name]

    def select_stack(self, **kwargs: Any) -> FakeStack:
        self.selected.append(kwargs)
        if kwargs["stack_name"] not in self.stacks:
            raise command_error(f"error: no stack named '{kwargs['stack_name']}' found")
        return self.stacks[kwargs["stack_name"]]

    def stack(self, name: str = "dev") -> FakeStack:
        return self.stacks[name]


@pytest.fixture
def fake_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `pulumi` in a cache of the test's own that answers `pulumi version` (all the SDK's
    PulumiCommand asks): the engine runs the cached CLI by its path."""
    cache = tmp_path / "cache"
    bin_dir = cache / "pulumi" / f"v{CLI_VERSION}" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "pulumi"
    script.write_text(f"#!/bin/sh\necho v{CLI_VERSION}\n")
    script.chmod(0o755)
    monkeypatch.setenv("STACKFLOW_CACHE_DIR", str(cache))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK", raising=False)
    return script


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, fake_cli: Path) -> FakePulumi:
    """The SDK stands in for the CLI and for the backend: the engine reads no checkpoint itself
    (as on Pulumi Cloud), so stacks are opened, their pending operations and outputs read, through
    the SDK's calls this fake answers. Reading checkpoints is the real engine's, on the local cloud."""
    recorder = FakePulumi()
    monkeypatch.setattr(Workspaces, "reads_checkpoints", property(lambda _self: False))
    monkeypatch.setattr(auto, "create_or_select_stack", recorder.create_or_select_stack)
    monkeypatch.setattr(auto, "select_stack", recorder.select_stack)
    return recorder


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "cloud": "aws",  # the AWS path, against the recording fake; the local cloud runs for real
        "state_dir": tmp_path / "state",
        "state_passphrase": SecretStr(PASSPHRASE),
    }
    return get_settings(**(values | overrides))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def engine(settings: Settings, fake: FakePulumi) -> AutomationEngine:
    return AutomationEngine(settings)


def toy() -> dict[str, Any]:
    return {"vpc_id": "vpc-0abc"}


def spec(**config: ConfigValue) -> StackSpec:
    return StackSpec("t", "dev", "networking", toy, config)


class Lines(Listener):
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.events: list[ResourceEvent] = []
        super().__init__(
            on_output=self.lines.append, on_event=self.events.append, redactor=Redactor()
        )


# --- the CLI check ------------------------------------------------------------------------------


def test_boundary_missing_cli_raises_engine_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("STACKFLOW_CACHE_DIR", str(tmp_path / "no-cache"))
    created: list[Any] = []
    monkeypatch.setattr(auto, "create_or_select_stack", lambda **kw: created.append(kw))

    with pytest.raises(EngineUnavailable) as info:
        AutomationEngine(settings).run(Operation.UP, spec(), Lines())

    message = str(info.value)
    assert f"v{CLI_VERSION}" in message and "bash scripts/setup.sh" in message
    assert created == []


def test_boundary_versions_name_sdk_plugins_and_cli(engine: AutomationEngine) -> None:
    assert engine.versions() == {
        "engine": "automation",
        "cloud": "aws",
        "pulumi-sdk": version("pulumi"),
        "pulumi-aws": version("pulumi-aws"),
        "pulumi-random": version("pulumi-random"),
        "pulumi-cli": CLI_VERSION,
    }


def test_boundary_get_engine_builds_the_automation_engine_lazily(settings: Settings) -> None:
    engine = get_engine(settings)  # no CLI, no Pulumi SDK needed until first use
    assert isinstance(engine, DeferredEngine) and isinstance(engine, Engine)
    assert engine.name == "automation" and engine.built is None
    assert engine.versions()["pulumi-sdk"] == version("pulumi") and engine.built is None
    assert isinstance(engine.engine(), AutomationEngine) and engine.built is engine.engine()


# --- stack selection and workspace --------------------------------------------------------------


def test_boundary_config_keys_the_spec_no_longer_has_are_removed(
    engine: AutomationEngine, fake: FakePulumi
) -> None:
    """A value taken out of a rehearsed project's stack file does not linger in the copy of the
    stack's config in stackflow's workspace (read from that file, without a `pulumi`)."""
    stack_spec = spec(**{"p:kept": ConfigValue("1")})
    work_dir = engine.ws.work_dir(stack_spec)
    work_dir.mkdir(parents=True)
    (work_dir / "Pulumi.dev.yaml").write_text(
        "encryptionsalt: v1:x\nconfig:\n  p:kept: '0'\n  p:gone: x\n  aws:profile: old\n"
    )
    engine.run(Operation.PREVIEW, stack_spec, Listener())
    stack = fake.stacks["dev"]
    assert stack.method_calls("remove_all_config") == [{"keys": ["p:gone", "aws:profile"]}]
    (work_dir / "Pulumi.dev.yaml").write_text("config:\n  p:kept: '1'\n")
    engine.run(Operation.PREVIEW, stack_spec, Listener())
    assert len(stack.method_calls("remove_all_config")) == 1  # nothing stale: no call


def test_boundary_org_qualified_stack_on_pulumi_cloud(tmp_path: Path, fake: FakePulumi) -> None:
    settings = make_settings(
        tmp_path,
        pulumi_org="acme",
        backend_url="https://api.pulumi.com",
        pulumi_access_token=SecretStr(TOKEN),
        aws={"profile": "deploy"},
    )
    AutomationEngine(settings).run(Operation.PREVIEW, spec(), Lines())

    [call] = fake.created
    assert call["stack_name"] == "acme/t-networking/dev"
    env = call["opts"].env_vars
    assert env["PULUMI_ACCESS_TOKEN"] == TOKEN
    assert env["PULUMI_BACKEND_URL"] == "https://api.pulumi.com"
    assert env["AWS_PROFILE"] == "deploy"


def test_boundary_s3_backend_with_kms_secrets_provider(tmp_path: Path, fake: FakePulumi) -> None:
    settings = make_settings(
        tmp_path,
        state_passphrase=None,
        backend_url="s3://acme-state/stackflow",
        secrets_provider="awskms://alias/stackflow",
    )
    AutomationEngine(settings).run(Operation.PREVIEW, spec(), Lines())

    opts: auto.LocalWorkspaceOptions = fake.created[0]["opts"]
    assert opts.secrets_provider == "awskms://alias/stackflow"
    # the URL reaches the CLI through its environment alone, never the workspace's Pulumi.yaml
    assert opts.project_settings is not None and opts.project_settings.backend is None
    assert opts.env_vars is not None
    assert opts.env_vars["PULUMI_BACKEND_URL"] == "s3://acme-state/stackflow"
    assert "PULUMI_CONFIG_PASSPHRASE" not in opts.env_vars
    assert "PULUMI_ACCESS_TOKEN" not in opts.env_vars


def test_boundary_pulumi_program_exports_each_key(monkeypatch: pytest.MonkeyPatch) -> None:
    exported: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda key, value: exported.__setitem__(key, value))
    pulumi_program(lambda: {"vpc_id": "vpc-1", "port": 3306})()
    assert exported == {"vpc_id": "vpc-1", "port": 3306}


# --- operations ---------------------------------------------------------------------------------


def test_boundary_output_lines_are_redacted(tmp_path: Path, fake: FakePulumi) -> None:
    settings = make_settings(
        tmp_path, backend_url="https://api.pulumi.com", pulumi_access_token=SecretStr(TOKEN)
    )
    engine = AutomationEngine(settings)
    engine.run(Operation.PREVIEW, spec(), Lines())
    engine.outputs(spec())  # reads a secret output: the engine learns it
    fake.lines = [
        "Updating (dev):",
        f"  + aws:rds:Instance db creating (masterPassword={DB_PASSWORD}, zone=eu-west-1a)",
        f"debug: env PULUMI_CONFIG_PASSPHRASE={PASSPHRASE} PULUMI_ACCESS_TOKEN={TOKEN}",
        f"    generated: {GENERATED}",
        "Resources: + 3 created",
    ]
    listener = Lines()
    engine.run(Operation.UP, spec(dbPassword=ConfigValue(DB_PASSWORD, secret=True)), listener)

    text = "\n".join(listener.lines)
    for secret in (PASSPHRASE, TOKEN, DB_PASSWORD, GENERATED):
        assert secret not in text
    assert f"(masterPassword={MASK}, zone=eu-west-1a)" in text
    assert "Resources: + 3 created" in text


# --- errors -------------------------------------------------------------------------------------


# Texts the local cloud cannot produce (Pulumi Cloud's lock, the network, compilers); the ones it
# can are real captured texts in tests/unit/test_cli_error_texts.py.
@pytest.mark.parametrize(
    ("stderr", "stdout", "transient"),
    [
        pytest.param(CONFLICT, "", True, id="cloud-409-conflict"),
        pytest.param(
            "error: failed to get credentials: dial tcp: lookup sts.eu-west-1.amazonaws.com: "
            "no such host",
            "",
            True,
            id="dns",
        ),
        pytest.param(
            "error: read tcp 10.0.0.5:443: read: connection reset by peer", "", True, id="reset"
        ),
        pytest.param("error: [503] 503 Service Unavailable", "", True, id="backend-unavailable"),
        pytest.param("", "program.py:3: syntax error: unexpected indent", False, id="compile"),
        pytest.param("error: something nobody has seen before", "", False, id="unknown"),
    ],
)
def test_boundary_classifies_error_texts_beyond_the_local_cloud(
    stderr: str, stdout: str, transient: bool
) -> None:
    exc = command_error(stderr, stdout)
    error = classify(exc, "dev/networking", Redactor())

    assert isinstance(error, TransientStackError if transient else PermanentStackError)
    assert is_transient_error(exc) is transient
    assert is_transient_error(error) is transient
    assert str(error).startswith("stack 'dev/networking': ")
    assert error.stack == "dev/networking"


def test_boundary_sdk_types_lock_texts_as_concurrent_updates() -> None:
    assert isinstance(command_error(LOCKED), auto.ConcurrentUpdateError)
    assert isinstance(command_error(CONFLICT), auto.ConcurrentUpdateError)
    assert isinstance(command_error("", "Build FAILED."), auto.CompilationError)


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (ConnectionResetError("Connection reset by peer"), True),
        (TimeoutError(), True),
        (RuntimeError("summary event never found"), False),
        (auto.InvalidVersionError("Could not get Pulumi CLI version"), False),
    ],
)
def test_boundary_classifies_errors_outside_the_cli(exc: Exception, transient: bool) -> None:
    assert is_transient_error(exc) is transient
    error = classify(exc, "dev/app", Redactor())
    assert isinstance(error, TransientStackError if transient else PermanentStackError)
    assert str(error).strip() != "stack 'dev/app':"


def test_boundary_error_text_is_redacted_inside_raised_exceptions(
    engine: AutomationEngine, fake: FakePulumi
) -> None:
    fake.fail["up"] = command_error(
        stderr=f"error: update failed; PULUMI_CONFIG_PASSPHRASE={PASSPHRASE}",
        stdout=f"    error: an unhandled error occurred: bad password {DB_PASSWORD!r}",
    )
    with pytest.raises(PermanentStackError) as info:
        engine.run(Operation.UP, spec(pw=ConfigValue(DB_PASSWORD, secret=True)), Lines())

    error = info.value
    for shown in (str(error), repr(error), repr(error.args), error.reason):
        assert PASSPHRASE not in shown and DB_PASSWORD not in shown
    assert MASK in str(error) and "unhandled error" in str(error)
    assert error.__cause__ is None and error.__context__ is None  # the raw text is not chained


def test_boundary_lock_conflict_past_retries_becomes_permanent(
    tmp_path: Path, fake: FakePulumi
) -> None:
    engine = AutomationEngine(make_settings(tmp_path, stack_retries=2))
    fake.fail["up"] = [command_error(LOCKED) for _ in range(3)]

    for _ in range(2):
        with pytest.raises(TransientStackError):
            engine.run(Operation.UP, spec(), Lines())
    with pytest.raises(PermanentStackError) as info:
        engine.run(Operation.UP, spec(), Lines())

    message = str(info.value)
    assert "still locked after 3 attempts" in message
    assert ".pulumi/locks" in message and "pulumi cancel" in message

    engine.run(Operation.UP, spec(), Lines())  # the lock was cleared: success resets the count
    fake.fail["up"] = [command_error(LOCKED)]
    with pytest.raises(TransientStackError):
        engine.run(Operation.UP, spec(), Lines())


# --- cancel and recover -------------------------------------------------------------------------


def _run_in_thread(
    engine: AutomationEngine, fake: FakePulumi
) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def target() -> None:
        try:
            engine.run(Operation.UP, spec(), Lines())
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    assert fake.started.wait(10), "the fake up never started"
    return thread, raised


@pytest.fixture
def cloud_engine(tmp_path: Path, fake: FakePulumi) -> AutomationEngine:
    settings = make_settings(
        tmp_path, backend_url="https://api.pulumi.com", pulumi_access_token=SecretStr(TOKEN)
    )
    return AutomationEngine(settings)


def test_boundary_cancel_calls_stack_cancel_while_up_runs(
    cloud_engine: AutomationEngine, fake: FakePulumi
) -> None:
    cloud_engine.run(Operation.PREVIEW, spec(), Lines())  # the stack exists and is cached
    stack = fake.stack()
    fake.block["up"] = lambda: stack.cancelled.wait(10) or None
    thread, raised = _run_in_thread(cloud_engine, fake)

    cloud_engine.cancel(spec())
    thread.join(10)

    assert stack.method_calls("cancel") == [{}]
    assert len(raised) == 1 and isinstance(raised[0], OperationCancelled)
    assert "cancelled" in str(raised[0])


def test_boundary_cancel_without_a_running_operation_does_nothing(
    cloud_engine: AutomationEngine, fake: FakePulumi
) -> None:
    cloud_engine.cancel(spec())  # never run: nothing cached
    cloud_engine.run(Operation.UP, spec(), Lines())
    cloud_engine.cancel(spec())  # finished: nothing running
    assert fake.stack().method_calls("cancel") == []


def test_boundary_cancel_swallows_nothing_to_cancel(
    cloud_engine: AutomationEngine, fake: FakePulumi
) -> None:
    cloud_engine.run(Operation.PREVIEW, spec(), Lines())
    stack = fake.stack()
    fake.cancel_error = command_error("error: stack acme/t-networking/dev has never been updated")
    fake.block["up"] = lambda: stack.cancelled.wait(10) or None
    thread, raised = _run_in_thread(cloud_engine, fake)

    cloud_engine.cancel(spec())  # does not raise
    thread.join(10)
    assert isinstance(raised[0], OperationCancelled)


@pytest.fixture
def local_pulumi(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A child process standing in for one `pulumi up --stack dev` of ours."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    yield child
    if child.poll() is None:
        child.kill()
        child.wait()


def test_boundary_cancel_on_file_backend_interrupts_our_cli_not_the_lock(
    engine: AutomationEngine, fake: FakePulumi, local_pulumi: subprocess.Popen[str]
) -> None:
    engine.run(Operation.PREVIEW, spec(), Lines())
    stack = fake.stack()

    def until_the_child_ends() -> None:
        with engine.commands.running("dev", local_pulumi):  # as PulumiCLI.run registers it
            local_pulumi.wait(10)

    fake.block["up"] = until_the_child_ends
    thread, raised = _run_in_thread(engine, fake)

    engine.cancel(spec())
    thread.join(10)

    assert stack.method_calls("cancel") == []  # `pulumi cancel` would only delete our own lock
    assert local_pulumi.returncode not in (None, 0)
    assert isinstance(raised[0], OperationCancelled)


def test_the_cli_runs_in_a_process_group_of_its_own_without_stackflows_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_cli: Path
) -> None:
    """A terminal's Ctrl-C reaches stackflow, not `pulumi` (stackflow cancels it once), and
    `pulumi` and its plugins never inherit stackflow's own settings (a passphrase among them)."""
    import json
    import os

    fake_cli.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = version ] && echo v{CLI_VERSION} && exit 0\n'
        f"exec {sys.executable} -c 'import os, json; "
        'print(json.dumps({"sid": os.getsid(0), "pgid": os.getpgid(0), '
        '"stackflow": sorted(k for k in os.environ if k.startswith("STACKFLOW_") and '
        'k != "STACKFLOW_CACHE_DIR"), "extra": os.environ.get("EXTRA")}))\''
        "\n"
    )
    monkeypatch.setenv("STACKFLOW_STATE_PASSPHRASE", "canary-passphrase-777")
    commands = RunningCommands()
    cli = find_pulumi_cli(commands)
    result = cli.run(["about"], str(tmp_path), {"EXTRA": "given"})
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["sid"] != os.getsid(0) and seen["pgid"] != os.getpgid(0)
    assert seen["stackflow"] == [] and seen["extra"] == "given"
    assert "canary-passphrase-777" not in result.stdout


class StateRoundTrip:
    """`pulumi stack export` and `stack import --file` as recovery runs them (through the stack's
    command runner): the export holds the fake's pending operations; imports are kept."""

    def __init__(self, fake: FakePulumi) -> None:
        self.fake = fake
        self.commands: list[list[str]] = []
        self.imported: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = [{"urn": "stack"}]

    def __call__(self, stack: Any, args: list[str], on_output: Any = None) -> auto.CommandResult:
        import json

        self.commands.append(args)
        if args[:2] == ["stack", "import"]:
            self.imported.append(json.loads(Path(args[args.index("--file") + 1]).read_text()))
            return auto.CommandResult(stdout="", stderr="", code=0)
        deployment = {"resources": self.resources, "pending_operations": self.fake.pending}
        body = {"version": 3, "deployment": deployment}
        return auto.CommandResult(stdout=json.dumps(body), stderr="", code=0)


def test_boundary_recover_imports_the_pending_creates_found_and_clears_the_rest(
    engine: AutomationEngine, fake: FakePulumi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stackflow.engine.automation import recovery
    from stackflow.engine.pending import PendingCreate, Verdict

    engine.run(Operation.UP, spec(), Lines())
    vpc = "urn:pulumi:dev::t-networking::aws:ec2/vpc:Vpc::vpc"
    eip = "urn:pulumi:dev::t-networking::aws:ec2/eip:Eip::nat"
    fake.pending = [
        {
            "resource": {
                "urn": vpc,
                "type": "aws:ec2/vpc:Vpc",
                "inputs": {"cidrBlock": "10.0.0.0/16"},
            },
            "type": "creating",
        },
        {"resource": {"urn": eip, "type": "aws:ec2/eip:Eip", "inputs": {}}, "type": "creating"},
        {
            "resource": {"urn": "urn:pulumi:dev::t-networking::aws:ec2/subnet:Subnet::a"},
            "type": "updating",
        },
    ]
    state = StateRoundTrip(fake)
    replaced = {"urn": vpc, "type": "aws:ec2/vpc:Vpc", "id": "vpc-0old"}  # a create-replacement
    state.resources.append(replaced)
    monkeypatch.setattr(recovery, "run_stack_command", state)

    def look_up(pending: PendingCreate, clients: Any, held: Any) -> Verdict:
        return Verdict(pending, found="vpc-0new" if pending.urn == vpc else None)

    monkeypatch.setattr(recovery, "look_up", look_up)
    fresh = AutomationEngine(engine.settings)  # a new run: selects the stack, nothing cached
    listener = Lines()

    recovered = fresh.recover(spec(), listener)

    assert recovered and not recovered.unlocked and recovered.other_pending == 1
    assert [v.found for v in recovered.verdicts] == ["vpc-0new", None]
    assert recovered.note == (
        "recovered what an interrupted operation left: cleared 1 pending updates, deletes or "
        "reads; imported aws:ec2/vpc:Vpc vpc as vpc-0new: AWS had made it; cleared "
        "aws:ec2/eip:Eip nat: AWS never made it"
    )
    said = "\n".join(listener.lines)
    assert (
        "stack dev/networking has 3 pending operations left by an interrupted update; looking "
        "its pending creates up in AWS" in said
    )
    assert "stack dev/networking: imported aws:ec2/vpc:Vpc vpc as vpc-0new" in said
    # the state imported: the found create among the resources with its id, nothing pending
    (imported,) = state.imported
    assert imported["deployment"]["pending_operations"] == []
    assert imported["deployment"]["resources"][1] == {**replaced, "delete": True}  # it goes next
    assert imported["deployment"]["resources"][-1] == {
        "urn": vpc,
        "type": "aws:ec2/vpc:Vpc",
        "inputs": {"cidrBlock": "10.0.0.0/16"},
        "id": "vpc-0new",
        "outputs": {"cidrBlock": "10.0.0.0/16"},
    }
    assert [c[:2] for c in state.commands] == [["stack", "export"], ["stack", "import"]]
    assert "--show-secrets" not in state.commands[0]  # the export keeps secrets encrypted
    [refresh] = fake.stack().method_calls("refresh")  # then a refresh reads them from the cloud
    assert refresh["clear_pending_creates"] is True
    assert len(fake.created) == 1 and len(fake.selected) == 1


def test_boundary_recover_with_nothing_pending(
    engine: AutomationEngine, fake: FakePulumi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stackflow.engine.automation import recovery

    monkeypatch.setattr(recovery, "run_stack_command", StateRoundTrip(fake))
    assert not engine.recover(spec(), Lines())  # no stack yet: nothing created for it
    assert fake.created == []
    engine.run(Operation.UP, spec(), Lines())
    recovered = engine.recover(spec(), Lines())
    assert not recovered and recovered.note == ""
    assert fake.stack().method_calls("refresh") == []


# --- outputs, exists, remove --------------------------------------------------------------------


def test_boundary_remove_of_a_stack_with_resources_is_permanent(
    engine: AutomationEngine, fake: FakePulumi, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.run(Operation.UP, spec(), Lines())

    def refuse(stack_name: str) -> None:
        raise command_error(
            "error: 'dev' still has resources; removal rejected. Possible actions:\n"
            "- Make sure that 'dev' is the stack that you want to destroy\n"
            "- Run `pulumi destroy` to delete the resources, then run `pulumi stack rm`"
        )

    monkeypatch.setattr(fake.stack().workspace, "remove_stack", refuse)
    with pytest.raises(PermanentStackError, match="still has resources"):
        engine.remove(spec())


def test_boundary_stack_errors_pass_through_classify_unchanged() -> None:
    error: StackError = TransientStackError("dev/app", "held")
    assert classify(error, "dev/app", Redactor()) is error


def test_programs_declared_at_once_in_one_process_never_see_a_half_loaded_provider() -> None:
    """pulumi_aws loads `aws.ec2` and the rest on first use, and that load is not thread-safe:
    four programs first touching them at the same moment (environments deployed by one parent
    flow) once failed with "module 'pulumi_aws.ec2' has no attribute 'Vpc'". A fresh interpreter,
    as the first deploy of a process is."""
    code = """
import threading
import pulumi_aws as aws
from stackflow.engine.automation import declared_exports

programs = [
    lambda: {"t": aws.ec2.Vpc},
    lambda: {"t": aws.rds.Instance},
    lambda: {"t": aws.ecs.Cluster},
    lambda: {"t": aws.ec2.Subnet},
]
barrier, errors = threading.Barrier(len(programs)), []

def declare(program):
    barrier.wait()
    try:
        declared_exports(program)
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=declare, args=(p,)) for p in programs]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def _step(op: str, old: dict[str, Any] | None, new: dict[str, Any] | None, **extra: Any) -> Any:
    """An engine step as Pulumi's JSON event stream carries it."""
    from pulumi.automation.events import StepEventMetadata

    def state(inputs: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "aws:ec2/vpc:Vpc",
            "urn": "urn:pulumi:dev::p::aws:ec2/vpc:Vpc::main",
            "custom": True,
            "inputs": inputs,
            "outputs": {},
        }

    return StepEventMetadata.from_json(
        {
            "op": op,
            "urn": "urn:pulumi:dev::p::aws:ec2/vpc:Vpc::main",
            "type": "aws:ec2/vpc:Vpc",
            "provider": "",
            **({"old": state(old)} if old is not None else {}),
            **({"new": state(new)} if new is not None else {}),
            **extra,
        }
    )


def test_a_previewed_step_names_each_property_and_masks_secrets() -> None:
    """Pulumi's detailed diff becomes property changes: paths into nested values resolve, the
    property that forces replacement is marked, secrets (by Pulumi's signature and by the
    redactor) are masked, unknown values say so, long values are cut."""
    from stackflow.engine.automation import resource_change

    sig = "4dabf18193072939515e22adb298388d"
    old = {
        "cidrBlock": "10.0.0.0/16",
        "tags": {"Name": "a", "team.name": "x"},
        "rules": [{"port": 80}],
        "password": {sig: "1b47061264138c4ac30d75fd1eb44270", "value": "hunter2-secret"},
        "note": "mentions hunter2-secret",
    }
    new = {
        "cidrBlock": "10.1.0.0/16",
        "tags": {"Name": "b"},
        "rules": [{"port": 443}],
        "password": {sig: "1b47061264138c4ac30d75fd1eb44270", "value": "other-secret"},
        "arn": "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
        "note": "y" * 500,
    }
    detailed = {
        "cidrBlock": {"diffKind": "update-replace", "inputDiff": True},
        "tags.Name": {"diffKind": "update", "inputDiff": True},
        'tags["team.name"]': {"diffKind": "delete", "inputDiff": True},
        "rules[0].port": {"diffKind": "update", "inputDiff": True},
        "password": {"diffKind": "update", "inputDiff": True},
        "arn": {"diffKind": "add", "inputDiff": True},
        "note": {"diffKind": "update", "inputDiff": True},
    }
    change = resource_change(
        _step("replace", old, new, detailedDiff=detailed, keys=["cidrBlock"]),
        Redactor(["hunter2-secret"]),
    )
    assert change is not None and change.change == "replace" and change.name == "main"
    props = {p.name: p for p in change.properties}
    assert change.replaced_by == ["cidrBlock"]
    assert (props["cidrBlock"].old, props["cidrBlock"].new) == ("10.0.0.0/16", "10.1.0.0/16")
    assert (props["tags.Name"].old, props["tags.Name"].new) == ("a", "b")
    assert props['tags["team.name"]'].kind == "delete" and props['tags["team.name"]'].old == "x"
    assert (props["rules[0].port"].old, props["rules[0].port"].new) == (80, 443)
    assert (props["password"].old, props["password"].new) == (MASK, MASK)
    assert props["arn"].kind == "add" and props["arn"].new == "(known after apply)"
    assert props["note"].old == f"mentions {MASK}" and len(props["note"].new) == 120
    assert "hunter2-secret" not in repr(change.as_dict())


def test_steps_that_change_nothing_are_not_changes() -> None:
    from stackflow.engine.automation import resource_change

    assert resource_change(_step("same", {"a": 1}, {"a": 1}), Redactor()) is None
    assert resource_change(_step("read", None, {"a": 1}), Redactor()) is None
    created = resource_change(_step("create", None, {"a": 1}), Redactor())
    assert created is not None and created.change == "create"
    assert [(p.name, p.kind, p.new) for p in created.properties] == [("a", "add", 1)]
