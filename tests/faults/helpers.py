"""Shared pieces of the fault cases: one environment per test, CLI runs, snapshots, journal spans,
and reading everything a run left behind on the Prefect server."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from stackflow.engine.simulated import read_journal
from stackflow.migrations import HistoryRecord, connect, read_history
from stackflow.settings import MigrationSettings, MysqlTarget

ROOT = Path(__file__).resolve().parents[2]
RUN_PY = ROOT / "flows" / "run.py"
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

    def __str__(self) -> str:  # what an assertion shows
        return (
            f"$ python flows/run.py {' '.join(self.args)}  -> exit {self.returncode} "
            f"({self.seconds:.1f}s)\n--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-6000:]}"
        )


def subprocess_env(variables: Variables) -> dict[str, str]:
    """This process's environment without any STACKFLOW_* variable, plus `variables` (None removes).

    PREFECT_API_URL and PREFECT_HOME come through, so the child talks to the session's server.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKFLOW_")}
    for key, value in variables.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class FaultEnv:
    """One test's environment: its state folder, its schema, its STACKFLOW_* settings.

    The same variables are set in this process (for flows called in-process) and passed to every
    CLI subprocess. Every CLI run is kept in `runs`, so a test can search all of their output.
    """

    state_dir: Path
    workdir: Path  # the CLI's working folder: no stray .env is read
    db: MysqlTarget
    variables: dict[str, str]
    runs: list[CliRun] = field(default_factory=list)
    capsys: Any = None  # pytest's capsys, for `main`

    def main(self, *args: str, env: Variables | None = None) -> CliRun:
        """Run the CLI's `main(args)` in this process (no `import prefect` to pay again).

        stdout and stderr are what the CLI itself prints; Prefect's console log lines go to
        pytest's capture instead (they reach the Prefect API either way). The test's monkeypatch
        must already hold STACKFLOW_ENVIRONMENT and STACKFLOW_ENGINE (main() writes them).
        """
        from flows.run import main

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

    def env(self, extra: Variables | None = None) -> dict[str, str]:
        return subprocess_env({**self.variables, **(extra or {})})

    def cli(self, *args: str, env: Variables | None = None, timeout: float = 240) -> CliRun:
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


# --- state snapshots ------------------------------------------------------------------------------


def snapshot_files(root: Path, ignore: Sequence[str] = ("prefect",)) -> dict[str, bytes]:
    """Every file's bytes under `root` by relative path, leaving out top-level `ignore` folders
    (a local Prefect server's home lives in the state folder's `prefect/`)."""
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


# --- the simulated engine's journal ---------------------------------------------------------------


def intervals(state_dir: Path, stack: str, op: str | None = None) -> list[tuple[float, float]]:
    """(start, end) of each simulated operation on `stack`, from the journal, sorted by start.

    An operation whose process died before it ended gets end = inf.
    """
    entries = [
        j
        for j in read_journal(state_dir)
        if j["stack"].endswith("/" + stack) and (op is None or j["op"] == op)
    ]
    out: list[tuple[float, float]] = []
    for pid in {j["pid"] for j in entries}:
        start: float | None = None
        for j in sorted((j for j in entries if j["pid"] == pid), key=lambda j: j["t"]):
            if j["phase"] == "start":
                assert start is None, f"{stack}: pid {pid} started twice without an end"
                start = j["t"]
            else:
                assert start is not None, f"{stack}: pid {pid} ended what it never started"
                out.append((start, j["t"]))
                start = None
        if start is not None:
            out.append((start, math.inf))
    return sorted(out)


def started(state_dir: Path, stack: str, op: str) -> bool:
    """Whether the journal shows `op` on `stack` starting."""
    return any(
        j["stack"].endswith("/" + stack) and j["op"] == op and j["phase"] == "start"
        for j in read_journal(state_dir)
    )


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


# --- secrets --------------------------------------------------------------------------------------


def find_in_files(root: Path, needles: Iterable[str]) -> list[str]:
    """'<file>: <needle>' for every file under `root` that holds one of `needles` (bytes search)."""
    wanted = [(n, n.encode()) for n in needles]
    hits = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
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
