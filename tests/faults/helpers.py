"""Shared pieces of the fault cases: one environment per test on the session's **local cloud**, CLI
runs, snapshots, what Pulumi's file backend says ran when (history, locks, pending operations), and
reading everything a run left behind on the Prefect server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from stackflow.migrator.connection import connect
from stackflow.migrator.history import HistoryRecord, read_history
from stackflow.migrator.target import MysqlTarget
from stackflow.settings import MigrationSettings
from tests import realenv

ROOT = realenv.ROOT
RUN_PY = realenv.RUN_PY
STACKS = realenv.STACKS
Variables = Mapping[str, str | None]


def url_of(t: MysqlTarget) -> str:
    """mysql://user:password@host:port/database for a target (the password URL-encoded)."""
    password = quote(t.password.get_secret_value(), safe="")
    return f"mysql://{quote(t.user)}:{password}@{t.host}:{t.port}/{t.database}"


def statuses(summary: Mapping[str, Any]) -> dict[str, str]:
    """Each node's status in a run summary (the dict a flow returns)."""
    return {s["stack"]: s["status"] for s in summary["stacks"]}


@dataclass(frozen=True)
class CliRun:
    """One finished `python flows/run.py ...`: its exit code and everything it printed."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def error_line(self) -> str:
        """The CLI's own last `error: ...` line. A CLI process may still print Prefect's shutdown
        warnings after it (EventsWorker/APILogWorker draining at exit), which it does not own."""
        lines = [line for line in self.stderr.splitlines() if line.startswith("error: ")]
        return lines[-1] if lines else ""

    @property
    def log(self) -> str:
        """The run's log file (Prefect's and Pulumi's own lines), which the CLI names at its end."""
        found = re.findall(r"(?:^log: |the full log is )(\S+\.log)", self.stderr, re.MULTILINE)
        return Path(found[-1]).read_text() if found else ""

    def __str__(self) -> str:  # what an assertion shows
        return (
            f"$ python flows/run.py {' '.join(self.args)}  -> exit {self.returncode} "
            f"({self.seconds:.1f}s)\n--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-6000:]}"
        )


def subprocess_env(variables: Variables) -> dict[str, str]:
    """This process's environment without STACKFLOW_*, PULUMI_* or AWS_* variables, plus
    `variables` (None removes one). PREFECT_HOME comes through, so the child uses the session's
    client home; PREFECT_API_URL is among the variables."""
    env = realenv.process_env({k: v for k, v in variables.items() if v is not None})
    for key in [k for k, v in variables.items() if v is None]:
        env.pop(key, None)
    return env


@contextlib.contextmanager
def variables_set(variables: Variables) -> Iterator[None]:
    """Exactly these STACKFLOW_* variables (and no PULUMI_* or AWS_* ones) in this process, for the
    block: for flows, settings and engine calls made in-process outside a test's monkeypatch."""
    with pytest.MonkeyPatch.context() as patch:
        use_variables(patch, variables)
        yield


def use_variables(monkeypatch: pytest.MonkeyPatch, variables: Variables) -> None:
    """Exactly these STACKFLOW_* variables in this process (for flows called in-process); no
    PULUMI_* or AWS_* variable of the user's reaches the engine either."""
    for key in [k for k in os.environ if k.startswith(("STACKFLOW_", "PULUMI_", "AWS_"))]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)


@dataclass
class FaultEnv:
    """One test's environment on the session's local cloud: a state folder of its own, an
    environment name of its own (`environment`, e.g. dev-1a2b3c; its kind's template unless
    `declare` writes it a file), this machine's STACKFLOW_* settings.

    The same variables are set in this process (for flows called in-process) and passed to every
    CLI subprocess. Every CLI run is kept in `runs`, so a test can search all of their output.
    """

    state_dir: Path
    workdir: Path  # the CLI's working folder: no stray .env is read
    environment: str
    variables: dict[str, str]
    cloud: Any  # the session's LocalCloud (url, root, boto3 clients)
    runs: list[CliRun] = field(default_factory=list)
    capsys: Any = None  # pytest's capsys, for `main`

    def main(self, *args: str, env: Variables | None = None) -> CliRun:
        """Run the CLI's `main(args)` in this process (no interpreter start or `import prefect` to
        pay again).

        stdout and stderr are what the CLI itself prints; Prefect's console log lines go to
        pytest's capture instead (they reach the Prefect API either way). `env` sets variables
        for this call only (None unsets one).
        """
        from cli.main import main

        previous = {k: os.environ.get(k) for k in env or {}}
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self.capsys.readouterr()
        begun = time.monotonic()
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            for key, old in previous.items():
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old
        out = self.capsys.readouterr()
        run = CliRun(args, code, out.out, out.err, time.monotonic() - begun)
        self.runs.append(run)
        return run

    def declare(self, **sections: Any) -> Path:
        """Write this environment's own file in the case's project (what every run of it, CLI or
        flow, deploys), e.g. `declare(migrations={"dir": str(folder)})`; see realenv.declare."""
        return realenv.declare(self.variables, self.environment, **sections)

    def env(self, extra: Variables | None = None) -> dict[str, str]:
        return subprocess_env({**self.variables, **(extra or {})})

    def cli(self, *args: str, env: Variables | None = None, timeout: float = 300) -> CliRun:
        """Run `python flows/run.py *args` to the end and return what it printed."""
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(RUN_PY), *args],
            env=self.env(env),
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        run = CliRun(args, done.returncode, done.stdout, done.stderr, time.monotonic() - started)
        self.runs.append(run)
        return run

    def start(self, *args: str, log: Path, env: Variables | None = None) -> subprocess.Popen[bytes]:
        """Start `python flows/run.py *args` in its own process group, output to `log`."""
        out: IO[bytes] = log.open("wb")
        try:
            return subprocess.Popen(
                [sys.executable, str(RUN_PY), *args],
                env=self.env(env),
                cwd=self.workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            out.close()  # the child has its own copy

    def outputs(self, *stacks: str, environment: str | None = None) -> dict[str, dict[str, Any]]:
        """The stacks' outputs (all stacks by default; plain values, secrets included), read from
        the real backend with this environment's settings (its passphrase too)."""
        from stackflow.dag import bare_spec
        from stackflow.engine import get_engine
        from tests.fixtures.template import template_graph

        with variables_set(self.variables):
            settings = realenv.settings_for(self.variables, environment or self.environment)
            engine = get_engine(settings)
            return {
                n: {k: v.value for k, v in engine.outputs(bare_spec(settings, n)).items()}
                for n in stacks or template_graph().stacks
            }

    def database(self, environment: str | None = None) -> MysqlTarget:
        """The environment's own database (a MariaDB server of the local cloud), from the database
        stack's outputs."""
        return database_of(self.outputs("database", environment=environment)["database"])


def database_of(outputs: Mapping[str, Any]) -> MysqlTarget:
    """A MysqlTarget from the database stack's outputs."""
    return MysqlTarget(
        outputs["host"],
        int(outputs["port"]),
        outputs["user"],
        SecretStr(str(outputs["password"])),
        outputs["database"],
    )


# --- state snapshots ------------------------------------------------------------------------------


def snapshot_files(root: Path, ignore: Sequence[str] = ("prefect", "logs")) -> dict[str, bytes]:
    """Every file's bytes under `root` by relative path, leaving out top-level `ignore` folders
    (a local Prefect server's home lives in the state folder's `prefect/`; `logs/` gets the log
    file of every run, a refused one too)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in ignore
    }


def schema_history(target: MysqlTarget) -> list[HistoryRecord]:
    """The schema history table's rows (empty when the table does not exist yet)."""
    with connect(target, MigrationSettings(connect_timeout_s=5)) as conn:
        return read_history(conn, create=False)


# --- what Pulumi's file backend says ran, and when --------------------------------------------


def backend_dir(state_dir: Path) -> Path:
    """The local cloud's file backend in a state folder (`<state>/pulumi-local/.pulumi`)."""
    return state_dir / "pulumi-local" / ".pulumi"


def intervals(state_dir: Path, environment: str, stack: str) -> list[tuple[int, int]]:
    """(start, end) in epoch seconds of each finished update, refresh or destroy of a stack, oldest
    first, from Pulumi's own history files."""
    return realenv.intervals(state_dir, environment, stack)


def lock_files(state_dir: Path, environment: str, stack: str) -> list[Path]:
    """The stack's lock files: the Pulumi CLI writes one when an operation starts and deletes it
    when the operation ends; a killed CLI leaves its lock behind."""
    folder = backend_dir(state_dir) / "locks" / "organization" / f"stackflow-{stack}" / environment
    return sorted(folder.glob("*.json"))


def started(state_dir: Path, environment: str, stack: str) -> bool:
    """Whether an operation on the stack is under way (or was killed): its lock file exists."""
    return bool(lock_files(state_dir, environment, stack))


def checkpoint(state_dir: Path, environment: str, stack: str) -> dict[str, Any]:
    """The stack's current deployment (resources, pending operations) from the file backend."""
    path = backend_dir(state_dir) / "stacks" / f"stackflow-{stack}" / f"{environment}.json"
    latest: dict[str, Any] = json.loads(path.read_text())["checkpoint"].get("latest") or {}
    return latest


def pending_operations(state_dir: Path, environment: str, stack: str) -> list[dict[str, Any]]:
    """The operations an update began and never finished, as Pulumi recorded them."""
    return list(checkpoint(state_dir, environment, stack).get("pending_operations") or [])


def wait_until(condition: Any, timeout: float, what: str, poll: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


def active_slots(environment: str, stack: str) -> int:
    """Slots held now in the stack's Prefect global concurrency limit."""
    from prefect.client.orchestration import get_client

    from tasks.limits import limit_name

    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(limit_name(environment, stack))
        return limit.active_slots


def task_runs(state: Any, timeout: float = 30) -> dict[str, Any]:
    """A finished flow run's task runs by name (e.g. up-networking), read from the Prefect server
    once each is in a final state there (a task run's states reach the server as events, a moment
    after the run itself has moved on)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()
    flow_run_id = state.state_details.flow_run_id
    found: dict[str, Any] = {}

    def settled() -> bool:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                sort=TaskRunSort.EXPECTED_START_TIME_ASC,
                limit=100,
            )
        found.clear()
        found.update({run.name: run for run in runs})
        return bool(runs) and all(run.state is not None and run.state.is_final() for run in runs)

    wait_until(settled, timeout, "the flow run's task runs to reach a final state", poll=0.3)
    return dict(found)


# --- secrets --------------------------------------------------------------------------------------


def find_in_files(root: Path, needles: Iterable[str], skip: Iterable[Path] = ()) -> list[str]:
    """'<file>: <needle>' for every file under `root` (but `skip`) that holds one of `needles`
    (bytes search)."""
    wanted = [(n, n.encode()) for n in needles]
    skipped = set(skip)
    hits = []
    for path in sorted(root.rglob("*")):
        if path in skipped or path.is_symlink() or not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue  # a socket or a file removed while we walked
        hits += [f"{path}: {n!r}" for n, b in wanted if b in data]
    return hits


def find_in_texts(texts: Mapping[str, str], needles: Iterable[str]) -> list[str]:
    needles = list(needles)
    return [f"{where}: {n!r}" for where, text in texts.items() for n in needles if n in text]


def prefect_records(since: datetime) -> dict[str, str]:
    """Everything the Prefect API returns about runs since `since`, as JSON text by record:
    logs, artifacts, flow runs (parameters, state messages), task runs and events."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
        LogFilter,
        LogFilterTimestamp,
        TaskRunFilter,
    )
    from prefect.client.schemas.sorting import ArtifactSort, FlowRunSort, LogSort, TaskRunSort
    from prefect.events.filters import EventFilter, EventOccurredFilter

    texts: dict[str, str] = {}
    page = 200
    with get_client(sync_client=True) as client:
        offset = 0
        while logs := client.read_logs(
            LogFilter(timestamp=LogFilterTimestamp(after_=since)),
            limit=page,
            offset=offset,
            sort=LogSort.TIMESTAMP_ASC,
        ):
            texts |= {f"log {log.id}": log.model_dump_json() for log in logs}
            offset += page
        offset = 0
        runs = FlowRunFilter(expected_start_time=FlowRunFilterExpectedStartTime(after_=since))
        while artifacts := client.read_artifacts(
            artifact_filter=ArtifactFilter(),
            flow_run_filter=runs,
            task_run_filter=TaskRunFilter(),
            sort=ArtifactSort.ID_DESC,
            limit=page,
            offset=offset,
        ):
            texts |= {f"artifact {a.key} {a.id}": a.model_dump_json() for a in artifacts}
            offset += page
        offset = 0
        while flow_runs := client.read_flow_runs(
            flow_run_filter=runs, sort=FlowRunSort.ID_DESC, limit=page, offset=offset
        ):
            for flow_run in flow_runs:
                texts[f"flow run {flow_run.name} {flow_run.id}"] = flow_run.model_dump_json()
                for state in client.read_flow_run_states(flow_run.id):
                    texts[f"flow run {flow_run.name} state {state.id}"] = state.model_dump_json()
            offset += page
        offset = 0
        while task_runs := client.read_task_runs(
            flow_run_filter=runs, sort=TaskRunSort.ID_DESC, limit=page, offset=offset
        ):
            texts |= {f"task run {t.name} {t.id}": t.model_dump_json() for t in task_runs}
            offset += page
        events = client.read_events(EventFilter(occurred=EventOccurredFilter(since=since)), 50)
        while True:
            texts |= {f"event {e.event} {e.id}": e.model_dump_json() for e in events.events}
            if events.next_page is None:
                break
            events = client.read_events_page(events.next_page)
    return texts


def kill_groups(*leaders: int) -> None:
    """SIGKILL the process groups of `leaders` as one loss: every group is stopped first, so none
    reacts to another's death (a `pulumi`, in a session of its own, would otherwise see its
    program's process die and settle its pending operations before it is killed)."""
    for signum in (signal.SIGSTOP, signal.SIGKILL):
        for leader in leaders:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leader, signum)


def pulumi_pids(state_dir: Path, environment: str, stack: str) -> list[int]:
    """The pids of the `pulumi` processes holding the stack's lock (each leads its own group)."""
    return [
        json.loads(lock.read_text())["pid"] for lock in lock_files(state_dir, environment, stack)
    ]
