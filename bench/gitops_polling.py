"""GitOps at scale: what 100 environments that follow branches cost when nothing changes, and how
long a pushed commit waits before its sync runs (issue: GitOps polls, and every poll is a flow run).

Everything is local and real: a Prefect server (SQLite) started here, a bare git repository here
with one branch per environment (`env/000` ...), and `deployments/serve.py`'s own deployments for
those environments served in a process of its own (only the GitOps ones: `gitops/poll` and
`sync/<env>`). The environments' records say each is deployed at its branch's commit (written
through the same record functions a deploy uses); no deploy runs, no engine call, no cloud.

Per hour with nothing changing (measured over `--minutes`, scaled to an hour): the flow runs
created (by flow), the Prefect database's growth (its SQLite file and WAL, and rows of flow runs,
states, logs and events) and the CPU spent by the Prefect server and the serving process with
everything it started (flow-run processes, git). Then pushes, each to a branch of its own: through
the shipped post-receive hook (scripts/git_hooks/post_receive.py), how long from `git push` until
the sync run was created, picked up by the runner (Pending: its process started) and running;
and without the hook, until the poll found it. The same is measured for the design it replaces
(a sync/<env> deployment per environment on its own interval) on `--before-environments`
environments for `--before-minutes`, scaled to the same count and an hour.

    .venv/bin/python bench/gitops_polling.py                       # into bench/results.json
    .venv/bin/python bench/gitops_polling.py --minutes 2 --before-environments 0 --out FILE
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import ROOT, merge_results, run_metadata, say

KEY = "gitops_polling"
HOOK = ROOT / "scripts" / "git_hooks" / "post_receive.py"
INTERVAL_S = 60  # the shortest interval the settings accept: the poll's worst case
RUNNER_POLL_S = 10  # PREFECT_RUNNER_POLL_FREQUENCY, Prefect's default: the worker's poll interval
_TICKS = os.sysconf("SC_CLK_TCK")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "PATH": "/usr/bin:/bin",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, env=GIT_ENV
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip() + done.stderr.strip()


def names(count: int) -> list[str]:
    return [f"dev-g{i:03d}" for i in range(count)]


def branch_of(environment: str) -> str:
    return f"env/{environment.removeprefix('dev-g')}"


# --- what is measured -------------------------------------------------------------------------


def tree_cpu_s(root: int) -> float:
    """CPU seconds of a process and every descendant, alive or reaped by one of them."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)], stats[int(entry.name)] = int(fields[1]), fields
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        grown, tree = bool(more), tree | more
    total = sum(sum(int(stats[p][i]) for i in (11, 12, 13, 14)) for p in tree if p in stats)
    return total / _TICKS


def database(home: Path) -> dict[str, int]:
    """The Prefect server's SQLite database: bytes on disk (with its WAL) and rows that grow."""
    [path] = list(home.rglob("prefect.db"))
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
        rows = {
            table: int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("flow_run", "flow_run_state", "log", "events", "event_resources")
        }
    return {"bytes": size, **rows}


def flow_runs_by_flow(after: datetime) -> dict[str, int]:
    """Flow runs created since `after`, by flow name (scheduled ahead ones included)."""
    from prefect.client.orchestration import get_client

    counts: dict[str, int] = {}
    with get_client(sync_client=True) as client:
        flows = {f.id: f.name for f in client.read_flows()}
        offset = 0
        while True:
            page = client.read_flow_runs(limit=200, offset=offset)
            for run in page:
                if run.created and run.created >= after:
                    name = flows.get(run.flow_id, "?")
                    counts[name] = counts.get(name, 0) + 1
            if len(page) < 200:
                return counts
            offset += 200


# --- the setup ---------------------------------------------------------------------------------


def make_repository(folder: Path, environments: list[str]) -> tuple[Path, Path]:
    """A bare repository with one branch per environment at one commit, and a working copy."""
    origin, work = folder / "origin.git", folder / "work"
    git(folder, "init", "-q", "--bare", "-b", "main", str(origin))
    git(folder, "clone", "-q", str(origin), str(work))
    (work / "README.md").write_text("refs for the GitOps benchmark\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "first")
    git(work, "push", "-q", "origin", *(f"HEAD:refs/heads/{branch_of(e)}" for e in environments))
    return origin, work


def make_project(folder: Path, origin: Path, environments: list[str]) -> Path:
    project = folder / "project"
    (project / "environments").mkdir(parents=True)
    (project / "stackflow.toml").write_text(
        (ROOT / "stackflow.toml").read_text() + f'\n[git]\nrepository = "{origin}"\n'
    )
    for env in environments:
        (project / "environments" / f"{env}.toml").write_text(
            f'kind = "dev"\ncloud = "local"\n\n[git]\nbranch = "{branch_of(env)}"\n'
            f"interval_s = {INTERVAL_S}\n"
        )
    return project


def seed_records(environments: list[str], head: str) -> None:
    """Each environment deployed at `head`, as a sync that deployed it leaves the records."""
    from stackflow.gitops import sync
    from stackflow.records.environments import record_attempt, record_outcome, records_of
    from stackflow.settings import get_settings

    for env in environments:
        settings = get_settings(env, strict=False)
        records = records_of(settings)
        record_attempt(records, settings)
        record_outcome(records, settings, succeeded=True)
        sync.note_seen(records, env, head, {"branch": branch_of(env)})
        sync.begin(records, env, head, {"sync_run": None}, sync.read(records, env))
        sync.finish(records, env, head, sync.Result.SUCCEEDED, "deployed", INTERVAL_S)


@contextmanager
def serving(env: dict[str, str], design: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """This script's `_serve` in a process of its own (its own process group), stopped after."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, __file__, "_serve", design],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        import signal

        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def serve_gitops(design: str) -> None:
    """Serve the GitOps deployments of every declared environment: `after` as
    deployments/serve.py builds them (gitops/poll + sync/<env> on push events), `before` as it
    built them until now (sync/<env> each on its own interval, no poll, no events)."""
    from datetime import timedelta

    from prefect.schedules import Interval

    from deployments.serve import build_deployments, serve_bounded
    from flows.sync import sync_environment

    if design == "after":
        chosen = [d for d in build_deployments() if d.flow_name in ("gitops", "sync")]
    else:
        from stackflow.settings import declared_environments, get_settings

        project = Path(os.environ["STACKFLOW_PROJECT_DIR"])
        chosen = [
            sync_environment.to_deployment(  # type: ignore[misc]
                name=env,
                parameters={"environment": env},
                schedules=[Interval(timedelta(seconds=get_settings(env).git.interval_s))],
            )
            for env in declared_environments(project)
        ]
    serve_bounded(chosen, limit=8)


def wait_served(count: int, log: Path, timeout: float = 600) -> None:
    """Until `count` deployments are registered and polled by the runner."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            polled = [d for d in client.read_deployments(limit=200) if d.last_polled is not None]
            offset = 200
            while len(polled) < count:
                page = client.read_deployments(limit=200, offset=offset)
                if not page:
                    break
                polled += [d for d in page if d.last_polled is not None]
                offset += 200
            if len(polled) >= count:
                return
            time.sleep(2)
    raise RuntimeError(
        f"{count} deployments not served in {timeout:.0f}s:\n{log.read_text()[-3000:]}"
    )


# --- the measurements --------------------------------------------------------------------------


def quiet_hour(server_pid: int, serve_pid: int, home: Path, minutes: float) -> dict[str, Any]:
    """Flow runs, database growth and CPU over `minutes` with nothing changing, per hour."""
    since = datetime.now(UTC)
    db0, cpu0 = database(home), (tree_cpu_s(server_pid), tree_cpu_s(serve_pid))
    time.sleep(minutes * 60)  # the measured window: the servers do what they do meanwhile
    db1, cpu1 = database(home), (tree_cpu_s(server_pid), tree_cpu_s(serve_pid))
    scale = 60 / minutes
    runs = flow_runs_by_flow(since)
    return {
        "measured_minutes": minutes,
        "flow_runs_per_hour": {k: round(v * scale) for k, v in sorted(runs.items())},
        "flow_runs_per_hour_total": round(sum(runs.values()) * scale),
        "database_growth_per_hour": {k: round((db1[k] - db0[k]) * scale) for k in db0},
        "cpu_s_per_hour": {
            "prefect_server": round((cpu1[0] - cpu0[0]) * scale, 1),
            "serving_process_and_its_runs": round((cpu1[1] - cpu0[1]) * scale, 1),
        },
    }


def first_sync_run(environment: str, after: datetime, timeout: float) -> Any:
    """The first sync run of `environment` created after `after`, once it is running."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(
                deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[environment]))
            )
            begun = [r for r in runs if r.created >= after and r.start_time is not None]
            if begun:
                run = min(begun, key=lambda r: r.created)
                states = client.read_flow_run_states(run.id)
                return run, states
            time.sleep(0.1)
    raise RuntimeError(f"no sync run of {environment} began within {timeout:.0f}s")


def push_latency(work: Path, environment: str, hooked: bool) -> dict[str, Any]:
    """Push a commit to the environment's branch; seconds until its sync run was created, picked
    up (Pending) and running."""
    (work / "PUSHED.md").write_text(f"{environment} {time.time()}\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", f"a commit for {environment}")
    pushed = datetime.now(UTC)
    told = git(work, "push", "origin", f"HEAD:refs/heads/{branch_of(environment)}")
    assert ("stackflow: told Prefect" in told) == hooked, told
    run, states = first_sync_run(environment, pushed, timeout=INTERVAL_S + 3 * RUNNER_POLL_S + 60)
    pending = next(s.timestamp for s in states if s.type.value == "PENDING")
    return {
        "created_s": round((run.created - pushed).total_seconds(), 2),
        "picked_up_s": round((pending - pushed).total_seconds(), 2),
        "running_s": round((run.start_time - pushed).total_seconds(), 2),
        "started_by": "poll" if "gitops-poll" in run.tags else "push event",
    }


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"samples": samples}
    for key in ("created_s", "picked_up_s", "running_s"):
        values = sorted(s[key] for s in samples)
        out[key] = {"median": values[len(values) // 2], "max": values[-1]}
    return out


def measure(design: str, count: int, minutes: float, pushes: int, unhooked: int) -> dict[str, Any]:
    """One design, from nothing: its own Prefect server, repository, project and serve process."""
    from stackflow.localprefect import start_prefect_server, stop_prefect_server
    from stackflow.processes import free_port

    folder = Path(tempfile.mkdtemp(prefix=f"stackflow-bench-gitops-{design}-"))
    environments = names(count)
    server = start_prefect_server(folder / "prefect-server", free_port(), ui=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKFLOW_", "PREFECT_"))}
    origin, work = make_repository(folder, environments)
    env |= {
        "PREFECT_API_URL": server.api_url,
        "PREFECT_HOME": str(folder / "prefect-client"),
        "STACKFLOW_PROJECT_DIR": str(make_project(folder, origin, environments)),
        "STACKFLOW_STATE_DIR": str(folder / "state"),
        "STACKFLOW_GIT_NOTES": "false",  # the refused pushes' notes are not what is measured
    }
    os.environ.update(env)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            return _measured(
                design,
                folder,
                env,
                server.pid,
                environments,
                work,
                origin,
                minutes,
                pushes,
                unhooked,
            )
    finally:
        for key in env:
            os.environ.pop(key, None)
        stop_prefect_server(server.pid)
        shutil.rmtree(folder, ignore_errors=True)


def _measured(
    design: str,
    folder: Path,
    env: dict[str, str],
    server_pid: int,
    environments: list[str],
    work: Path,
    origin: Path,
    minutes: float,
    pushes: int,
    unhooked: int,
) -> dict[str, Any]:
    count = len(environments)
    seed_records(environments, git(work, "rev-parse", "HEAD"))
    log = folder / "serve.log"
    with serving(env, design, log) as served:
        wait_served(count + (1 if design == "after" else 0), log)
        say(f"{design}: {count} environments served; waiting one interval before measuring")
        time.sleep(INTERVAL_S + RUNNER_POLL_S)  # the schedules' first runs are behind us
        say(f"{design}: measuring {minutes} minute(s) with nothing changing")
        figures = quiet_hour(server_pid, served.pid, folder / "prefect-server", minutes)
        figures["environments"] = count
        if design == "after" and pushes:
            shutil.copy2(HOOK, origin / "hooks" / "post-receive")
            git(origin, "config", "stackflow.prefectApiUrl", env["PREFECT_API_URL"])
            chosen = random.Random(7).sample(environments, pushes + unhooked)
            hooked = []
            for env_name in chosen[:pushes]:
                time.sleep(random.uniform(0, RUNNER_POLL_S))  # any phase of the runner's poll
                hooked.append(push_latency(work, env_name, hooked=True))
                say(f"push through the hook: {hooked[-1]}")
            (origin / "hooks" / "post-receive").unlink()
            polled = []
            for env_name in chosen[pushes:]:
                time.sleep(random.uniform(0, INTERVAL_S))
                polled.append(push_latency(work, env_name, hooked=False))
                say(f"push, no hook: {polled[-1]}")
            figures["push_through_hook"] = summarise(hooked)
            if polled:
                figures["push_without_hook"] = summarise(polled)
    return figures


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_serve"]:
        serve_gitops(argv[1])
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--environments", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=10.0, help="quiet window measured")
    parser.add_argument("--pushes", type=int, default=5, help="pushes through the hook")
    parser.add_argument("--unhooked", type=int, default=3, help="pushes the poll must find")
    parser.add_argument("--before-environments", type=int, default=10)
    parser.add_argument("--before-minutes", type=float, default=5.0)
    parser.add_argument("--out", type=Path, help="write the figures here, not results.json")
    args = parser.parse_args(argv)
    started = time.monotonic()
    load_at_start = round(os.getloadavg()[0], 2)  # other work on the machine skews figures
    result: dict[str, Any] = {
        "what": "GitOps with nothing changing, per hour, and a pushed commit's wait (Prefect "
        "server on SQLite, a bare repository here, no deploys)",
        "interval_s": INTERVAL_S,
        "runner_poll_s": RUNNER_POLL_S,
    }
    result["after"] = measure("after", args.environments, args.minutes, args.pushes, args.unhooked)
    if args.before_environments:
        before = measure("before", args.before_environments, args.before_minutes, 0, 0)
        scale = args.environments / args.before_environments
        before[f"scaled_to_{args.environments}"] = {
            "flow_runs_per_hour_total": round(before["flow_runs_per_hour_total"] * scale),
            "database_bytes_per_hour": round(before["database_growth_per_hour"]["bytes"] * scale),
            "cpu_s_per_hour": round(sum(before["cpu_s_per_hour"].values()) * scale, 1),
        }
        result["before"] = before
    result |= run_metadata() | {"wall_s": round(time.monotonic() - started)}
    result |= {  # no engine runs here: what the figures are of
        "target": "none: refs in a local bare repository, records as deploys leave them",
        "engine": "none: no deploy runs (a pushed commit's sync is refused: no project in it)",
        "load_average_1m_at_start": load_at_start,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        merge_results({KEY: result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
