"""Team mode as a team runs it, for tests/integration/test_team.py: a Prefect server on the
session's real PostgreSQL (basic auth on), the Pulumi state and stackflow's records on the same
PostgreSQL, a process work pool filled by `prefect deploy`, and real `prefect worker` processes,
each with a state folder of its own, deploying on the session's **local cloud** (moto on loopback,
not AWS).

Everything here is read from where a team would look: flow runs and artifacts from Prefect's API,
updates and locks from Pulumi's own state in the PostgreSQL backend, resources from the local
cloud through boto3. Waits poll those (or a worker's log), never sleep a fixed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from tests.realenv import ROOT, RUN_PY, STACKS

PREFECT = str(Path(sys.executable).parent / "prefect")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, poll: float = 0.5) -> Any:
    """Poll `condition` until it returns something truthy (returned); AssertionError naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, grandchildren, ...), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)] = int(
                (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            )
        except (OSError, ValueError, IndexError):
            continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        frontier += children
    return found


@dataclass
class Worker:
    """One `prefect worker start --pool <pool> --limit 1` process and its own state folder.

    Attributes:
        name: the worker's name in Prefect (its log says which flow runs it submits).
        host: the hostname its processes see (another one than this machine's when it runs in a
            UTS namespace of its own: a second machine, as Pulumi's locks and stackflow's holder
            records see it).
    """

    name: str
    host: str
    state_dir: Path
    log: Path
    process: subprocess.Popen[bytes]

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def submitted(self, flow_run_id: UUID | str) -> bool:
        """Whether this worker took the flow run (its own log line, Prefect's words)."""
        return f"submitting flow run '{flow_run_id}'" in self.text()

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL; its flow runs' processes are left to end on their own."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)


@dataclass
class Team:
    """The team's Prefect server, work pool, shared settings and workers."""

    api_url: str
    auth: str = field(repr=False)
    pool: str
    variables: dict[str, str]  # what every worker shares (STACKFLOW_*, PREFECT_*)
    backend_url: str
    records_url: str
    project: Path
    folder: Path
    environments: dict[str, str]  # role -> environment name
    workers: dict[str, Worker] = field(default_factory=dict)
    deployed_by: dict[str, Worker] = field(default_factory=dict)  # environment -> first deployer

    # -- Prefect's API ---------------------------------------------------------------------------

    def client(self) -> Any:
        from prefect.client.orchestration import SyncPrefectClient

        return SyncPrefectClient(self.api_url, auth_string=self.auth)

    def run(self, deployment: str, **parameters: Any) -> UUID:
        """Create a flow run of `deployment` (`deploy/<env>`) with these parameters, as the UI's
        Custom run or `prefect deployment run --param` does; its id."""
        with self.client() as client:
            found = client.read_deployment_by_name(deployment)
            flow_run = client.create_flow_run_from_deployment(found.id, parameters=parameters)
        return UUID(str(flow_run.id))

    def flow_run(self, flow_run_id: UUID) -> Any:
        with self.client() as client:
            return client.read_flow_run(flow_run_id)

    def wait_final(self, flow_run_id: UUID, timeout: float = 300) -> Any:
        """The flow run once it is in a final state (Completed, Failed, Crashed, Cancelled)."""

        def final() -> Any:
            run = self.flow_run(flow_run_id)
            return run if run.state is not None and run.state.is_final() else None

        try:
            return wait_for(final, timeout, f"flow run {flow_run_id} to end", poll=1.0)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.explain(flow_run_id)}") from None

    def wait_state(self, flow_run_id: UUID, state: str, timeout: float) -> Any:
        def reached() -> Any:
            run = self.flow_run(flow_run_id)
            return run if run.state is not None and run.state.type.value == state else None

        return wait_for(reached, timeout, f"flow run {flow_run_id} to be {state}", poll=1.0)

    def logs(self, flow_run_id: UUID) -> str:
        """The flow run's log lines as Prefect stored them, oldest first."""
        from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
        from prefect.client.schemas.sorting import LogSort

        lines: list[str] = []
        with self.client() as client:
            offset = 0
            while page := client.read_logs(
                LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])),
                limit=200,
                offset=offset,
                sort=LogSort.TIMESTAMP_ASC,
            ):
                lines += [log.message for log in page]
                offset += len(page)
        return "\n".join(lines)

    def logs_containing(self, flow_run_id: UUID, *texts: str, timeout: float = 60) -> str:
        """The flow run's log lines once they hold every one of `texts`: a run's process sends
        its logs in batches, the last ones after its final state is set."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.logs(flow_run_id)
            if all(t in text for t in texts):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line of {flow_run_id} with {texts!r}:\n{text}")
            time.sleep(0.5)

    def artifact(self, flow_run_id: UUID, key: str) -> str:
        """The markdown of the flow run's artifact `key` (the run's summary: `up-<env>`)."""
        from prefect.client.schemas.filters import (
            ArtifactFilter,
            ArtifactFilterFlowRunId,
            ArtifactFilterKey,
        )

        with self.client() as client:
            found = client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
                    key=ArtifactFilterKey(any_=[key]),
                )
            )
        assert found, f"flow run {flow_run_id} published no artifact {key!r}"
        return str(found[0].data)

    def heartbeats(self, flow_run_id: UUID) -> list[float]:
        """When the flow run's heartbeat events occurred (epoch seconds), oldest first."""
        from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

        wanted = EventFilter(
            event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
            resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"]),
        )
        found: list[float] = []
        with self.client() as client:
            page = client.read_events(wanted, 50)
            while True:
                found += [e.occurred.timestamp() for e in page.events]
                if page.next_page is None:
                    break
                page = client.read_events_page(page.next_page)
        return sorted(found)

    def state_types(self, flow_run_id: UUID) -> list[str]:
        """Every state the flow run went through, oldest first (CRASHED among them if the
        automation ever ended it, even if it later moved on)."""
        with self.client() as client:
            states = client.read_flow_run_states(flow_run_id)
        return [s.type.value for s in sorted(states, key=lambda s: s.timestamp)]

    def worker_of(self, flow_run_id: UUID) -> Worker:
        """The worker that took the flow run (its log says so)."""
        return wait_for(
            lambda: next((w for w in self.workers.values() if w.submitted(flow_run_id)), None),
            60,
            f"a worker to take flow run {flow_run_id}",
        )

    def pause_schedules(self) -> None:
        """Pause every schedule of the pool's deployments (nightly drift, hourly cleanup): only
        the runs a test creates run."""
        from prefect.client.schemas.filters import WorkPoolFilter, WorkPoolFilterName

        with self.client() as client:
            found = client.read_deployments(
                work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[self.pool]))
            )
            for deployment in found:
                for schedule in deployment.schedules:
                    client.update_deployment_schedule(deployment.id, schedule.id, active=False)

    def active_slots(self, limit: str) -> int:
        with self.client() as client:
            return int(client.read_global_concurrency_limit_by_name(limit).active_slots)

    def wait_slot_free(self, limit: str, timeout: float) -> None:
        wait_for(lambda: self.active_slots(limit) == 0, timeout, f"{limit}'s slot to be freed")

    def explain(self, flow_run_id: UUID) -> str:
        """What to show when a run did not do what a test expected."""
        run = self.flow_run(flow_run_id)
        state = run.state
        tail = {name: w.text()[-3000:] for name, w in self.workers.items()}
        return (
            f"flow run {run.name} {flow_run_id}: {state.type.value if state else None} "
            f"{state.message if state else ''}\n--- its logs\n{self.logs(flow_run_id)[-6000:]}\n"
            + "\n".join(f"--- worker {n} log tail\n{t}" for n, t in tail.items())
        )

    # -- workers ---------------------------------------------------------------------------------

    def environ(self, **extra: str) -> dict[str, str]:
        """A shell's environment on a team machine: nothing of this process's STACKFLOW_*,
        PULUMI_*, AWS_* or PREFECT_*, then the team's variables, then `extra`; Python imports this
        checkout (the venv's editable install points at another)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("STACKFLOW_", "PULUMI_", "AWS_", "PREFECT_"))
        }
        env.update(self.variables)
        env.update(extra)
        env["PYTHONPATH"] = str(ROOT)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def prefect(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`prefect <args>` as the README runs it, from the repository's root."""
        home = self.folder / "shell-home"
        home.mkdir(exist_ok=True)
        done = subprocess.run(
            [PREFECT, *args],
            env=self.environ(PREFECT_HOME=str(home)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    def stackflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`python flows/run.py <args>` in a teammate's shell (the team's variables)."""
        home = self.folder / "shell-home"
        home.mkdir(exist_ok=True)
        return subprocess.run(
            [sys.executable, str(RUN_PY), *args],
            env=self.environ(PREFECT_HOME=str(home), STACKFLOW_STATE_DIR=str(home / "state")),
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    def start_worker(self, name: str, host: str | None = None) -> Worker:
        """`prefect worker start --pool <pool> --limit 1` with a state folder of its own (caches
        only); with `host`, in a UTS namespace of its own under that hostname. Returns once the
        worker says it polls the pool."""
        state = self.folder / f"worker-{name}"
        (state / "prefect-home").mkdir(parents=True, exist_ok=True)
        log = self.folder / f"worker-{name}.log"
        command = [PREFECT, "worker", "start", "--pool", self.pool, "--limit", "1"]
        command += ["--name", name]
        if host is not None:  # a second machine, as far as hostnames go
            command = ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$@"', "sh"]
            command += [PREFECT, "worker", "start", "--pool", self.pool, "--limit", "1"]
            command += ["--name", name]
        env = self.environ(
            STACKFLOW_STATE_DIR=str(state / "state"),
            PREFECT_HOME=str(state / "prefect-home"),
        )
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                env=env,
                cwd=state,  # not the checkout: the deployments' pull step goes there
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        worker = Worker(name, host or socket.gethostname(), state, log, process)
        self.workers[name] = worker

        def polling() -> bool:
            assert worker.alive(), f"worker {name} exited:\n{worker.text()[-4000:]}"
            return "started!" in worker.text() or "Worker pool" in worker.text()

        wait_for(polling, 90, f"worker {name} to start polling {self.pool}")
        return worker

    @contextlib.contextmanager
    def paused(self, worker: Worker) -> Iterator[None]:
        """The worker stopped (SIGSTOP) for the block, so the other one takes what is created."""
        os.kill(worker.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(worker.process.pid, signal.SIGCONT)

    def ensure_workers(self, count: int) -> None:
        """Start fresh workers (new names; the dead ones' hosts) until `count` are alive."""
        dead = [w for w in self.workers.values() if not w.alive()]
        while sum(w.alive() for w in self.workers.values()) < count:
            gone = dead.pop(0)
            name = f"{gone.name}{len(self.workers) + 1}"
            local = gone.host == socket.gethostname()
            self.start_worker(name, None if local else f"{gone.host}-{len(self.workers) + 1}")

    def stop_workers(self) -> None:
        for worker in self.workers.values():
            worker.stop()


def kill_tree(pid: int) -> list[int]:
    """SIGKILL `pid` and every process below it, at once (a machine lost); the pids killed."""
    victims = [pid, *descendants(pid)]
    for victim in victims:
        try:
            os.kill(victim, signal.SIGSTOP)  # nothing below it reacts to the others' deaths
        except ProcessLookupError:
            continue
    for victim in victims:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            continue
    return victims


# --- what Pulumi's state in the team's backend says -------------------------------------------


def update_history(backend_url: str, environment: str, stack: str) -> list[dict[str, Any]]:
    """Pulumi's own record of every finished update, refresh or destroy of one stack (kind,
    result, startTime and endTime in epoch seconds), oldest first, read from the backend."""
    from stackflow.backends import open_blobs

    blobs = open_blobs(backend_url)
    try:
        found = blobs.under(f".pulumi/history/stackflow-{stack}/{environment}/")
    finally:
        blobs.close()
    records = [json.loads(b.data) for b in found if b.key.endswith(".history.json")]
    return sorted(records, key=lambda r: r["startTime"])


def deployed_stacks(backend_url: str, environment: str) -> list[str]:
    """The stacks (networking, database, app) the backend holds for an environment."""
    from stackflow.engine.checkpoints import CheckpointReader

    with CheckpointReader(backend_url) as reader:
        return [s for s in STACKS if environment in reader.stacks(f"stackflow-{s}")]


def locks(backend_url: str, environment: str, stack: str) -> list[Any]:
    """The stack's locks (LockHolder: pid, host, time) as the backend holds them."""
    from stackflow.engine.checkpoints import CheckpointReader

    with CheckpointReader(backend_url) as reader:
        return reader.locks(f"stackflow-{stack}", environment)


def pending_operations(backend_url: str, environment: str, stack: str) -> list[Any]:
    """The operations an interrupted update left in the stack's checkpoint."""
    from stackflow.engine.checkpoints import CheckpointReader

    with CheckpointReader(backend_url) as reader:
        found = reader.checkpoint(f"stackflow-{stack}", environment)
    return list(found.pending_operations) if found is not None else []


def engine_operations(markdown: str) -> int:
    """'engine operations: N' as a run's summary artifact states it."""
    found = re.search(r"engine operations: (\d+)", markdown)
    assert found, markdown[:2000]
    return int(found.group(1))
