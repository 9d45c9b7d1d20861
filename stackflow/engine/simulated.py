"""The simulated engine: the real program functions under Pulumi's mock runtime, offline.

It keeps a small state per stack (resource ids, keyed hashes of their inputs, exports with secrets
encrypted by the passphrase), so a second `up` with unchanged inputs reports no changes and
`preview` counts creates, updates, replaces and deletes against what is stored. Knobs for tests and
benchmarks: latency per stack (settings), and faults injected through a file in the state folder
(fail the next N operations transiently, fail permanently, hang until cancelled) so that separate
processes (a served deployment, a CLI run) see them too. Everything it reports says "simulated".
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from stackflow.engine.base import (
    ChangeCounts,
    Listener,
    Operation,
    OperationResult,
    OutputValue,
    ResourceEvent,
    StackSpec,
    Stopwatch,
)
from stackflow.engine.mockruntime import AwsMocks, DatabaseBinding, ProgramRun, run_program
from stackflow.errors import (
    OperationCancelled,
    PermanentStackError,
    StackflowError,
    TransientStackError,
)
from stackflow.secretbox import SecretBox, local_passphrase
from stackflow.settings import Settings, parse_mysql_url

TAG = "[simulated]"
STATE_VERSION = 1
# Inputs whose change makes AWS replace the resource rather than update it in place.
FORCE_NEW: Mapping[str, frozenset[str]] = {
    "aws:ec2/vpc:Vpc": frozenset({"cidrBlock"}),
    "aws:ec2/subnet:Subnet": frozenset({"cidrBlock", "availabilityZone", "vpcId"}),
    "aws:ec2/securityGroup:SecurityGroup": frozenset({"vpcId", "name", "description"}),
    "aws:rds/instance:Instance": frozenset({"engine", "dbName", "identifier", "storageEncrypted"}),
    "aws:rds/subnetGroup:SubnetGroup": frozenset({"name"}),
    "aws:ecs/taskDefinition:TaskDefinition": frozenset(
        {"containerDefinitions", "cpu", "memory", "family", "executionRoleArn", "taskRoleArn"}
    ),
    "aws:lb/targetGroup:TargetGroup": frozenset({"port", "protocol", "targetType", "vpcId"}),
    "random:index/randomPassword:RandomPassword": frozenset(
        {"length", "special", "overrideSpecial"}
    ),
}


# --- faults: a small JSON file, consumed under an exclusive lock --------------------------------


def _faults_path(state_dir: Path) -> Path:
    return state_dir / "simulated" / "faults.json"


@contextlib.contextmanager
def _locked_json(path: Path) -> Iterator[dict[str, Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        yield data
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        tmp.replace(path)


def inject_fault(
    state_dir: Path,
    stack: str,
    *,
    transient: int = 0,
    permanent: bool = False,
    hang: bool = False,
    operations: tuple[str, ...] = ("up", "preview", "refresh", "drift", "destroy"),
) -> None:
    """Make the simulated engine fail or hang on `stack` (a node name, or "*" for every stack).

    Args:
        transient: fail the next N operations with a transient (lock conflict) error.
        permanent: fail every operation with a permanent program error until cleared.
        hang: block every operation until it is cancelled.
        operations: which operations the fault applies to.
    """
    with _locked_json(_faults_path(state_dir)) as faults:
        faults[stack] = {
            "transient": transient,
            "permanent": permanent,
            "hang": hang,
            "operations": list(operations),
        }


def clear_faults(state_dir: Path) -> None:
    """Remove every injected fault."""
    with _locked_json(_faults_path(state_dir)) as faults:
        faults.clear()


def _take_fault(state_dir: Path, node: str, operation: Operation) -> str | None:
    path = _faults_path(state_dir)
    if not path.exists():
        return None
    with _locked_json(path) as faults:
        for key in (node, "*"):
            fault = faults.get(key)
            if not fault or operation.value not in fault.get("operations", []):
                continue
            if fault.get("permanent"):
                return "permanent"
            if fault.get("hang"):
                return "hang"
            if fault.get("transient", 0) > 0:
                fault["transient"] -= 1
                return "transient"
    return None


def read_journal(state_dir: Path) -> list[dict[str, Any]]:
    """The simulated engine's operation journal (start/end per operation, with time and pid)."""
    path = state_dir / "simulated" / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def simulated_database_binding(settings: Settings, log: Any = None) -> DatabaseBinding | None:
    """The real MySQL the simulated database stack stands for (starting the local one if needed).

    Returns None when settings say `STACKFLOW_SIM_MYSQL=off`.
    """
    sim = settings.simulation
    if sim.mysql == "off":
        return None
    if sim.mysql == "external":
        assert sim.mysql_url is not None  # settings validation guarantees it
        t = parse_mysql_url(sim.mysql_url.get_secret_value())
        return DatabaseBinding(t.host, t.port, t.user, t.password.get_secret_value(), t.database)
    from stackflow.localdb import ensure_local_mariadb

    # Derived, never stored: the local server's password follows the state passphrase.
    password = hmac.new(
        local_passphrase(settings).encode(), b"local-mariadb", "sha256"
    ).hexdigest()[:24]
    target = ensure_local_mariadb(
        settings.state_dir / "mariadb",
        sim.local_mysql_port,
        user=settings.database.username,
        password=password,
        database=settings.database.name,
        log=log or (lambda _msg: None),
    )
    return DatabaseBinding(target.host, target.port, target.user, password, target.database)


# --- state --------------------------------------------------------------------------------------


@dataclass
class _Diff:
    counts: ChangeCounts
    steps: list[tuple[str, str, str, str]]  # (change, urn, type, name)


class SimulatedEngine:
    """Engine on Pulumi's mock runtime. Safe for concurrent operations on different stacks."""

    name = "simulated"
    simulated = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.state_dir / "simulated"
        self._cancel: dict[str, threading.Event] = {}
        self._guard = threading.Lock()

    # -- paths and state --

    def _state_path(self, spec: StackSpec) -> Path:
        return self.root / "stacks" / spec.pulumi_project / f"{spec.environment}.json"

    def _read(self, spec: StackSpec) -> dict[str, Any]:
        path = self._state_path(spec)
        if not path.exists():
            return {"version": STATE_VERSION, "simulated": True, "resources": {}, "outputs": {}}
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise PermanentStackError(
                spec.label, f"simulated state file {path} is not valid JSON: {exc}"
            ) from None
        return data

    def _write(self, spec: StackSpec, state: dict[str, Any]) -> None:
        path = self._state_path(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        tmp.replace(path)  # atomic: a crash leaves the old state or the new, never half

    @contextlib.contextmanager
    def _stack_lock(self, spec: StackSpec) -> Iterator[None]:
        """Like the file backend's lock, but released by the OS if the holder dies."""
        path = self._state_path(spec).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise TransientStackError(
                    spec.label,
                    f"{TAG} the stack is currently locked by 1 lock(s). Either wait for the other "
                    "process(es) to end or delete the lock file with `pulumi cancel`.",
                ) from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _salt(self, state: dict[str, Any]) -> bytes:
        if "salt" not in state:
            state["salt"] = SecretBox.new_salt()
        return base64.b64decode(state["salt"])

    def _box(self, state: dict[str, Any]) -> SecretBox:
        self._salt(state)
        return SecretBox.from_salt(local_passphrase(self.settings), state["salt"])

    def _hash_inputs(self, salt: bytes, inputs: Mapping[str, Any]) -> dict[str, str]:
        # Keyed per state, so a hash of a secret input tells nothing to whoever reads the file.
        return {
            key: hashlib.blake2b(
                json.dumps(value, sort_keys=True, default=str).encode(), key=salt, digest_size=16
            ).hexdigest()
            for key, value in inputs.items()
        }

    # -- the program --

    def _run_program(self, spec: StackSpec, listener: Listener) -> ProgramRun:
        binding = None
        if spec.node == "database":
            binding = simulated_database_binding(self.settings, log=listener.line)
            if binding is not None:
                listener.redactor.add(binding.password)
        mocks = AwsMocks(spec.pulumi_project, spec.environment, self.settings.aws.region, binding)
        try:
            run = run_program(
                spec.program, mocks, project=spec.pulumi_project, stack=spec.environment
            )
        except StackflowError:
            raise
        except Exception as exc:
            raise PermanentStackError(
                spec.label, listener.redactor(f"{TAG} program error: {type(exc).__name__}: {exc}")
            ) from None
        for value in run.exports.values():
            if value.secret and isinstance(value.value, str):
                listener.redactor.add(value.value)
        for resource in run.resources.values():
            if resource.type == "random:index/randomPassword:RandomPassword":
                listener.redactor.add(str(resource.outputs.get("result", "")))
        return run

    def _diff(
        self, state: dict[str, Any], run: ProgramRun | None, salt: bytes
    ) -> tuple[_Diff, dict[str, Any]]:
        old: dict[str, Any] = state.get("resources", {})
        new: dict[str, Any] = {}
        steps: list[tuple[str, str, str, str]] = []
        counts = dict.fromkeys(("create", "update", "delete", "replace", "same"), 0)
        desired = run.resources if run is not None else {}
        for urn, res in desired.items():
            hashes = self._hash_inputs(salt, res.inputs)
            new[urn] = {"type": res.type, "name": res.name, "id": res.id, "inputs": hashes}
            before = old.get(urn)
            if before is None:
                change = "create"
            elif before["inputs"] == hashes:
                change = "same"
                new[urn]["id"] = before["id"]
            else:
                changed = {
                    k
                    for k in set(hashes) | set(before["inputs"])
                    if hashes.get(k) != before["inputs"].get(k)
                }
                change = "replace" if changed & FORCE_NEW.get(res.type, frozenset()) else "update"
            counts[change] += 1
            steps.append((change, urn, res.type, res.name))
        for urn, before in old.items():
            if urn not in desired:
                counts["delete"] += 1
                steps.append(("delete", urn, before["type"], before["name"]))
        return _Diff(ChangeCounts(**counts), steps), new

    def _encrypt_outputs(
        self, exports: Mapping[str, OutputValue], state: dict[str, Any]
    ) -> dict[str, Any]:
        box: SecretBox | None = None
        stored: dict[str, Any] = {}
        for key, out in exports.items():
            if out.secret:
                box = box or self._box(state)
                stored[key] = {"secret": True, "ciphertext": box.seal(out.value)}
            else:
                stored[key] = {"secret": False, "value": out.value}
        return stored

    def _decrypt_outputs(self, spec: StackSpec, state: dict[str, Any]) -> dict[str, OutputValue]:
        result: dict[str, OutputValue] = {}
        box: SecretBox | None = None
        for key, item in state.get("outputs", {}).items():
            if not item.get("secret"):
                result[key] = OutputValue(item.get("value"), secret=False)
                continue
            box = box or self._box(state)
            try:
                result[key] = OutputValue(box.open(item["ciphertext"]), secret=True)
            except ValueError:
                raise PermanentStackError(
                    spec.label,
                    f"{TAG} incorrect passphrase: cannot decrypt the stack's secret outputs "
                    "(STACKFLOW_STATE_PASSPHRASE differs from the one that wrote the state)",
                ) from None
        return result

    def _journal(
        self, spec: StackSpec, operation: Operation, phase: str, run: ProgramRun | None = None
    ) -> None:
        """One line per operation start and end, for tests and benchmarks to see order and overlap.

        A start line also says how long the program ran under the mock runtime and how long it
        waited for it (the runtime is one per process, so runs take turns).
        """
        entry: dict[str, Any] = {
            "t": time.time(),
            "pid": os.getpid(),
            "stack": spec.label,
            "op": operation.value,
            "phase": phase,
        }
        if run is not None:
            entry["program_s"] = round(run.run_s, 4)
            entry["program_wait_s"] = round(run.lock_wait_s, 4)
        line = json.dumps(entry)
        # One short write in append mode: lines from several processes do not interleave.
        with open(self.root / "journal.jsonl", "a") as f:
            f.write(line + "\n")

    # -- knobs --

    def _latency(self, spec: StackSpec) -> float:
        latency = self.settings.simulation.latency_s
        return float(latency.get(spec.node, latency.get("*", 0.0)))

    def _wait(self, spec: StackSpec, seconds: float | None, cancel: threading.Event) -> None:
        """Sleep for the simulated latency (None: until cancelled); raise if cancelled."""
        if cancel.wait(seconds):
            raise OperationCancelled(spec.label, f"{TAG} operation cancelled")

    # -- the Engine interface --

    def run(self, operation: Operation, spec: StackSpec, listener: Listener) -> OperationResult:
        watch = Stopwatch()
        with self._guard:
            cancel = self._cancel.setdefault(spec.label, threading.Event())
            cancel.clear()
        listener.line(f"{TAG} {operation.value} {spec.pulumi_project}/{spec.environment}")
        with self._stack_lock(spec):
            fault = _take_fault(self.settings.state_dir, spec.node, operation)
            if fault == "transient":
                raise TransientStackError(
                    spec.label,
                    f"{TAG} [409] Conflict: Another update is currently in progress. (injected transient fault)",
                )
            if fault == "permanent":
                raise PermanentStackError(
                    spec.label, f"{TAG} program error: injected permanent fault"
                )
            state = self._read(spec)
            salt = self._salt(state)
            writes = operation in (Operation.UP, Operation.DESTROY, Operation.REFRESH)
            if writes:
                # A wrong passphrase fails here, before anything is written: an `up` would
                # otherwise re-seal the secret outputs with it.
                self._decrypt_outputs(spec, state)
                state["pending_operation"] = {
                    "operation": operation.value,
                    "pid": os.getpid(),
                    "started": time.time(),
                }
                self._write(spec, state)
            if fault == "hang":
                listener.line(f"{TAG} hanging until cancelled (injected fault)")
                self._wait(spec, None, cancel)
            reads_program = operation in (Operation.PREVIEW, Operation.UP)
            run = self._run_program(spec, listener) if reads_program else None
            if operation in (Operation.REFRESH, Operation.DRIFT):
                diff = self._drift(spec, state)
                new_resources = state.get("resources", {})
            else:
                diff, new_resources = self._diff(state, run, salt)
            self._emit(spec, operation, diff, listener, "started")
            self._journal(spec, operation, "start", run)
            self._wait(spec, self._latency(spec), cancel)
            self._journal(spec, operation, "end")
            self._emit(spec, operation, diff, listener, "done")
            if operation is Operation.UP:
                assert run is not None
                state["resources"] = new_resources
                state["outputs"] = self._encrypt_outputs(run.exports, state)
                state["updated"] = time.time()
            elif operation is Operation.DESTROY:
                state["resources"], state["outputs"] = {}, {}
            if writes:
                state.pop("pending_operation", None)
                self._write(spec, state)
            outputs = (
                self._decrypt_outputs(spec, state)
                if operation is not Operation.PREVIEW
                else (dict(run.exports) if run is not None else {})
            )
        counts = diff.counts
        listener.line(
            f"{TAG} {operation.value} {spec.label}: {counts.create} to create, {counts.update} to update, "
            f"{counts.replace} to replace, {counts.delete} to delete, {counts.same} unchanged "
            f"({watch.elapsed:.2f}s)"
        )
        return OperationResult(
            stack=spec.node,
            operation=operation,
            changes=counts,
            outputs=outputs,
            duration_s=watch.elapsed,
            simulated=True,
            engine=self.name,
        )

    def _drift(self, spec: StackSpec, state: dict[str, Any]) -> _Diff:
        resources: dict[str, Any] = state.get("resources", {})
        drifted = spec.node in self.settings.simulation.drift and bool(resources)
        steps = []
        for i, (urn, res) in enumerate(sorted(resources.items())):
            change = "update" if drifted and i == 0 else "same"
            steps.append((change, urn, res["type"], res["name"]))
        update = 1 if drifted else 0
        return _Diff(ChangeCounts(update=update, same=len(resources) - update), steps)

    def _emit(
        self,
        spec: StackSpec,
        operation: Operation,
        diff: _Diff,
        listener: Listener,
        status: Literal["started", "done"],
    ) -> None:
        symbol = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": " "}
        for change, urn, type_, name in diff.steps:
            listener.event(ResourceEvent(spec.node, operation, urn, type_, name, change, status))
            if status == "done" and change != "same":
                listener.line(f"{TAG} {symbol[change]} {type_} {name} {change}")

    def outputs(self, spec: StackSpec) -> dict[str, OutputValue]:
        return self._decrypt_outputs(spec, self._read(spec))

    def exists(self, spec: StackSpec) -> bool:
        return bool(self._read(spec).get("resources"))

    def recover(self, spec: StackSpec, listener: Listener) -> bool:
        state = self._read(spec)
        pending = state.get("pending_operation")
        if not pending:
            return False
        try:
            with self._stack_lock(spec):
                state = self._read(spec)
                pending = state.pop("pending_operation", None)
                if not pending:
                    return False
                listener.line(
                    f"{TAG} stack {spec.label} has a pending {pending['operation']} left by an "
                    f"interrupted run (pid {pending['pid']}); clearing it with a refresh "
                    "(--clear-pending-creates)"
                )
                self._write(spec, state)
                return True
        except TransientStackError:
            return False  # still held by a live process: it is not interrupted

    def cancel(self, spec: StackSpec) -> None:
        with self._guard:
            event = self._cancel.get(spec.label)
        if event is not None:
            event.set()

    def remove(self, spec: StackSpec) -> None:
        path = self._state_path(spec)
        if self.exists(spec):
            raise PermanentStackError(
                spec.label, f"{TAG} stack still has resources; destroy it first"
            )
        path.unlink(missing_ok=True)

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {
            "engine": "simulated",
            "pulumi-sdk": version("pulumi"),
            "pulumi-aws": version("pulumi-aws"),
            "pulumi-random": version("pulumi-random"),
        }
