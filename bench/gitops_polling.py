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
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import merge_results, run_metadata, say
from gitops_rig import (
    INTERVAL_S,
    RUNNER_POLL_S,
    branch_of,
    database,
    first_sync_run,
    flow_runs_by_flow,
    git,
    hook_up,
    make_project,
    make_repository,
    names,
    push,
    seed_records,
    serving,
    tree_cpu_s,
    wait_served,
)

KEY = "gitops_polling"


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


def push_latency(work: Path, environment: str, hooked: bool) -> dict[str, Any]:
    """Push a commit to the environment's branch; seconds until its sync run was created, picked
    up (Pending) and running."""
    pushed, told = push(
        work,
        f"refs/heads/{branch_of(environment)}",
        {"PUSHED.md": f"{environment} {time.time()}\n"},
    )
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
    except BaseException:
        say(f"kept {folder} (serve.log, the Prefect server's home) for a look")
        raise
    else:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        for key in env:
            os.environ.pop(key, None)
        stop_prefect_server(server.pid)


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
        say(f"{design}: nothing changing: {json.dumps(figures)}")
        if design == "after" and pushes:
            hook_up(origin, env["PREFECT_API_URL"])
            chosen = random.Random(7).sample(environments, pushes + unhooked)
            hooked = []
            for env_name in chosen[:pushes]:
                time.sleep(random.uniform(0, RUNNER_POLL_S))  # any phase of the runner's poll
                hooked.append(push_latency(work, env_name, hooked=True))
                say(f"push through the hook: {hooked[-1]}")
            hook_up(origin, None)
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
