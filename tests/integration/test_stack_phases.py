"""The stack task's phases (`tasks.stack`), each called alone, on the real Pulumi engine and the
session's **local cloud** (moto on loopback, not AWS) and Prefect server (the stack slots).

A fixture graph of its own: `logs` (a CloudWatch log group, then an S3 bucket tagged with the
group's name) and `reader` (a log group named after the `logs` group). One environment is
deployed once for the module, through the phases themselves; the tests that change a stack use
an environment of their own.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from stackflow import fingerprint, holders
from stackflow.dag import Node, NodeKind, StackGraph
from stackflow.drift import DriftMark
from stackflow.engine import Operation
from stackflow.errors import OperationCancelled, PermanentStackError, TransientStackError
from stackflow.localcloud.knobs import clear_knobs, set_knobs
from stackflow.outcome import NodeOutcome, PreviewResult, RefreshResult, Status, UpResult
from stackflow.progress import NodeChanged, NodeState, ProgressEvent, ProgressHub
from tasks.context import RunContext
from tasks.stack.call import StackCall
from tasks.stack.hold import held, recover
from tasks.stack.inputs import Inputs, gather
from tasks.stack.operate import operate
from tasks.stack.report import deployed, report
from tasks.stack.skip import skipped
from tests.faults.helpers import active_slots, checkpoint, lock_files, use_variables
from tests.realenv import real_variables, settings_for, unique

pytestmark = pytest.mark.integration
BUCKET = "aws:s3/bucket:Bucket"


class LogsArgs(BaseModel, frozen=True):
    prefix: str


class LogsOutputs(BaseModel):
    group_name: str
    bucket: str


class ReaderArgs(BaseModel, frozen=True):
    group_name: str


class ReaderOutputs(BaseModel):
    group_name: str


def logs_program(args: LogsArgs) -> dict[str, Any]:
    import pulumi_aws as aws

    group = aws.cloudwatch.LogGroup("group", name=f"/{args.prefix}/phases", retention_in_days=1)
    bucket = aws.s3.Bucket("bucket", tags={"group": group.name})
    return {"group_name": group.name, "bucket": bucket.bucket}


def reader_program(args: ReaderArgs) -> dict[str, Any]:
    import pulumi_aws as aws

    group = aws.cloudwatch.LogGroup("reader", name=f"{args.group_name}/reader")
    return {"group_name": group.name}


def _reader_args(settings: Any, up: Any) -> ReaderArgs:
    return ReaderArgs(group_name=typing.cast(LogsOutputs, up["logs"]).group_name)


GRAPH = StackGraph(
    [
        Node(
            "logs",
            NodeKind.STACK,
            "a log group, then a bucket tagged with its name",
            outputs=LogsOutputs,
            inputs=lambda settings, _: LogsArgs(prefix=settings.environment),
            program=logs_program,
            task=object(),  # never submitted: the phases are called alone
            sources=(Path(__file__),),
        ),
        Node(
            "reader",
            NodeKind.STACK,
            "a log group named after the logs stack's",
            upstream=("logs",),
            outputs=ReaderOutputs,
            inputs=_reader_args,
            program=reader_program,
            task=object(),
            sources=(Path(__file__),),
        ),
    ]
)


@dataclass
class Phases:
    """One environment's run context, and what its phases told the live view."""

    ctx: RunContext
    cloud: Any  # the session's local cloud
    said: list[NodeChanged] = field(default_factory=list)

    def call(self, node: str, operation: Operation, attempt: int = 1) -> StackCall:
        return StackCall(self.ctx, node, operation, attempt, logging.getLogger("test-phases"))

    def inputs(self, node: str, operation: Operation) -> Inputs:
        return gather(self.call(node, operation), {}, None, False)

    def states(self, node: str) -> list[tuple[NodeState, Status | None]]:
        return [(e.state, e.status) for e in self.said if e.node == node]

    def run(self, node: str, operation: Operation, attempt: int = 1) -> NodeOutcome:
        """The phases after the skip, as the task runs them."""
        call = self.call(node, operation, attempt)
        inputs = gather(call, {}, None, False)
        stored = deployed(call, inputs.spec)
        with held(call, inputs.spec) as fence:
            recover(call, inputs.spec, fence)
            done = operate(call, inputs)
        return report(call, inputs, done, stored)

    def attempt(self, node: str, operation: Operation) -> None:
        """Take the stack and operate on it, as a first attempt does (it is to fail)."""
        call = self.call(node, operation)
        inputs = gather(call, {}, None, False)
        with held(call, inputs.spec):
            operate(call, inputs)

    def refuse(self, kind: str) -> None:
        """The local cloud refuses this environment's next bucket create."""
        env = self.ctx.settings.environment
        fault = {"kind": kind, "count": 1, "environment": env, "type": BUCKET}
        set_knobs(self.cloud.url, {"faults": [fault]})


def _phases(variables: dict[str, str], environment: str, cloud: Any) -> Iterator[Phases]:
    from flows.walk import build_context

    settings = settings_for(variables, environment)
    ctx = replace(build_context(settings, GRAPH), progress=ProgressHub())
    phases = Phases(ctx, cloud)

    def hear(event: ProgressEvent) -> None:
        if isinstance(event, NodeChanged):
            phases.said.append(event)

    with ctx.progress.subscribed(hear):
        yield phases


@pytest.fixture(scope="module")
def module_environment(
    tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any
) -> tuple[dict[str, str], str]:
    state = tmp_path_factory.mktemp("phases") / "state"
    return real_variables(state, local_cloud, prefect_server), unique("dev")


@pytest.fixture
def shared(
    module_environment: tuple[dict[str, str], str],
    local_cloud: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Phases]:
    """The module's environment (its `logs` stack deployed by the first test that needs it), in
    a run context of the test's own."""
    variables, environment = module_environment
    use_variables(monkeypatch, variables)
    yield from _phases(variables, environment, local_cloud)


@pytest.fixture
def own(
    tmp_path: Path, local_cloud: Any, prefect_server: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Phases]:
    """An environment of the test's own; the local cloud's knobs cleared after it."""
    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    use_variables(monkeypatch, variables)
    try:
        yield from _phases(variables, unique("dev"), local_cloud)
    finally:
        clear_knobs(local_cloud.url)


def _deploy(phases: Phases) -> NodeOutcome:
    """`logs` up through the phases, once per environment (later calls skip it)."""
    call = phases.call("logs", Operation.UP)
    done = skipped(call, gather(call, {}, None, False), False)
    return done or phases.run("logs", Operation.UP)


def _made(phases: Phases, stack: str) -> int:
    """The stack's resources in its state, counted as Pulumi's summary counts them."""
    settings = phases.ctx.settings
    found = checkpoint(settings.state_dir, settings.environment, stack).get("resources") or []
    return sum(not r["type"].startswith("pulumi:providers:") for r in found)


def test_gather_builds_the_inputs_each_operation_runs_with(shared: Phases) -> None:
    """An up reads its upstream's deployed outputs and is fingerprinted; a preview reads what the
    upstream preview projects and says which outputs move; a drift mark is read; a refresh runs
    no program. No engine operation is made."""
    logs = LogsOutputs(group_name="/a/phases", bucket="b")
    done = NodeOutcome("logs", Operation.UP, Status.UPDATED, result=UpResult({}, logs))
    up = gather(shared.call("reader", Operation.UP), {"logs": done}, None, False)
    assert up.args == ReaderArgs(group_name="/a/phases") and up.drift is None
    engine = shared.ctx.engine
    again = fingerprint.compute(up.spec, up.args, (Path(__file__),), engine.name, engine.versions())
    assert up.fingerprint == again and up.stamp() == fingerprint.stamp(again)

    moving = LogsOutputs(group_name="/b/phases", bucket="b")
    previewed = PreviewResult((), moving, logs, moves="group_name changes")
    planned = NodeOutcome("logs", Operation.PREVIEW, Status.PREVIEWED, result=previewed)
    preview = gather(shared.call("reader", Operation.PREVIEW), {"logs": planned}, None, False)
    assert preview.args == ReaderArgs(group_name="/b/phases")
    assert preview.note == "upstream previews: logs: group_name changes"
    assert preview.fingerprint not in ("", up.fingerprint)

    shared.ctx.drift.mark(up.spec)
    try:
        marked = gather(shared.call("reader", Operation.UP), {"logs": done}, None, False)
    finally:
        shared.ctx.drift.clear(up.spec)
    assert marked.drift is DriftMark.DRIFTED

    refresh = gather(shared.call("logs", Operation.REFRESH), {}, None, False)
    assert (refresh.args, refresh.fingerprint, refresh.stamp()) == (None, "", None)
    assert shared.ctx.engine_calls == []


def test_an_up_through_the_phases_reports_an_up_result_and_clears_drift(own: Phases) -> None:
    """Local cloud: the first up of `logs` runs every phase; its outcome holds the outputs, typed,
    and the fingerprint its stamp records; the live view hears it done, updated."""
    inputs = own.inputs("logs", Operation.UP)
    own.ctx.drift.mark(inputs.spec, DriftMark.REFRESHED)  # an up puts it right
    outcome = own.run("logs", Operation.UP)
    assert outcome.status is Status.UPDATED
    assert outcome.changes.create == _made(own, "logs") == 3  # the stack, its group and bucket
    assert isinstance(outcome.result, UpResult)
    assert outcome.result.fingerprint == inputs.fingerprint
    typed = outcome.typed
    assert isinstance(typed, LogsOutputs)
    assert typed.group_name == f"/{inputs.spec.environment}/phases"
    assert own.ctx.drift.marked(inputs.spec) is None
    assert own.states("logs")[-1] == (NodeState.DONE, Status.UPDATED)
    assert own.ctx.engine_calls == ["up:logs"]


def test_the_skip_answers_an_unchanged_up_from_the_checkpoint_alone(shared: Phases) -> None:
    """Local cloud: `logs` deployed, an up of the same inputs is skipped with its outputs and no
    engine call; forced, drifted, with other inputs or an ungated preview, it runs."""
    first = _deploy(shared)
    shared.ctx.engine_calls.clear()
    call = shared.call("logs", Operation.UP)
    inputs = gather(call, {}, None, False)
    skip = skipped(call, inputs, False)
    assert skip is not None and skip.status is Status.UNCHANGED
    assert skip.typed == first.typed and shared.ctx.engine_calls == []
    assert shared.states("logs")[-1] == (NodeState.SKIPPED, Status.UNCHANGED)
    assert skipped(call, inputs, True) is None  # forced
    assert skipped(call, replace(inputs, drift=DriftMark.DRIFTED), False) is None
    assert skipped(call, replace(inputs, fingerprint="other"), False) is None
    assert skipped(shared.call("logs", Operation.PREVIEW), inputs, False) is None


def test_held_takes_the_slot_and_the_holder_record_and_gives_them_back(shared: Phases) -> None:
    """The stack's Prefect slot and this run's holder record exist inside the block only; a run
    interrupted first takes nothing and starts nothing."""
    ctx, env = shared.ctx, shared.ctx.settings.environment
    spec = shared.inputs("logs", Operation.UP).spec
    assert ctx.records is not None
    with held(shared.call("logs", Operation.UP), spec) as fence:
        assert fence is not None and active_slots(env, "logs") == 1
        assert len(holders.holders_of(ctx.records, env, "logs")) == 1
    assert active_slots(env, "logs") == 0
    assert holders.holders_of(ctx.records, env, "logs") == {}

    ctx.progress.cancel()
    with (
        pytest.raises(OperationCancelled, match="not started"),
        held(shared.call("logs", Operation.UP), spec),
    ):
        raise AssertionError("the block ran although the run was interrupted")
    assert active_slots(env, "logs") == 0
    assert shared.states("logs")[-1][0] is NodeState.NOT_RUN


def test_recover_clears_a_dead_runs_lock_but_a_preview_leaves_it(shared: Phases) -> None:
    """Local cloud: a lock left by a `pulumi` of this machine that is gone stays through a
    preview's recovery and is removed by an up's, which the outcome's story tells."""
    _deploy(shared)
    settings = shared.ctx.settings
    env = settings.environment
    spec = shared.inputs("logs", Operation.UP).spec
    ended = subprocess.Popen(["true"])
    ended.wait()  # its pid is a process of this machine that is gone
    assert lock_files(settings.state_dir, env, "logs") == []
    folder = settings.state_dir / "pulumi-local/.pulumi/locks/organization/stackflow-logs" / env
    folder.mkdir(parents=True, exist_ok=True)
    left = {
        "pid": ended.pid,
        "username": "test",
        "hostname": socket.gethostname(),
        "timestamp": "2024-01-01T00:00:00Z",
    }
    (folder / "left-behind.json").write_text(json.dumps(left))

    recover(shared.call("logs", Operation.PREVIEW), spec, None)
    assert lock_files(settings.state_dir, env, "logs") != []
    recover(shared.call("logs", Operation.UP), spec, None)
    assert lock_files(settings.state_dir, env, "logs") == []
    assert "removed its lock" in shared.ctx.healed["logs"]


def test_report_gives_each_kind_of_operation_its_own_result(shared: Phases) -> None:
    """Local cloud, `logs` deployed: a preview's result holds the outputs deployed and those its
    update would leave, a drift check's what it found, a refresh's and a drift check's the
    outputs the stack holds."""
    first = _deploy(shared)
    spec = shared.inputs("logs", Operation.UP).spec
    preview = shared.run("logs", Operation.PREVIEW)
    assert preview.status is Status.PREVIEWED and not preview.placeholder
    assert isinstance(preview.result, PreviewResult)
    assert preview.result.deployed == first.typed == preview.read_by(Operation.UP)
    assert preview.read_by(Operation.PREVIEW) == preview.result.projected
    drift = shared.run("logs", Operation.DRIFT)
    assert (drift.status, drift.resources) == (Status.NO_DRIFT, ())
    assert shared.ctx.drift.marked(spec) is None
    refresh = shared.run("logs", Operation.REFRESH)
    assert refresh.status is Status.REFRESHED and isinstance(refresh.result, RefreshResult)
    assert refresh.shown_outputs() == drift.shown_outputs() == first.shown_outputs() != {}
    assert shared.states("logs")[-1] == (NodeState.DONE, Status.REFRESHED)


def test_operate_says_a_failure_and_counts_what_was_made_before_it(own: Phases) -> None:
    """Local cloud: the bucket's create refused for good, the up fails after the log group was
    made; the live view hears failed, and the run's tally counts what the state holds."""
    own.refuse("permanent")
    with pytest.raises(PermanentStackError):
        own.attempt("logs", Operation.UP)
    assert own.states("logs")[-1][0] is NodeState.FAILED
    made = own.ctx.made("logs").counts()
    assert made.create == _made(own, "logs") == 2  # the stack and its log group
    ended = own.ctx.ended("logs", Operation.UP, Status.FAILED, "refused")
    assert ended.changes == made and ended.retries == ()


def test_operate_says_a_transient_failure_will_be_retried(own: Phases) -> None:
    """Local cloud: a throttled bucket create with retries left: the live view hears retrying,
    the run keeps the reason; the next attempt creates what is left, and the tally keeps the
    log group the first attempt made as created."""
    own.refuse("transient")
    with pytest.raises(TransientStackError):
        own.attempt("logs", Operation.UP)
    assert own.states("logs")[-1][0] is NodeState.RETRYING
    assert len(own.ctx.retries["logs"]) == 1
    second = own.run("logs", Operation.UP, attempt=2)
    assert second.status is Status.UPDATED and len(second.retries) == 1
    assert own.ctx.made("logs").counts().create == _made(own, "logs") == 3
