"""Team mode, really run: a Prefect server on the session's real PostgreSQL (its own database,
basic auth on), the Pulumi state and stackflow's records on the same PostgreSQL, a process work
pool filled by `prefect deploy --all` from a prefect.yaml generated for this module's environments,
and two real `prefect worker` processes, each with a state folder of its own, deploying with the
real Pulumi engine on the session's **local cloud** (moto on loopback, a MariaDB server per
database; nothing reaches AWS). The commands are the README's ("Team mode").

Worker B runs in a UTS namespace of its own (another hostname) when the tests run as root: to
Pulumi's locks and stackflow's holder records it is a second machine. The module's environments
are deployed once and reused in file order: the two dev environments by the first test, checked
and re-run by the next ones. The last test waits out the heartbeat window on purpose (about two
minutes): it is marked `slow` and runs with `-m slow` (or `-m "integration or slow"`).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from prefect.exceptions import ObjectNotFound

from deployments.prefect_yaml import prefect_yaml
from deployments.serve import deployment_specs
from stackflow.backends import open_records, records_beside
from stackflow.crashes import HEARTBEAT_S, ZOMBIE_WINDOW_S
from stackflow.localcloud.inventory import list_resources
from stackflow.localcloud.knobs import clear_knobs, get_knobs, set_knobs
from stackflow.localprefect import (
    PrefectServer,
    auth_string,
    start_prefect_server,
    stop_prefect_server,
)
from stackflow.postgres import PostgresServer, create_database
from stackflow.postgres.urls import prefect_database_url, pulumi_backend_url
from stackflow.processes import free_port
from stackflow.records.projects import ProjectRecords
from tasks.limits import limit_name
from tests.integration.team_support import (
    Team,
    deployed_stacks,
    engine_operations,
    kill_tree,
    locks,
    pending_operations,
    update_history,
    wait_for,
)
from tests.realenv import ROOT, STACKS, declare, real_variables, unique

# the module's setup (server on PostgreSQL, `prefect deploy`, two workers) counts in the first
# test's time; real deploys on two cores take minutes
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PROJECT = "stackflow"  # the project the repository's stackflow.toml names: its records' keys
SUBNET = "aws:ec2/subnet:Subnet"
DB_INSTANCE = "aws:rds/instance:Instance"


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer, local_cloud: Any
) -> Iterator[Team]:
    """The README's team setup, once for the module: a Prefect server on PostgreSQL with basic
    auth, the pool, `prefect deploy --all`, two workers sharing the team's variables."""
    folder = tmp_path_factory.mktemp("team")
    tag = uuid.uuid4().hex[:8]
    prefect_db, pulumi_db = f"prefect_{tag}", f"pulumi_{tag}"
    for name in (prefect_db, pulumi_db, "stackflow"):  # stackflow: the records beside the backend
        create_database(postgres, name)
    home = folder / "server-home"
    server: PrefectServer = start_prefect_server(
        home,
        free_port(),
        ui=False,
        database_url=prefect_database_url(postgres, prefect_db),
        auth=auth_string(home),
    )
    try:
        backend_url = pulumi_backend_url(postgres, pulumi_db)
        machine = real_variables(folder / "state", local_cloud, server)
        shutil.rmtree(folder / "state", ignore_errors=True)  # each worker has a folder of its own
        variables = {
            k: v for k, v in machine.items() if k.startswith("STACKFLOW_") and "STATE_DIR" not in k
        }
        variables |= {
            "STACKFLOW_BACKEND_URL": backend_url,
            "STACKFLOW_STATE_PASSPHRASE": f"team-passphrase-{tag}",
            "STACKFLOW_CHECKOUT": str(ROOT),
            "PREFECT_API_URL": server.api_url,
            "PREFECT_API_AUTH_STRING": server.auth_string or "",
        }  # no PREFECT_FLOWS_HEARTBEAT_FREQUENCY: the deployments' job variables carry it
        environments = {"one": unique("dev"), "two": unique("dev")}
        for name in environments.values():
            declare(variables, name)
        project = Path(variables["STACKFLOW_PROJECT_DIR"])
        team = Team(
            api_url=server.api_url,
            auth=server.auth_string or "",
            pool=f"team-{tag}",
            variables=variables,
            backend_url=backend_url,
            records_url=str(records_beside(backend_url)),
            project=project,
            folder=folder,
            environments=environments,
        )
        specs = deployment_specs(list(environments.values()), project_dir=project)
        yaml_file = folder / "prefect.yaml"
        # one pool for all: this module tests team mode's machinery, not the review workers'
        # separation (tests/integration/test_trust.py)
        yaml_file.write_text(prefect_yaml(specs, pool=team.pool, review_pool=team.pool))
        team.prefect("work-pool", "create", team.pool, "--type", "process")
        team.prefect("--no-prompt", "deploy", "--prefect-file", str(yaml_file), "--all")
        team.pause_schedules()  # only the runs the tests create run (drift nightly, cleanup hourly)
        # the crashed-run automation, as a team's own server gets it: this one has it already
        installed = team.stackflow("server", "automation")
        assert installed.returncode == 0, installed.stdout + installed.stderr
        assert "already installed" in installed.stdout, installed.stdout
        try:
            team.start_worker("a")
            team.start_worker("b", f"team-b-{tag}" if os.geteuid() == 0 else None)
            yield team
        finally:
            team.stop_workers()
            clear_knobs(local_cloud.url)
    finally:
        stop_prefect_server(server.pid)


def intervals(team: Team, environment: str, stack: str) -> list[tuple[int, int]]:
    return [
        (r["startTime"], r["endTime"]) for r in update_history(team.backend_url, environment, stack)
    ]


def assert_no_overlap(spans: list[tuple[int, int]]) -> None:
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"two operations on one stack overlapped: {spans}"


def test_two_environments_spread_over_both_workers_and_one_stack_takes_turns(
    team: Team,
) -> None:
    """Local cloud: deploys of two environments created at once run on both workers (one each)
    and complete. Then two forced database updates of the first environment, at once: one runs
    on the worker that never saw it (a fresh workspace that must decrypt the state the other
    wrote with the team's passphrase); the stack's slot makes them take turns, as Pulumi's own
    update history in the PostgreSQL backend shows."""
    one, two = team.environments["one"], team.environments["two"]
    runs = {one: team.run(f"deploy/{one}"), two: team.run(f"deploy/{two}")}
    for name, run in runs.items():
        ended = team.wait_final(run, 600)
        assert ended.state.type.value == "COMPLETED", team.explain(run)
        assert deployed_stacks(team.backend_url, name) == list(STACKS)
    workers = {name: team.worker_of(run) for name, run in runs.items()}
    assert workers[one] is not workers[two], "both runs went to one worker"
    pids = {team.flow_run(run).infrastructure_pid for run in runs.values()}
    assert len(pids) == 2 and None not in pids
    team.deployed_by = {one: workers[one], two: workers[two]}
    for run in runs.values():  # heartbeats every 30 s from the worker's run (Prefect's own: 180)
        flow_run = team.flow_run(run)
        assert flow_run.start_time is not None and flow_run.end_time is not None
        start, end = flow_run.start_time.timestamp(), flow_run.end_time.timestamp()
        gap = HEARTBEAT_S + 15  # Prefect's 180 s default would leave gaps of minutes

        def covered(run: UUID = run, end: float = end, gap: float = gap) -> list[float]:
            # events reach the server's store in batches: wait until the last beat is in
            beats = team.heartbeats(run)
            return beats if beats and end - beats[-1] < gap else []

        beats = wait_for(covered, 60, f"the heartbeats of {run} up to its end")
        spans = list(itertools.pairwise([start, *beats, end]))
        assert max(b - a for a, b in spans) < gap, (start, beats, end)
        assert "CRASHED" not in team.state_types(run)
    newcomer = workers[two]  # it has never worked on `one`: no workspace of it yet
    assert not list(newcomer.state_dir.rglob(f"*{one}*"))

    forced = [
        team.run(f"deploy/{one}", stacks=["database"], force=True),
        team.run(f"deploy/{one}", stacks=["database"], force=True),
    ]
    for run in forced:
        ended = team.wait_final(run, 300)
        assert ended.state.type.value == "COMPLETED", team.explain(run)
    assert {team.worker_of(r).name for r in forced} == {"a", "b"}
    spans = intervals(team, one, "database")
    assert len(spans) == 3, spans  # the first deploy's, then the two forced ones
    assert_no_overlap(spans)
    for stack in STACKS:
        assert_no_overlap(intervals(team, one, stack))
        assert_no_overlap(intervals(team, two, stack))


def test_a_no_op_up_on_the_other_worker_makes_no_engine_call(team: Team) -> None:
    """Local cloud, the README's two terminals: an `up` of the second environment on the worker
    that did not deploy it skips every stack from the checkpoints in the backend: no new update
    in Pulumi's history, and the run's summary says 0 engine operations."""
    two = team.environments["two"]
    deployer = team.deployed_by[two]
    other = next(w for w in team.workers.values() if w is not deployer)
    before = {s: len(update_history(team.backend_url, two, s)) for s in STACKS}
    with team.paused(deployer):  # the other terminal's worker takes it
        started = team.prefect("deployment", "run", f"deploy/{two}")
        found = re.search(r"UUID: ([0-9a-f-]{36})", started.stdout)
        assert found, started.stdout
        run = UUID(found.group(1))
        team.worker_of(run)
    assert team.worker_of(run) is other
    ended = team.wait_final(run, 300)
    assert ended.state.type.value == "COMPLETED", team.explain(run)
    after = {s: len(update_history(team.backend_url, two, s)) for s in STACKS}
    assert after == before
    summary = team.artifact(run, f"up-{two}")
    assert engine_operations(summary) == 0, summary
    for stack in STACKS:
        assert f"| {stack} | up | unchanged |" in summary, summary
    team.logs_containing(run, "skipped, no engine call")


def test_a_deployment_refuses_another_environment_before_anything_starts(team: Team) -> None:
    """deploy/<one> asked for another environment, and deploy/ephemeral asked for a dev one: each
    run ends Failed naming both, and the backend and the records hold nothing of what they
    asked for (no stack, no environment record, no holder)."""
    one = team.environments["one"]
    stranger, dev_name = unique("dev"), unique("dev")
    runs = {
        stranger: team.run(f"deploy/{one}", environment=stranger),
        dev_name: team.run("deploy/ephemeral", environment=dev_name),
    }
    for name, run in runs.items():
        ended = team.wait_final(run, 300)
        assert ended.state.type.value == "FAILED", team.explain(run)
        assert name in ended.state.message, ended.state.message
        assert deployed_stacks(team.backend_url, name) == []
        records = ProjectRecords(open_records(team.records_url), PROJECT)
        try:
            assert records.list(f"environments/{name}") == []
            assert records.list(f"holders/{name}/") == []
        finally:
            records.close()
    assert f"acts on environment {one!r} only" in team.flow_run(runs[stranger]).state.message
    assert "acts on ephemeral environments only" in team.flow_run(runs[dev_name]).state.message


def test_cleanup_on_a_worker_destroys_every_expired_environment_even_a_half_deployed_one(
    team: Team, local_cloud: Any
) -> None:
    """Local cloud: pr-a's first deploy fails at the database (a permanent AWS error from the
    cloud's knobs) after its networking was created; pr-b deploys its networking. Both have a TTL
    of seconds. The cleanup deployment, on a worker, destroys both: their records and concurrency
    limits go, the backend holds no stack of them and the local cloud none of their resources."""
    half, whole = unique("pr"), unique("pr")
    for name in (half, whole):
        declare(team.variables, name, ttl_hours=0.0002)  # under a second
    set_knobs(
        local_cloud.url,
        {"faults": [{"kind": "permanent", "environment": half, "type": DB_INSTANCE}]},
    )
    try:
        runs = {
            half: team.run("deploy/ephemeral", environment=half),
            whole: team.run("deploy/ephemeral", environment=whole, stacks=["networking"]),
        }
        failed = team.wait_final(runs[half], 400)
        done = team.wait_final(runs[whole], 400)
    finally:
        clear_knobs(local_cloud.url)
    assert failed.state.type.value == "FAILED", team.explain(runs[half])
    assert done.state.type.value == "COMPLETED", team.explain(runs[whole])
    # the app starts beside the database: it may hold what needs only networking
    assert deployed_stacks(team.backend_url, half) in (
        ["networking", "database"],
        ["networking", "database", "app"],
    )
    assert list_resources(local_cloud.url, local_cloud.region, half), "nothing was left half-way"
    records = ProjectRecords(open_records(team.records_url), PROJECT)
    try:
        record = records.get(f"environments/{half}")
        assert record is not None and record.value["status"] == "failed", record
        assert team.active_slots(limit_name(half, "database")) == 0  # the limit exists, free

        cleanup = team.run("cleanup-expired/hourly")
        ended = team.wait_final(cleanup, 400)
        assert ended.state.type.value == "COMPLETED", team.explain(cleanup)
        for name in (half, whole):
            assert records.get(f"environments/{name}") is None
            assert deployed_stacks(team.backend_url, name) == []
            assert list_resources(local_cloud.url, local_cloud.region, name) == []
            for stack in STACKS:
                with pytest.raises(ObjectNotFound):
                    team.active_slots(limit_name(name, stack))
    finally:
        records.close()
    team.logs_containing(cleanup, f"{half} expired", f"{whole} expired")


def test_killing_a_worker_leaves_its_run_to_complete(team: Team, local_cloud: Any) -> None:
    """Local cloud: a worker killed with SIGKILL while its run updates a stack does not take the
    run's process with it: the run completes, as Prefect's API shows."""
    one = team.environments["one"]
    set_knobs(local_cloud.url, {"latency_s": {f"env:{one}": 1.0}})
    try:
        run = team.run(f"deploy/{one}", stacks=["networking"], force=True)
        worker = team.worker_of(run)
        wait_for(lambda: locks(team.backend_url, one, "networking"), 120, "the update to start")
        child = int(team.flow_run(run).infrastructure_pid)
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=30)
        ended = team.wait_final(run, 300)
    finally:
        clear_knobs(local_cloud.url)
    assert ended.state.type.value == "COMPLETED", team.explain(run)
    wait_for(lambda: not os.path.exists(f"/proc/{child}"), 60, "the run's process to exit")


@pytest.mark.slow
def test_a_run_whose_machine_died_ends_crashed_and_the_next_run_elsewhere_heals_its_lock(
    team: Team, local_cloud: Any
) -> None:
    """Local cloud: a deploy of pr-c hangs on a subnet's create; its worker and every process
    below it are killed with SIGKILL (its machine lost). Nobody reports the run, so the heartbeat
    automation ends it Crashed within heartbeat + window; its concurrency slot's lease expires.
    The next run of pr-c, on the other worker (another host), breaks the stale Pulumi lock only
    through the fence (the holder's run Crashed, the lock older than the window, host and pid the
    holder record's), clears the pending create and completes; its summary says what it cleared."""
    crash = unique("pr")
    team.ensure_workers(2)
    set_knobs(
        local_cloud.url,
        {"faults": [{"kind": "hang", "count": 1, "environment": crash, "type": SUBNET}]},
    )
    try:
        run = team.run("deploy/ephemeral", environment=crash, stacks=["networking"])

        def hung() -> bool:
            fault = next(f for f in get_knobs(local_cloud.url).faults if f.environment == crash)
            if fault.count != 0 or not locks(team.backend_url, crash, "networking"):
                return False
            pending = pending_operations(team.backend_url, crash, "networking")
            return [p.resource_type for p in pending] == [SUBNET]

        wait_for(hung, 240, "the networking update to hang on a subnet's create")
        victim = team.worker_of(run)
        killed_at = time.monotonic()
        kill_tree(victim.process.pid)
        victim.process.wait(timeout=30)
    finally:
        clear_knobs(local_cloud.url)
    (lock,) = locks(team.backend_url, crash, "networking")
    assert lock.host == victim.host
    assert team.active_slots(limit_name(crash, "networking")) == 1

    crashed = team.wait_state(run, "CRASHED", HEARTBEAT_S + ZOMBIE_WINDOW_S + 60)
    assert f"no heartbeat for {ZOMBIE_WINDOW_S}s" in crashed.state.message, crashed.state
    assert time.monotonic() - killed_at <= HEARTBEAT_S + ZOMBIE_WINDOW_S + 60
    team.wait_slot_free(limit_name(crash, "networking"), 120)

    survivor = next(w for w in team.workers.values() if w is not victim and w.alive())
    again = team.run("deploy/ephemeral", environment=crash, stacks=["networking"])
    ended = team.wait_final(again, 400)
    assert ended.state.type.value == "COMPLETED", team.explain(again)
    assert team.worker_of(again) is survivor
    if survivor.host != victim.host:
        team.logs_containing(
            again,
            f"removed the lock of an interrupted update (its holder, flow run {run} (pulumi "
            f"pid {lock.pid} on {victim.host}), ended crashed",
        )
    else:
        team.logs_containing(again, f"pulumi pid {lock.pid} on {victim.host}, which is gone")
    summary = team.artifact(again, f"up-{crash}")
    assert "recovered what an interrupted operation left" in summary, summary
    assert "the local cloud never made it" in summary, summary
    assert locks(team.backend_url, crash, "networking") == []
    assert pending_operations(team.backend_url, crash, "networking") == []
