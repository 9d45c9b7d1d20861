"""The simulated engine (Pulumi's mock runtime standing in for the engine, which cannot run here)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_random as random
import pytest
from pydantic import SecretStr

from stackflow.engine import Listener, Operation, StackSpec
from stackflow.engine.simulated import SimulatedEngine, clear_faults, inject_fault
from stackflow.errors import OperationCancelled, PermanentStackError, TransientStackError
from stackflow.redact import MASK, Redactor
from stackflow.settings import get_settings

pytestmark = pytest.mark.unit


def toy(cidr: str = "10.0.0.0/16", subnets: int = 2) -> Any:
    def program() -> dict[str, Any]:
        vpc = aws.ec2.Vpc("vpc", cidr_block=cidr)
        ids = [
            aws.ec2.Subnet(f"s{i}", vpc_id=vpc.id, cidr_block=f"10.0.{i}.0/24").id
            for i in range(subnets)
        ]
        pw = random.RandomPassword("pw", length=20, special=False)
        return {
            "vpc_id": vpc.id,
            "subnet_ids": pulumi.Output.all(*ids),
            "password": pulumi.Output.secret(pw.result),
        }

    return program


def spec(program: Any, node: str = "networking") -> StackSpec:
    return StackSpec("t", "dev", node, program)


@pytest.fixture
def engine(tmp_path: Path) -> SimulatedEngine:
    settings = get_settings(
        state_dir=tmp_path,
        state_passphrase=SecretStr("correct horse battery"),
        simulation={"mysql": "off"},
    )
    return SimulatedEngine(settings)


class Lines(Listener):
    def __init__(self) -> None:
        self.lines: list[str] = []
        super().__init__(on_output=self.lines.append, redactor=Redactor())


def test_up_twice_reports_no_changes_the_second_time(engine: SimulatedEngine) -> None:
    first = engine.run(Operation.UP, spec(toy()), Lines())
    second = engine.run(Operation.UP, spec(toy()), Lines())
    assert first.changes.create == 4 and first.changes.changed == 4
    assert second.changes.changed == 0 and second.changes.same == 4
    assert first.simulated and second.outputs["vpc_id"].value.startswith("vpc-")


def test_preview_counts_against_stored_state(engine: SimulatedEngine) -> None:
    engine.run(Operation.UP, spec(toy()), Lines())
    preview = engine.run(Operation.PREVIEW, spec(toy(cidr="10.1.0.0/16", subnets=3)), Lines())
    # the VPC's CIDR forces a replace; one more subnet is created; nothing is written
    assert preview.changes.replace == 1 and preview.changes.create == 1
    assert engine.run(Operation.PREVIEW, spec(toy()), Lines()).changes.changed == 0
    fewer = engine.run(Operation.PREVIEW, spec(toy(subnets=1)), Lines())
    assert fewer.changes.delete == 1


def test_destroy_empties_the_state(engine: SimulatedEngine) -> None:
    engine.run(Operation.UP, spec(toy()), Lines())
    assert engine.exists(spec(toy()))
    result = engine.run(Operation.DESTROY, spec(toy()), Lines())
    assert result.changes.delete == 4
    assert not engine.exists(spec(toy())) and engine.outputs(spec(toy())) == {}


def test_secret_outputs_encrypted_at_rest_and_masked(
    engine: SimulatedEngine, tmp_path: Path
) -> None:
    result = engine.run(Operation.UP, spec(toy()), Lines())
    password = result.outputs["password"]
    assert password.secret and MASK in repr(password)
    stored = "".join(p.read_text() for p in tmp_path.rglob("*.json"))
    assert password.value not in stored
    assert engine.outputs(spec(toy()))["password"].value == password.value


def test_wrong_passphrase_is_a_clear_permanent_error(
    engine: SimulatedEngine, tmp_path: Path
) -> None:
    engine.run(Operation.UP, spec(toy()), Lines())
    other = SimulatedEngine(
        get_settings(
            state_dir=tmp_path,
            state_passphrase=SecretStr("wrong one!"),
            simulation={"mysql": "off"},
        )
    )
    with pytest.raises(PermanentStackError, match="incorrect passphrase"):
        other.outputs(spec(toy()))


def test_everything_it_prints_says_simulated(engine: SimulatedEngine) -> None:
    listener = Lines()
    engine.run(Operation.UP, spec(toy()), listener)
    assert listener.lines and all("[simulated]" in line for line in listener.lines)


def test_secret_inside_a_longer_log_line_is_redacted(engine: SimulatedEngine) -> None:
    listener = Lines()
    result = engine.run(Operation.UP, spec(toy()), listener)
    secret = result.outputs["password"].value
    listener.line(f"connecting with password={secret}; retrying")
    assert listener.lines[-1] == f"connecting with password={MASK}; retrying"


def test_transient_fault_fails_exactly_n_times(engine: SimulatedEngine, tmp_path: Path) -> None:
    inject_fault(tmp_path, "networking", transient=2)
    for _ in range(2):
        with pytest.raises(TransientStackError, match="Another update is currently in progress"):
            engine.run(Operation.UP, spec(toy()), Lines())
    assert engine.run(Operation.UP, spec(toy()), Lines()).changes.create == 4


def test_permanent_fault_until_cleared(engine: SimulatedEngine, tmp_path: Path) -> None:
    inject_fault(tmp_path, "*", permanent=True)
    for _ in range(2):
        with pytest.raises(PermanentStackError, match="networking"):
            engine.run(Operation.UP, spec(toy()), Lines())
    clear_faults(tmp_path)
    assert engine.run(Operation.UP, spec(toy()), Lines()).changes.create == 4


def test_hang_until_cancelled(engine: SimulatedEngine, tmp_path: Path) -> None:
    inject_fault(tmp_path, "networking", hang=True)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            engine.run(Operation.UP, spec(toy()), Lines())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive()
    engine.cancel(spec(toy()))
    thread.join(10)
    assert not thread.is_alive() and isinstance(errors[0], OperationCancelled)


def test_latency_per_stack(tmp_path: Path) -> None:
    settings = get_settings(
        state_dir=tmp_path, simulation={"mysql": "off", "latency_s": {"*": 0.0, "networking": 0.6}}
    )
    engine = SimulatedEngine(settings)
    slow = engine.run(Operation.UP, spec(toy()), Lines())
    fast = engine.run(Operation.UP, spec(toy(), node="other"), Lines())
    assert slow.duration_s >= 0.6 and fast.duration_s < 0.6


def test_concurrent_operations_on_different_stacks_overlap_safely(tmp_path: Path) -> None:
    settings = get_settings(
        state_dir=tmp_path, simulation={"mysql": "off", "latency_s": {"*": 1.0}}
    )
    engine = SimulatedEngine(settings)
    results: dict[str, Any] = {}

    def run(node: str) -> None:
        results[node] = engine.run(Operation.UP, spec(toy(), node=node), Lines())

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b", "c", "d")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    assert all(r.changes.create == 4 for r in results.values())
    assert elapsed < 3.0  # four 1 s operations overlapped instead of taking 4 s in a row
    # each stack kept its own resources
    vpcs = {r.outputs["vpc_id"].value for r in results.values()}
    assert len(vpcs) == 4


def test_a_second_process_on_the_same_stack_meets_the_lock(
    engine: SimulatedEngine, tmp_path: Path
) -> None:
    inject_fault(tmp_path, "networking", hang=True)

    def hold() -> None:
        with pytest.raises(OperationCancelled):
            engine.run(Operation.UP, spec(toy()), Lines())

    thread = threading.Thread(target=hold)
    thread.start()
    time.sleep(0.5)
    other = SimulatedEngine(engine.settings)
    with pytest.raises(TransientStackError, match="currently locked"):
        other.run(Operation.UP, spec(toy()), Lines())
    engine.cancel(spec(toy()))
    thread.join(10)


def test_recover_clears_a_pending_operation_left_by_a_dead_process(engine: SimulatedEngine) -> None:
    engine.run(Operation.UP, spec(toy()), Lines())
    path = engine._state_path(spec(toy()))
    state = json.loads(path.read_text())
    state["pending_operation"] = {"operation": "up", "pid": 999999, "started": 0}
    path.write_text(json.dumps(state))
    listener = Lines()
    assert engine.recover(spec(toy()), listener) is True
    assert "pending up" in listener.lines[-1]
    assert "pending_operation" not in json.loads(path.read_text())
    assert engine.recover(spec(toy()), Lines()) is False


def test_program_error_is_permanent_and_names_the_stack(engine: SimulatedEngine) -> None:
    def broken() -> dict[str, Any]:
        raise ValueError("bad program")

    with pytest.raises(PermanentStackError, match=r"stack 'dev/networking'.*bad program"):
        engine.run(Operation.UP, spec(broken), Lines())


def test_drift_knob(tmp_path: Path) -> None:
    settings = get_settings(
        state_dir=tmp_path, simulation={"mysql": "off", "drift": ["networking"]}
    )
    engine = SimulatedEngine(settings)
    engine.run(Operation.UP, spec(toy()), Lines())
    assert engine.run(Operation.DRIFT, spec(toy()), Lines()).changes.update == 1
    assert engine.run(Operation.DRIFT, spec(toy(), node="other"), Lines()).changes.changed == 0
